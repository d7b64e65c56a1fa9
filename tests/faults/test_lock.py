"""The lock under faults: a full /run, and a hostile local user.

A fault seen before: ``FileLock.acquire`` took the flock, then the pid ``pwrite`` raised ENOSPC and
the descriptor was never closed: the process (the daemon) held the flock for good, and every
staticpodctl exited 5 after space came back. Now writing the holder's pid is best effort and the
descriptor is closed on every error path.

A fault seen before: ``/run/staticpodd/lock`` was 0644 and flock(2) works on a read-only descriptor,
so any local user could block every staticpodctl and the daemon's start. Now the lock file and
the daemon's pid file are 0600 (an older 0644 one is tightened), so an unprivileged user cannot
open them. Tested as the real user ``nobody`` with util-linux's ``runuser`` and ``flock``.

Real tmpfs mounts (the suite runs as root), real processes, real daemon.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_harness import Daemon, NotifySocket, make_root, wait_until
from faultlib import Tmpfs, assert_no_traceback, recorded, run_ctl, sha
from spd_testlib import small_pod

from staticpodd.node.lock import FileLock


@pytest.fixture
def run_tmpfs(tmp_path: Path) -> Iterator[tuple[Path, Tmpfs]]:
    """A node root whose /run is a 64 KiB tmpfs."""
    root = make_root(tmp_path)
    fs = Tmpfs(root / "run", 64 * 1024)
    try:
        yield root, fs
    finally:
        fs.close()


def test_enospc_writing_the_holder_pid_does_not_leave_the_lock_held(run_tmpfs: tuple[Path, Tmpfs]) -> None:
    root, fs = run_tmpfs
    lock_path = root / "run/staticpodd/lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fs.fill_to(0)
    lk = FileLock(lock_path, description="test")
    try:
        lk.acquire(1.0)  # the pid text cannot be written: the lock works all the same
        assert lk.held
        lk.release()
    except OSError:
        pass  # the old code raised ENOSPC here (and kept the flocked descriptor)
    fs.unfill()
    free = subprocess.run(["flock", "-n", "-x", str(lock_path), "true"], capture_output=True)
    assert free.returncode == 0, "the lock is still held by this process after the ENOSPC"


def test_a_daemon_on_a_full_run_does_not_lock_out_staticpodctl_after_space_returns(
        run_tmpfs: tuple[Path, Tmpfs]) -> None:
    root, fs = run_tmpfs
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    notify = NotifySocket()
    d = Daemon(root, notify)
    try:
        d.wait_ready()
        fs.fill_to(0)
        edited = live.read_bytes() + b"# hand edit while /run is full\n"
        live.write_bytes(edited)
        wait_until(lambda: sha(edited) in {sha(r[4]) for r in recorded(root, "kube-scheduler")}, timeout=20,
                   what="the daemon records the hand edit with /run full")
        fs.unfill()
        res = run_ctl(root, "park", "kube-scheduler", "--lock-timeout", "5")
        assert res.returncode == 0, (res.stdout, res.stderr)
        assert d.proc.poll() is None
        assert "Traceback" not in d.stderr, d.stderr
        assert_no_traceback(res.stdout, res.stderr)
        assert (root / "etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml").read_bytes() == edited
    finally:
        if d.proc.poll() is None:
            d.stop()
        notify.close()


@pytest.fixture
def open_root() -> Iterator[Path]:
    """A root under a world-traversable directory (pytest's tmp_path is 0700, which would hide the
    lock from ``nobody`` whatever its mode, and prove nothing)."""
    base = Path(tempfile.mkdtemp(prefix="spd-hostile-", dir="/tmp"))
    os.chmod(base, 0o755)
    root = base / "root"
    (root / "etc/kubernetes/manifests").mkdir(parents=True)
    for p in (root, root / "etc", root / "etc/kubernetes"):
        os.chmod(p, 0o755)
    (root / "etc/kubernetes/manifests/web.yaml").write_text(small_pod("web"))
    try:
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_nobody(*cmd: str) -> list[str]:
    if shutil.which("runuser") is None or shutil.which("flock") is None:
        pytest.fail("runuser and flock (util-linux, .ci/apt-packages.txt) are needed")
    return ["runuser", "-u", "nobody", "--", *cmd]


def test_an_unprivileged_user_cannot_take_the_lock(open_root: Path) -> None:
    root = open_root
    assert run_ctl(root, "recover").returncode == 0  # creates run/staticpodd/lock
    lock = root / "run/staticpodd/lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    hostile = subprocess.Popen(_as_nobody("flock", "-x", str(lock), "sleep", "45"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        try:
            _, err = hostile.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            err = ""
        assert hostile.returncode not in (None, 0), "nobody holds the lock"
        assert "Permission denied" in err
        res = run_ctl(root, "park", "web", "--lock-timeout", "3")
        assert res.returncode == 0, (res.stdout, res.stderr)
    finally:
        if hostile.poll() is None:
            hostile.kill()
            hostile.wait()


def test_a_lock_file_left_0644_by_an_older_release_is_tightened(open_root: Path) -> None:
    root = open_root
    lock = root / "run/staticpodd/lock"
    lock.parent.mkdir(parents=True)
    os.chmod(lock.parent, 0o755)
    lock.write_text("")
    os.chmod(lock, 0o644)
    assert run_ctl(root, "recover").returncode == 0
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    denied = subprocess.run(_as_nobody("flock", "-n", "-x", str(lock), "true"), capture_output=True, text=True)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr


def test_an_unprivileged_user_cannot_block_the_daemons_start(open_root: Path) -> None:
    root = open_root
    notify = NotifySocket()
    try:
        d = Daemon(root, notify)
        d.wait_ready()
        assert d.stop() == 0
        pid_file = root / "run/staticpodd/staticpodd.pid"
        assert stat.S_IMODE(pid_file.stat().st_mode) == 0o600
        hostile = subprocess.Popen(_as_nobody("flock", "-x", str(pid_file), "sleep", "45"),
                                   stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        try:
            d2 = Daemon(root, notify)
            d2.wait_ready()
            assert d2.stop() == 0
        finally:
            if hostile.poll() is None:
                hostile.kill()
            hostile.wait()
    finally:
        notify.close()
