"""The daemon and a manifest directory its sandbox shows read-only , on the host.

Under the unit, ``ProtectSystem=strict`` makes everything read-only except the ``ReadWritePaths=``
bind mounts systemd made at start: a directory created (or recreated) later is seen read-only.
Here the same view is built with bind mounts (needs root): ``<root>/etc/kubernetes`` becomes a
read-only bind of itself, and the directory is created through a writable alias of it, as
kubeadm creates it outside the daemon's mount namespace. The real daemon process runs with a
NOTIFY_SOCKET (as under systemd); the booted-node tests (tests/node) do the same with the unit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_harness import Daemon, NotifySocket, journal, make_root, wait_until

from staticpodd.node.sandbox import EXIT_SANDBOX

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="bind mounts need root")


@pytest.fixture
def notify() -> Iterator[NotifySocket]:
    s = NotifySocket()
    yield s
    s.close()


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def test_a_directory_that_appears_read_only_makes_the_daemon_exit_75_for_a_restart(tmp_path: Path,
                                                                                    notify: NotifySocket) -> None:
    root = make_root(tmp_path)
    kube = root / "etc/kubernetes"
    saved = tmp_path / "saved"
    shutil.move(str(kube / "manifests"), saved)  # installed before kubeadm: no directory yet
    alias = tmp_path / "alias"
    alias.mkdir()
    _mount("--bind", str(kube), str(alias))  # the writable view (kubeadm's, outside the sandbox)
    _mount("--bind", str(kube), str(kube))
    try:
        _mount("-o", "remount,bind,ro", str(kube))  # the daemon's view
        d = Daemon(root, notify)
        try:
            d.wait_ready()
            assert d.proc.poll() is None
            shutil.copytree(saved, alias / "manifests")  # kubeadm writes its manifests
            rc = d.proc.wait(timeout=20)
        finally:
            if d.proc.poll() is None:
                d.stop()
        assert rc == EXIT_SANDBOX, d.stderr
        entries = [e for e in journal(root, "DIRECTORY_PROBLEM") if e.get("FINDING") == "manifest-dir-read-only"]
        assert entries and entries[-1]["PRIORITY"] == "3" and entries[-1]["EXIT_STATUS"] == str(EXIT_SANDBOX)
        assert "restarts staticpodd" in entries[-1]["MESSAGE"]
    finally:
        subprocess.run(["umount", "-l", str(kube)], check=False)
        subprocess.run(["umount", "-l", str(alias)], check=False)


def test_a_directory_read_only_from_the_start_is_a_problem_not_a_restart_loop(tmp_path: Path,
                                                                              notify: NotifySocket) -> None:
    root = make_root(tmp_path)
    m = root / "etc/kubernetes/manifests"
    _mount("--bind", str(m), str(m))
    try:
        _mount("-o", "remount,bind,ro", str(m))
        d = Daemon(root, notify)
        try:
            d.wait_ready()
            hb = wait_until(lambda: (h := d.heartbeat()) and any(p["code"] == "manifest-dir-read-only"
                                                             for p in h.get("problems", [])) and h,
                            what="the read-only directory reported")
            assert d.proc.poll() is None, "no exit at start: it would only loop"
        finally:
            rc = d.stop()
        assert rc == 0
        assert [p for p in hb["problems"] if p["code"] == "manifest-dir-read-only"][0]["severity"] == "error"
        entries = [e for e in journal(root, "DIRECTORY_PROBLEM") if e.get("FINDING") == "manifest-dir-read-only"]
        assert entries and int(entries[0]["PRIORITY"]) <= 3
    finally:
        subprocess.run(["umount", "-l", str(m)], check=False)
