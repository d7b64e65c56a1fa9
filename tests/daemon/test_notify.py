"""sd_notify over a real AF_UNIX datagram socket, with systemd-python and with the stdlib fallback."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid

import pytest

from staticpodd.node.notify import Notifier


@pytest.fixture
def path_socket():
    d = tempfile.mkdtemp(prefix="spn-", dir="/tmp")  # short: sun_path is 108 bytes
    path = os.path.join(d, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()
    os.unlink(path)
    os.rmdir(d)


@pytest.fixture
def abstract_socket():
    name = f"staticpodd-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(5)
    yield "@" + name, sock
    sock.close()


IMPLS = ["stdlib", "systemd"]


def notifier(address: str, impl: str, monkeypatch) -> Notifier:
    """A Notifier for ``address``; systemd-python reads the real environment, so set it there."""
    if impl == "systemd":
        pytest.importorskip("systemd.daemon", reason="systemd-python is not installed")
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    return Notifier(impl=impl)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_ready_with_status_arrives_as_one_datagram(impl, kind, path_socket, abstract_socket, monkeypatch):
    address, sock = path_socket if kind == "path" else abstract_socket
    n = notifier(address, impl, monkeypatch)
    assert n.enabled and n.impl == impl
    assert n.ready("4 live, 0 parked\nsecond line")
    msg = sock.recv(4096).decode()
    assert msg == "READY=1\nSTATUS=4 live, 0 parked second line"


@pytest.mark.parametrize("impl", IMPLS)
def test_reloading_carries_monotonic_usec_and_stopping(impl, abstract_socket, monkeypatch):
    address, sock = abstract_socket
    n = notifier(address, impl, monkeypatch)
    assert n.reloading()
    lines = sock.recv(4096).decode().split("\n")
    assert lines[0] == "RELOADING=1" and lines[1].startswith("MONOTONIC_USEC=")
    assert int(lines[1].split("=")[1]) > 0
    assert n.stopping("stopping")
    assert sock.recv(4096) == b"STOPPING=1\nSTATUS=stopping"
    assert n.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"


def test_stopping_without_status_is_just_stopping(abstract_socket):
    address, sock = abstract_socket
    Notifier({"NOTIFY_SOCKET": address}, impl="stdlib").stopping()
    assert sock.recv(4096) == b"STOPPING=1"


def test_auto_uses_stdlib_for_an_env_that_is_not_the_process_environment(abstract_socket, monkeypatch):
    address, sock = abstract_socket
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = Notifier({"NOTIFY_SOCKET": address})
    assert n.impl == "stdlib" and n.ready()
    assert sock.recv(4096) == b"READY=1"


def test_without_notify_socket_nothing_is_sent():
    n = Notifier({})
    assert not n.enabled and n.impl == "none"
    assert n.ready("x") is False and n.watchdog() is False
    assert n.watchdog_interval() is None


def test_a_dead_socket_is_reported_not_raised(tmp_path):
    n = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody")}, impl="stdlib")
    assert n.ready() is False


def test_watchdog_interval_is_half_of_watchdog_usec_for_this_pid(abstract_socket):
    address, _sock = abstract_socket
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "4000000"}
    assert Notifier(env).watchdog_interval() == 2.0
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid())}).watchdog_interval() == 2.0
    assert Notifier({**env, "WATCHDOG_PID": str(os.getpid() + 1)}).watchdog_interval() is None
    assert Notifier({**env, "WATCHDOG_USEC": "0"}).watchdog_interval() is None
    assert Notifier({**env, "WATCHDOG_USEC": "soon"}).watchdog_interval() is None
