"""Files being written are held back from restore/quarantine even when /proc cannot show the writer.

Under the shipped unit (CapabilityBoundingSet without CAP_SYS_PTRACE) the kernel's ptrace access
check hides /proc/PID/fd of every process with more capabilities than staticpodd, so the /proc
scan (:func:`staticpodd.node.watch.open_writers`) finds no writer; inotify (:class:`OpenWrites`: changed,
not yet closed) must. Real parts only: real inotify through watchdog on tmp_path, real child
processes writing, the real staticpodd subprocess started under ``setpriv`` with the unit's
bounding set (CAP_CHOWN CAP_FOWNER CAP_DAC_READ_SEARCH), real SQLite and journald. Only systemd's
supervision is stood in for (the test owns NOTIFY_SOCKET). The stall bound is checked on the
daemon's :class:`~staticpodd.daemon.writers.WriterHolds` over a stand-in layout (waiting the real
60 s is not a unit test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from daemon_harness import REPO, Daemon, head_digest, journal, make_root, sha, slow_writer, wait_journal, wait_until

from staticpodd.daemon.writers import WriterHolds
from staticpodd.node.watch import WRITE_STALL, Hint, Hints, OpenWrites, Watcher

MANIFESTS = "etc/kubernetes/manifests"
#: the bounding set of systemd/staticpodd.service
SETPRIV = ["setpriv", "--bounding-set", "-all,+chown,+fowner,+dac_read_search", "--inh-caps", "-all"]


# -- OpenWrites from real inotify ---------------------------------------------------------------
def _seen(hints: Hints, hint: Hint) -> bool:
    return hint in hints.take_all()


def test_open_writes_marks_a_file_from_its_first_write_until_its_close_write(tmp_path):
    mdir = tmp_path / "manifests"
    mdir.mkdir()
    live = mdir / "kube-scheduler.yaml"
    live.write_bytes(b"kind: Pod\n")
    hints = Hints(debounce=0)
    w = Watcher(mdir, hints)
    assert w.ensure() == "started"
    try:
        assert hints.writes.since("kube-scheduler.yaml") is None
        with open(live, "r+b") as fh:
            fh.write(b"kind: P")
            fh.flush()
            wait_until(lambda: hints.writes.since("kube-scheduler.yaml") is not None, timeout=10)
            assert hints.writes.names() == {"kube-scheduler.yaml"}
        wait_until(lambda: hints.writes.since("kube-scheduler.yaml") is None, timeout=10, what="close-write")

        # chmod and a symlink are no writes (watchdog reports IN_ATTRIB apart, or mtime != ctime)
        hints.take_all()
        os.chmod(live, 0o600)
        os.symlink("kube-scheduler.yaml", mdir / "etcd.yaml")
        wait_until(lambda: _seen(hints, Hint("file", "etcd.yaml")), timeout=10)
        assert hints.writes.names() == set()

        # a writer whose name is replaced by rename (an atomic write over it): the name is done
        new = mdir / "kube-apiserver.yaml"
        fh = open(new, "wb")
        try:
            fh.write(b"half")
            fh.flush()
            wait_until(lambda: hints.writes.since("kube-apiserver.yaml") is not None, timeout=10)
            (mdir / ".tmp").write_bytes(b"kind: Pod\n")
            os.rename(mdir / ".tmp", new)
            wait_until(lambda: hints.writes.since("kube-apiserver.yaml") is None, timeout=10, what="rename")
        finally:
            fh.close()
        # a complete file moved in from elsewhere (watchdog: "created") is no write
        outside = tmp_path / "kube-controller-manager.yaml"
        outside.write_bytes(b"kind: Pod\n")
        os.rename(outside, mdir / outside.name)
        wait_until(lambda: _seen(hints, Hint("file", outside.name)), timeout=10)
        assert hints.writes.names() == set()
        # a file created and left open (a writer about to write) counts from its creation
        fh = open(mdir / "etcd.yaml.bak", "xb")
        try:
            wait_until(lambda: hints.writes.since("etcd.yaml.bak") is not None, timeout=10)
        finally:
            fh.close()
        wait_until(lambda: hints.writes.since("etcd.yaml.bak") is None, timeout=10)
    finally:
        w.stop()
        hints.close()


def test_open_writes_tells_a_write_from_a_chmod_when_watchdog_reports_both_as_modified(tmp_path):
    """watchdog < 5 has no FileAttribEvent: IN_ATTRIB arrives as "modified"."""
    writes = OpenWrites(attrib_as_modify=True)
    path = tmp_path / "etcd.yaml"
    with open(path, "wb") as fh:
        fh.write(b"kind: Pod\n")
        fh.flush()
        writes.note("modified", "etcd.yaml", str(path))  # a write sets mtime == ctime
        assert writes.since("etcd.yaml") is not None
    writes.note("closed", "etcd.yaml", str(path))
    assert writes.since("etcd.yaml") is None
    os.utime(path, ns=(10**18, 10**18))  # attribute change only: ctime moves, mtime is set back
    writes.note("modified", "etcd.yaml", str(path))
    assert writes.since("etcd.yaml") is None
    os.link(path, tmp_path / "etcd.yaml.bak")
    writes.note("created", "etcd.yaml.bak", str(tmp_path / "etcd.yaml.bak"))  # a new hard link
    os.symlink("etcd.yaml", tmp_path / "kube-scheduler.yaml")
    writes.note("created", "kube-scheduler.yaml", str(tmp_path / "kube-scheduler.yaml"))
    assert writes.names() == set()
    with open(path, "ab") as fh:
        fh.write(b"# more\n")
        fh.flush()
        writes.note("modified", "etcd.yaml", str(path))
    assert writes.since("etcd.yaml") is not None
    writes.note("deleted", "etcd.yaml", str(path))
    assert writes.since("etcd.yaml") is None


# -- the stall bound ----------------------------------------------------------------------------
def _holder(path: Path) -> subprocess.Popen[str]:
    code = f"import sys\nfh = open({str(path)!r}, 'ab')\nprint('open', flush=True)\nsys.stdin.read()\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "open"
    return child


def test_a_writer_silent_for_write_stall_seconds_no_longer_holds_the_restore(tmp_path, monkeypatch):
    path = tmp_path / "kube-scheduler.yaml"
    path.write_bytes(b"kind: Pod\n")
    st = path.stat()
    logged: list[tuple[Any, str, dict[str, Any]]] = []
    hints = Hints(debounce=0)
    holds = WriterHolds(layout=lambda: SimpleNamespace(manifest_dir=tmp_path), hints=lambda: hints,  # type: ignore[arg-type,return-value]
                        log=lambda event, message, **fields: logged.append((event, message, fields)))
    holds.scan_stats = {path.name: (st.st_size, st.st_mtime_ns, st.st_ino)}
    holds.note_proc_denied = lambda denied: None  # type: ignore[method-assign]

    def hold() -> Any:
        return holds.hold_reason(path.name, "restore")

    try:
        assert hold() is None
        # a writer /proc does not show (no CAP_SYS_PTRACE) that the kernel counts: inotify's
        # memory of its change holds the restore, until the writer has been silent WRITE_STALL
        import staticpodd.daemon.writers as writers_mod

        hidden = _holder(path)
        try:
            monkeypatch.setattr(writers_mod, "open_writers", lambda p, denied=None: [])
            hints.writes.note("modified", path.name, str(path))
            assert hold() == ("writer", [])
            hints.writes.note("modified", path.name, str(path), now=time.monotonic() - WRITE_STALL - 1)
            assert hold() is None and hold() is None
            assert len(logged) == 1 and "stalled" in logged[0][1]
            assert logged[0][2]["policy_action"] == "stalled-writer"
            # the kernel says nobody has it open for writing any more: inotify's memory of the
            # change (its close event not in yet) holds nothing (a bad write just before a stop)
            hints.writes.note("modified", path.name, str(path))
            assert hold() == ("writer", [])
        finally:
            assert hidden.stdin is not None
            hidden.stdin.close()
            hidden.wait(10)
            monkeypatch.undo()
        assert hints.writes.since(path.name) is not None and hold() is None
        hints.writes.note("closed", path.name, str(path))

        # a writer seen in /proc (we run with every capability) and no inotify mark: its age is
        # the file's mtime
        child = _holder(path)
        try:
            os.utime(path, (time.time() - WRITE_STALL - 5,) * 2)
            st = path.stat()
            holds.scan_stats = {path.name: (st.st_size, st.st_mtime_ns, st.st_ino)}
            holds.stalled = set()
            assert hold() is None
            assert f"pid {child.pid} (" in logged[-1][1] and logged[-1][2]["held_by_pid"] == str(child.pid)
            os.utime(path)
            st = path.stat()
            holds.scan_stats = {path.name: (st.st_size, st.st_mtime_ns, st.st_ino)}
            why, writers = hold()
            assert why == "writer" and [w.pid for w in writers] == [child.pid]
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(10)
    finally:
        hints.close()


# -- the real daemon without CAP_SYS_PTRACE -----------------------------------------------------
class CappedDaemon(Daemon):
    """staticpodd started through ``setpriv`` with the unit's capability bounding set."""

    def __init__(self, root: Path, notify: Any) -> None:  # mirrors Daemon.__init__
        self.root = root
        self.notify = notify
        notify._pump(0.001)
        self.first_message = len(notify.messages)
        env = dict(os.environ)
        env["NOTIFY_SOCKET"] = notify.name
        env.pop("WATCHDOG_PID", None)
        env["WATCHDOG_USEC"] = "2000000"
        self.stderr_path = root.parent / f"staticpodd-{uuid.uuid4().hex[:6]}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [*SETPRIV, sys.executable, "-m", "staticpodd.daemon", "--root", str(root)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            cwd=str(REPO),
        )


