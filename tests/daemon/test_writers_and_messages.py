"""A restore or quarantine never acts on a file still open for writing; INVALID_LIVE says the
truth about size limits and parked components.

Real parts only: real child processes holding files open (their /proc/PID/fd and fdinfo), the
real staticpodd subprocess with inotify on a tmp_path --root, real SQLite and journald. Only
systemd's supervision is stood in for (the test owns NOTIFY_SOCKET).
"""

from __future__ import annotations

import os
import time

import pytest
from daemon_harness import (
    head_digest,
    history,
    hold_open,
    journal,
    make_root,
    release,
    sha,
    slow_writer,
    staticpodctl,
    wait_journal,
    wait_until,
)

from staticpodd.node.watch import open_writers

MANIFESTS = "etc/kubernetes/manifests"


@pytest.mark.parametrize("mode", ["r+b", "ab", "wb"])
def test_open_writers_finds_a_child_holding_the_file_open_for_writing(tmp_path, mode):
    path = tmp_path / "kube-scheduler.yaml"
    path.write_bytes(b"kind: Pod\n")
    child = hold_open(path, mode)
    try:
        found = open_writers(path)
        assert [w.pid for w in found] == [child.pid], found
        assert found[0].comm and found[0].fd >= 0
        # by identity, not by name: a rename does not hide the writer
        moved = tmp_path / "renamed.yaml"
        os.rename(path, moved)
        assert [w.pid for w in open_writers(moved)] == [child.pid]
        # another file with the same contents is not held
        other = tmp_path / "other.yaml"
        other.write_bytes(b"kind: Pod\n")
        assert open_writers(other) == []
    finally:
        release(child)
    assert open_writers(moved) == []


def test_open_writers_ignores_readers_and_missing_files(tmp_path):
    path = tmp_path / "etcd.yaml"
    path.write_bytes(b"kind: Pod\n")
    child = hold_open(path, "rb")
    try:
        assert open_writers(path) == []
    finally:
        release(child)
    assert open_writers(tmp_path / "missing.yaml") == []


def _waits(root, pid: int) -> list[dict]:
    return [e for e in journal(root, "POLICY_ACTION_HELD") if e.get("HELD_BY_PID") == str(pid)]


def test_a_slow_write_under_restore_is_not_restored_over_while_it_is_being_written(tmp_path, run_daemon):
    """The newcomer's repro: ``( head -c 700 new; sleep; tail -c +701 new ) > live``. The daemon
    sees the half-written file after its debounce; it must wait for the writer, so the complete
    new manifest ends up on disk and in history, and nothing is restored."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "kube-scheduler.yaml"
    old = live.read_bytes()
    new = old.replace(b"    - --leader-elect=true\n", b"    - --leader-elect=true\n    - --v=4\n")
    assert new != old and len(new) > 700
    d = run_daemon(root)
    d.wait_ready()
    inode = live.stat().st_ino
    child = slow_writer(live, new[:700])
    try:
        wait = wait_until(lambda: _waits(root, child.pid), timeout=20, what="the restore waits for the writer")[0]
        assert f"pid {child.pid} (" in wait["MESSAGE"] and "waits for the writer to close" in wait["MESSAGE"]
        assert wait["HELD_BY_COMM"]
        # well past the debounce and a few re-checks: still not restored over, still one wait entry
        wait_until(lambda: d.heartbeat().get("last_loop", 0) > float(wait["__REALTIME_TIMESTAMP"]) / 1e6 + 2.5)
        assert live.read_bytes() == new[:700] and live.stat().st_ino == inode
        assert len(_waits(root, child.pid)) == 1
        inv = [e for e in journal(root, "INVALID_LIVE") if "HELD_BY_PID" not in e]
        assert inv and all("restoring the last good version once it is closed" in e["MESSAGE"] for e in inv), [
            e["MESSAGE"] for e in inv
        ]
        assert child.stdin is not None
        child.stdin.write(new[700:])
    finally:
        release(child)
    wait_until(lambda: head_digest(root, "kube-scheduler") == sha(new), what="the complete write recorded")
    assert live.read_bytes() == new and live.stat().st_ino == inode
    assert sha(new[:700]) in [v.digest for v in history(root, "kube-scheduler")]  # bad bytes kept too
    assert journal(root, "RESTORED_LAST_GOOD") == []
    wait_until(lambda: d.heartbeat().get("problems") == [] or None, what="no problems left")


def test_an_invalid_write_is_restored_once_its_writer_closes_it(tmp_path, run_daemon):
    """The writer closes the file still invalid: the close-write event (or the periodic
    re-check) brings the held restore back, and it happens."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / MANIFESTS / "etcd.yaml"
    good = live.read_bytes()
    d = run_daemon(root)
    d.wait_ready()
    child = slow_writer(live, b"apiVersion: v1\nkind: Pod\nspec: {}\n")
    try:
        wait_until(lambda: _waits(root, child.pid), timeout=20, what="the restore waits for the writer")
        assert live.read_bytes() != good
    finally:
        release(child)
    wait_until(lambda: live.read_bytes() == good, what="etcd.yaml restored after the writer closed it")
    wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("COMPONENT") == "etcd")


