"""Helpers for running the real staticpodd as a subprocess on a tmp_path --root.

Nothing is mocked: a real inotify watch, real SQLite, real journald (entries read back with
``journalctl -o json STATICPODD_ROOT=<root>``), and a datagram socket owned by the test standing
in for systemd's NOTIFY_SOCKET (systemd itself cannot supervise a test process here).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: When this process began reading the journal's sessions (whole seconds, a little early): as
#: spd_testlib.SESSION_START, a tmp_path of an earlier session can have the same name.
SESSION_START = int(time.time()) - 2
KUBEADM = {
    "kube-apiserver.yaml": "01-zetaoss-kubeadm-kube-apiserver.yaml",
    "kube-controller-manager.yaml": "02-zetaoss-kubeadm-kube-controller-manager.yaml",
    "kube-scheduler.yaml": "03-zetaoss-kubeadm-kube-scheduler.yaml",
    "etcd.yaml": "04-zetaoss-kubeadm-etcd.yaml",
}


def corpus_dir() -> Path:
    env = os.environ.get("STATICPODD_CORPUS")
    return Path(env) if env else REPO / ".." / "shared" / "corpus"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wait_until(fn: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or fn}")
        time.sleep(interval)


def make_root(tmp_path: Path, config: str | None = None) -> Path:
    """A node root with kubeadm's four control-plane manifests (0600) and an optional config."""
    corpus = corpus_dir() / "manifests"
    if not corpus.is_dir():
        pytest.skip(f"corpus not found at {corpus} (set STATICPODD_CORPUS); needs ../shared/corpus")
    root = tmp_path / "root"
    mdir = root / "etc/kubernetes/manifests"
    mdir.mkdir(parents=True)
    os.chmod(mdir, 0o700)
    for name, src in KUBEADM.items():
        shutil.copyfile(corpus / src, mdir / name)
        os.chmod(mdir / name, 0o600)
    if config is not None:
        (root / "etc/staticpodd").mkdir(parents=True)
        (root / "etc/staticpodd/staticpodd.yaml").write_text(config)
    return root