def test_the_start_up_probe_names_the_processes_the_proc_scan_cannot_see(tmp_path):
    """``hidden_from_proc`` (the daemon's one probe at start: a listing and at most one readlink per
    process) finds the processes whose descriptors ``open_writers`` is denied, under the unit's
    capability bounding set; processes that come or go between the calls aside."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("this test needs root and setpriv (util-linux), as in CI")
    code = ("import json\nfrom staticpodd.node.watch import hidden_from_proc, open_writers\n"
            "a = hidden_from_proc(); d = set(); open_writers('/', denied=d); c = hidden_from_proc()\n"
            "print(json.dumps([sorted(a), sorted(d), sorted(c)]))\n")
    out = subprocess.run([*SETPRIV, sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True,
                         check=True).stdout
    before, denied, after = (set(x) for x in json.loads(out))
    stable = before & after
    assert 1 in stable  # pid 1 holds every capability
    assert stable <= denied <= before | after


@pytest.fixture
def capped_daemon(notify_socket):
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.fail("these tests need root and setpriv (util-linux), as in CI")
    started: list[CappedDaemon] = []

    def start(root: Path) -> CappedDaemon:
        d = CappedDaemon(root, notify_socket)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.stop()


def _inotify_waits(root: Path, file_name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in journal(root, "POLICY_ACTION_HELD")
        if e.get("HELD_BY") == "inotify" and e.get("FILE_NAME") == file_name
    ]


def test_a_slow_write_is_not_restored_over_by_a_daemon_without_cap_sys_ptrace(tmp_path, capped_daemon):
    """The issue's repro: the daemon cannot see the root writer in /proc, says so once, and
    still waits for the write to finish: the complete new manifest stays, nothing is restored."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "kube-scheduler.yaml"
    old = live.read_bytes()
    new = old.replace(b"--leader-elect=true", b"--leader-elect=false")
    assert new != old and len(new) > 700
    d = capped_daemon(root)
    d.wait_ready()
    started = wait_journal(root, "DAEMON_STARTED")
    assert started.get("WRITER_INSPECTION") == "inotify", started
    limited = wait_journal(root, "WRITER_INSPECTION_LIMITED", lambda e: e.get("FINDING") == "writer-inspection-limited")
    assert "CAP_SYS_PTRACE" in limited["MESSAGE"]
    inode = live.stat().st_ino
    child = slow_writer(live, new[:700])
    try:
        wait = wait_until(lambda: _inotify_waits(root, live.name), timeout=20, what="the restore waits")[0]
        assert "waits for the writer to close the file" in wait["MESSAGE"] and "60 s" in wait["MESSAGE"]
        # well past the debounce and a few 1 s re-checks: still the half-written bytes, one wait entry
        wait_until(lambda: d.heartbeat().get("last_loop", 0) > float(wait["__REALTIME_TIMESTAMP"]) / 1e6 + 2.5)
        assert live.read_bytes() == new[:700] and live.stat().st_ino == inode
        assert len(_inotify_waits(root, live.name)) == 1
        assert child.stdin is not None
        child.stdin.write(new[700:])
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
    wait_until(lambda: head_digest(root, "kube-scheduler") == sha(new), what="the complete write recorded")
    assert live.read_bytes() == new and live.stat().st_ino == inode
    assert journal(root, "RESTORED_LAST_GOOD") == []
    assert len([e for e in journal(root, "WRITER_INSPECTION_LIMITED") if e.get("FINDING") == "writer-inspection-limited"]) == 1


def test_an_invalid_write_is_still_restored_once_closed_by_a_daemon_without_cap_sys_ptrace(tmp_path, capped_daemon):
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "etcd.yaml"
    good = live.read_bytes()
    d = capped_daemon(root)
    d.wait_ready()
    child = slow_writer(live, b"apiVersion: v1\nkind: Pod\nspec: {}\n")
    try:
        wait_until(lambda: _inotify_waits(root, live.name), timeout=20, what="the restore waits")
        assert live.read_bytes() != good
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)
    wait_until(lambda: live.read_bytes() == good, what="etcd.yaml restored after the writer closed it")
    wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("COMPONENT") == "etcd")