def test_a_stray_is_not_quarantined_while_it_is_open_for_writing(tmp_path, run_daemon):
    root = make_root(tmp_path, "on_stray: quarantine\ndebounce: 0.2\n")
    mdir = root / MANIFESTS
    stray = mdir / "etcd.yaml.bak"
    child = slow_writer(stray, (mdir / "etcd.yaml").read_bytes())
    d = run_daemon(root)
    d.wait_ready()
    try:
        e = wait_journal(root, "POLICY_ACTION_HELD", lambda e: e.get("HELD_BY_PID") == str(child.pid))
        assert "quarantine waits for the writer" in e["MESSAGE"]
        assert stray.exists()
    finally:
        release(child)
    wait_until(lambda: not stray.exists(), what="etcd.yaml.bak quarantined after its writer closed it")


def test_a_valid_manifest_over_our_size_limit_says_the_kubelet_still_runs_it(tmp_path, run_daemon):
    """1.2 MB put in place with cp+mv: over staticpodd's max_manifest_bytes (1 MiB) but under the
    kubelet's 10 MiB (pkg/kubelet/config/file.go maxConfigLength). The kubelet runs it, so even
    under restore it is left alone (on_invalid=restore acts only on what the kubelet refuses:
    two levels), and the message says that this is staticpodd's own limit."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    mdir = root / MANIFESTS
    live = mdir / "kube-scheduler.yaml"
    good = live.read_bytes()
    big = good + b"# padding\n" * 120_000
    assert 1 << 20 < len(big) < 10 * 1024 * 1024
    d = run_daemon(root)
    d.wait_ready()
    tmp = root / "kube-scheduler.yaml.new"
    tmp.write_bytes(big)
    os.rename(tmp, live)
    e = wait_journal(root, "INVALID_LIVE", lambda e: e.get("FILE_NAME") == "kube-scheduler.yaml")
    msg = e["MESSAGE"]
    assert f"is {len(big)} bytes, over staticpodd's limit max_manifest_bytes=1048576" in msg, msg
    assert "still runs it" in msg and "drops its pod" not in msg, msg
    assert "not restored: the kubelet runs this file" in msg, msg
    assert e["PRIORITY"] == "4" and e["SIZE"] == str(len(big)) and e["KUBELET"] == "accepts"
    assert e["POLICY_ACTION"] == "none"
    time.sleep(1.0)  # well past the 0.2 s debounce: nothing was put back
    assert live.read_bytes() == big
    assert sha(big) in [v.digest for v in history(root, "kube-scheduler")]


def test_an_invalid_write_to_a_parked_components_live_path_says_why_it_is_not_restored(tmp_path, run_daemon):
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    mdir = root / MANIFESTS
    assert staticpodctl(root, "park", "kube-scheduler").returncode == 0
    d = run_daemon(root)
    d.wait_ready()
    bad = b"apiVersion: v1\nkind: Pod\nspec: {}\n"
    (mdir / "kube-scheduler.yaml").write_bytes(bad)
    e = wait_journal(root, "INVALID_LIVE", lambda e: e.get("FILE_NAME") == "kube-scheduler.yaml")
    assert "policy on_invalid=alert" not in e["MESSAGE"], e["MESSAGE"]
    assert "kube-scheduler is parked" in e["MESSAGE"] and "does not apply to a parked" in e["MESSAGE"]
    assert e["POLICY"] == "restore" and e["POLICY_ACTION"] == "none"
    assert (mdir / "kube-scheduler.yaml").read_bytes() == bad