class NotifySocket:
    """An abstract AF_UNIX datagram socket standing in for systemd's notification socket."""

    def __init__(self) -> None:
        self.name = f"@staticpodd-test-{uuid.uuid4().hex}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._arrived = threading.Condition()
        self._closed = False
        # Read continuously, as systemd does: the queue of an unread datagram socket is short
        # (net.unix.max_dgram_qlen), and a full one would block the daemon's sd_notify().
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._closed:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            with self._arrived:
                self.messages.append(data.decode())
                self._arrived.notify_all()

    def _pump(self, timeout: float) -> None:
        """Wait up to ``timeout`` for another message to arrive."""
        with self._arrived:
            self._arrived.wait(max(0.001, timeout))

    def wait_for(self, pred: Callable[[str], bool], timeout: float = 15.0, *, after: int = 0) -> str:
        """The first message (index >= after) for which ``pred`` holds; waits up to ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.messages[after:]:
                if pred(m):
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no matching sd_notify message within {timeout} s; got {self.messages}")
            self._pump(min(left, 0.2))

    def assignments(self, key: str) -> list[str]:
        """Every value given to ``KEY=`` so far, in order."""
        out = []
        for m in self.messages:
            for line in m.split("\n"):
                if line.startswith(key + "="):
                    out.append(line[len(key) + 1 :])
        return out

    def close(self) -> None:
        self._closed = True
        self._reader.join(2)
        self.sock.close()


class Daemon:
    """One staticpodd subprocess: ``python -m staticpodd.daemon --root ROOT``; with
    ``count_parses``, the same daemon under tests/daemon/count_parses.py, which appends a line to
    that file for every YAML parse, JSON decode and validation it makes."""

    def __init__(
        self, root: Path, notify: NotifySocket, *, watchdog_usec: int | None = 2_000_000, args: list[str] | None = None,
        count_parses: Path | None = None,
    ) -> None:
        self.root = root
        self.notify = notify
        notify._pump(0.001)
        self.first_message = len(notify.messages)  # messages before this start belong to others
        env = dict(os.environ)
        env["NOTIFY_SOCKET"] = notify.name
        env.pop("WATCHDOG_PID", None)
        if watchdog_usec:
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        self.stderr_path = root.parent / f"staticpodd-{uuid.uuid4().hex[:6]}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        run = ["-m", "staticpodd.daemon"]
        if count_parses is not None:
            env["STATICPODD_COUNT_PARSES"] = str(count_parses)
            run = [str(Path(__file__).with_name("count_parses.py"))]
        self.proc = subprocess.Popen(
            [sys.executable, *run, "--root", str(root), *(args or [])],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            cwd=str(REPO),
        )

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for m in self.notify.messages[self.first_message :]:
                if "READY=1" in m.split("\n"):
                    return m
            if self.proc.poll() is not None:
                pytest.fail(f"staticpodd exited {self.proc.returncode} before READY:\n{self.stderr}")
            if time.monotonic() > deadline:
                pytest.fail(f"staticpodd not READY within {timeout} s:\n{self.stderr}")
            self.notify._pump(0.2)

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"staticpodd did not stop within {timeout} s:\n{self.stderr}")
        self._stderr.close()
        return rc

    def heartbeat(self) -> dict[str, Any]:
        try:
            return json.loads((self.root / "run/staticpodd/daemon.json").read_text())
        except (OSError, ValueError):
            return {}


def journal(root: Path, event: str | None = None) -> list[dict[str, Any]]:
    """journald entries of this test session for this root (optionally one STATICPODD_EVENT),
    oldest first (a tmp_path of an earlier session can have the same name: :data:`SESSION_START`)."""
    cmd = ["journalctl", "--no-pager", "-o", "json", f"--since=@{SESSION_START}", f"STATICPODD_ROOT={root}"]
    if event:
        cmd.append(f"STATICPODD_EVENT={event}")
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def wait_journal(
    root: Path, event: str, pred: Callable[[dict[str, Any]], bool] = lambda e: True, timeout: float = 30.0
) -> dict[str, Any]:
    """The first entry of ``event`` matching ``pred`` (polls journald up to ``timeout``)."""

    def find() -> dict[str, Any] | None:
        for e in journal(root, event):
            if pred(e):
                return e
        return None

    return wait_until(find, timeout, 0.1, what=f"journal {event} for {root}")


def history(root: Path, component: str) -> list[Any]:
    """Recorded versions of a component, read straight from the SQLite store."""
    from staticpodd.layout import Layout
    from staticpodd.store.versions import VersionStore

    db = Layout.build(root).db_path
    if not db.exists():
        return []
    store = VersionStore(db)
    try:
        return store.history(component)
    finally:
        store.close()


def head_digest(root: Path, component: str) -> str | None:
    h = history(root, component)
    return h[-1].digest if h else None


def staticpodctl(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "staticpodd.cli", "--root", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=str(REPO),
    )


def slow_writer(path: Path, first: bytes) -> subprocess.Popen[bytes]:
    """A child that truncates ``path``, writes ``first``, and then writes whatever comes on its
    stdin before closing the file: a slow, non-atomic write (``( head; sleep; tail ) > live``,
    ``cat > file`` from a pipe). It runs with the test's privileges (root in CI: every
    capability, as an admin's shell). Returns once the first part is written."""
    code = textwrap.dedent(
        f"""
        import sys
        fh = open({str(path)!r}, "wb")
        fh.write({first!r}); fh.flush()
        print("half", flush=True)
        rest = sys.stdin.buffer.read()
        fh.write(rest); fh.close()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline().strip() == b"half"
    return child


def hold_open(path: Path, mode: str) -> subprocess.Popen[str]:
    """A child that opens ``path`` with ``mode`` (``"r+b"``, ``"ab"``, ``"wb"`` …), says "open",
    and keeps it open until :func:`release` closes its stdin."""
    code = textwrap.dedent(
        f"""
        import sys
        fh = open({str(path)!r}, {mode!r})
        print("open", flush=True)
        sys.stdin.read()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "open"
    return child


def release(child: subprocess.Popen[str]) -> None:
    """Let a :func:`hold_open` child close its file and exit."""
    assert child.stdin is not None
    child.stdin.close()
    child.wait(10)
