"""The real staticpodd on a tmp_path --root: one daemon per root, on_invalid/on_stray together,
the live files' current validity, a symlinked staticPodPath, and what the journal says.

Only systemd's supervision is stood in for (the test owns NOTIFY_SOCKET); inotify, SQLite,
journald and the daemon process are real.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

import pytest
from daemon_harness import REPO, head_digest, history, journal, make_root, sha, staticpodctl, wait_journal, wait_until

from staticpodd.node.watch import Hint, Hints, Watcher

pytestmark = pytest.mark.slow

MANIFESTS = "etc/kubernetes/manifests"


def _config(root, text: str) -> None:
    (root / "etc/staticpodd").mkdir(parents=True, exist_ok=True)
    (root / "etc/staticpodd/staticpodd.yaml").write_text(text)


def _quarantined(mdir) -> list[str]:
    q = mdir / ".staticpodd" / "quarantine"
    return sorted(os.listdir(q)) if q.is_dir() else []


def test_a_second_daemon_on_the_same_root_exits_1_naming_the_running_pid(tmp_path, run_daemon):
    root = make_root(tmp_path)
    first = run_daemon(root)
    first.wait_ready()
    second = run_daemon(root)
    assert second.proc.wait(15) == 1
    assert f"pid {first.proc.pid}" in second.stderr and "already running" in second.stderr, second.stderr
    e = wait_journal(root, "DAEMON_START_FAILED", lambda e: e.get("RUNNING_PID") == str(first.proc.pid))
    assert e["PRIORITY"] == "3" and f"pid {first.proc.pid}" in e["MESSAGE"]
    # the refused daemon touched nothing: the heartbeat is still the running one's
    hb = first.heartbeat()
    assert hb["pid"] == first.proc.pid and hb["state"] == "running"
    assert (root / "run/staticpodd/staticpodd.pid").read_text().strip() == str(first.proc.pid)
    assert first.proc.poll() is None
    assert first.stop() == 0
    assert first.heartbeat()["state"] == "stopped"
    # the lock went with the process: the next daemon starts
    third = run_daemon(root)
    third.wait_ready()
    assert (root / "run/staticpodd/staticpodd.pid").read_text().strip() == str(third.proc.pid)


def test_an_invalid_write_made_while_down_is_restored_at_start_and_never_quarantined(tmp_path, run_daemon):
    """The start-up full scan finds the invalid write (no inotify hint): one pass must not both
    restore etcd.yaml and move it into quarantine as a "stray"."""
    root = make_root(tmp_path, "on_invalid: restore\non_stray: quarantine\n")
    mdir = root / MANIFESTS
    live = mdir / "etcd.yaml"
    good = live.read_bytes()
    d = run_daemon(root)
    d.wait_ready()
    assert d.stop() == 0
    live.write_bytes(b"kind: Pod\n")  # e.g. a truncated kubeadm write while the daemon was down
    (mdir / "etcd.yaml.bak").write_bytes(good)  # and a real stray next to it
    d2 = run_daemon(root)
    d2.wait_ready()
    assert live.exists(), f"etcd.yaml left the directory; quarantine holds {_quarantined(mdir)}"
    assert live.read_bytes() == good
    assert [n.startswith("etcd.yaml.bak.") for n in _quarantined(mdir)] == [True]
    r = wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("ACTOR") == "staticpodd" and "RESTORED_VERSION" in e)
    assert r["MESSAGE"].startswith("etcd.yaml: ") and "version None" not in r["MESSAGE"]
    assert r["VERSION"] == str(history(root, "etcd")[-1].seq) == "3" and r["RESTORED_VERSION"] == "1"
    strays = journal(root, "STRAY_FOUND")
    assert [e["FILE_NAME"] for e in strays] == ["etcd.yaml.bak"], [e["MESSAGE"] for e in strays]
    assert strays[0]["MESSAGE"].startswith("etcd.yaml.bak: stray file")
    assert wait_until(lambda: d2.heartbeat().get("problems") == [] or None, what="no problems left")


def test_an_invalid_file_found_under_alert_is_restored_once_the_policy_is_restore(tmp_path, run_daemon):
    """No change happens between the two passes: the reload's full rescan judges the live file's
    current validity, not only changes."""
    root = make_root(tmp_path, "debounce: 0.2\n")
    live = root / MANIFESTS / "kube-scheduler.yaml"
    good = live.read_bytes()
    d = run_daemon(root)
    d.wait_ready()
    live.write_bytes(b"apiVersion: v1\nkind: Pod\nspec: {}\n")
    e = wait_journal(root, "INVALID_LIVE", lambda e: e.get("FILE_NAME") == "kube-scheduler.yaml")
    assert e["POLICY"] == "alert"
    _config(root, "debounce: 0.2\non_invalid: restore\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: live.read_bytes() == good, what="kube-scheduler.yaml restored after the reload")
    r = wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("ACTOR") == "staticpodd" and "RESTORED_VERSION" in e)
    assert r["COMPONENT"] == "kube-scheduler" and r["RESTORED_VERSION"] == "1"
    assert head_digest(root, "kube-scheduler") == sha(good)


def test_a_broken_manifest_is_invalid_not_a_stray(tmp_path, run_daemon):
    """A manifest-named file that does not decode to a Pod (``kind: Pod`` alone, empty, no kind)
    is an invalid manifest (INVALID_LIVE, on_invalid), never a stray that on_stray moves out."""
    root = make_root(tmp_path, "debounce: 0.2\non_stray: quarantine\n")
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    broken = {"my-agent.yaml": b"kind: Pod\nmetadata: {}\n", "cut-short.yaml": b"", "half.json": b'{"spec": {}}'}
    for name, data in broken.items():
        (mdir / name).write_bytes(data)
    for name in broken:
        e = wait_journal(root, "INVALID_LIVE", lambda e, name=name: e.get("FILE_NAME") == name)
        assert e["MESSAGE"].startswith(f"{name} ")
    # true strays, for contrast: one by its name, one without a manifest suffix
    (mdir / "notes.txt").write_bytes(b"remember the milk\n")
    (mdir / "README").write_bytes(b"do not edit by hand\n")
    wait_until(lambda: not (mdir / "notes.txt").exists(), what="notes.txt quarantined")
    wait_until(lambda: not (mdir / "README").exists(), what="README quarantined")
    assert all((mdir / name).read_bytes() == data for name, data in broken.items())
    assert not any("not a Pod manifest" in e["MESSAGE"] and e.get("FILE_NAME") in broken for e in journal(root))
    strays = journal(root, "STRAY_FOUND")
    assert sorted(e["FILE_NAME"] for e in strays) == ["README", "notes.txt"]
    assert all(e["MESSAGE"].startswith(e["FILE_NAME"] + ": stray file") for e in strays)


def test_a_symlinked_manifest_dir_gets_hints_and_a_retargeted_link_is_watched_again(tmp_path, run_daemon):
    root = make_root(tmp_path, "rescan_interval: 2\ndebounce: 0.2\n")
    kube = root / "etc/kubernetes"
    os.rename(kube / "manifests", kube / "manifests-a")
    os.symlink("manifests-a", kube / "manifests")
    other = kube / "manifests-b"
    other.mkdir(mode=0o700)
    (other / "etcd.yaml").write_bytes((kube / "manifests-a/etcd.yaml").read_bytes())
    os.chmod(other / "etcd.yaml", 0o600)
    d = run_daemon(root)
    d.wait_ready()
    assert d.heartbeat()["watch"]["watching"]
    # an admin retargets the link (the kubelet follows the path: docs/kubelet-contract.md "Which files are pods")
    os.symlink("manifests-b", kube / ".manifests.new")
    os.rename(kube / ".manifests.new", kube / "manifests")
    e = wait_journal(root, "DIRECTORY_REWATCHED", timeout=15)
    assert e["CHANGE"] == "replaced"
    wait_until(lambda: d.heartbeat().get("summary", {}).get("live") == 1, what="1 live in manifests-b")
    gen = d.heartbeat()["watch"]["generation"]
    new = (other / "etcd.yaml").read_bytes() + b"# edited in the new target\n"
    (other / "etcd.yaml").write_bytes(new)
    wait_until(lambda: head_digest(root, "etcd") == sha(new), what="edit through the retargeted link recorded")
    assert d.heartbeat()["watch"]["generation"] == gen


def test_the_watcher_watches_the_directory_a_symlink_names(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "manifests"
    os.symlink("real", link)
    hints = Hints(0.0)
    w = Watcher(link, hints)
    try:
        assert w.ensure() == "started"
        (real / "kube-scheduler.yaml").write_bytes(b"x")
        select.select([hints.fileno()], [], [], 5)
        wait_until(lambda: Hint("file", "kube-scheduler.yaml") in hints.take_all(), timeout=5)
        assert w.ensure() is None
        other = tmp_path / "other"
        other.mkdir()
        os.unlink(link)
        os.symlink("other", link)
        assert w.ensure() == "replaced"
        (other / "etcd.yaml").write_bytes(b"y")
        wait_until(lambda: Hint("file", "etcd.yaml") in hints.take_all(), timeout=5)
    finally:
        w.stop()
        hints.close()


def test_staticpodd_check_config_and_reload_do_not_take_the_pid_lock(tmp_path, run_daemon):
    root = make_root(tmp_path)
    d = run_daemon(root)
    d.wait_ready()
    r = subprocess.run(
        [sys.executable, "-m", "staticpodd.daemon", "--root", str(root), "--check-config"],
        capture_output=True,
        text=True,
        cwd=str(REPO),
    )
    assert r.returncode == 0, r.stderr
    assert d.proc.poll() is None


@pytest.mark.parametrize("crashpoint", ["swap:staged", "swap:intent"])
def test_a_daemon_killed_mid_restore_is_followed_by_one_that_restores(tmp_path, run_daemon, monkeypatch, crashpoint):
    """The first daemon judges the invalid write, then dies (SIGKILL at a test crashpoint in the
    engine's swap, before the rename). The restarted one finds it recorded (by the interrupted
    restore's intent, or by its own scan), and must restore the invalid live file and must not
    quarantine it."""
    root = make_root(tmp_path, "on_invalid: restore\non_stray: quarantine\ndebounce: 0.2\n")
    mdir = root / MANIFESTS
    live = mdir / "etcd.yaml"
    good = live.read_bytes()
    monkeypatch.setenv("STATICPODD_TEST_CRASHPOINT", crashpoint)
    d = run_daemon(root)
    monkeypatch.delenv("STATICPODD_TEST_CRASHPOINT")
    d.wait_ready()
    live.write_bytes(b"kind: Pod\n")
    assert d.proc.wait(20) == -signal.SIGKILL
    assert live.read_bytes() == b"kind: Pod\n"
    d2 = run_daemon(root)
    d2.wait_ready()  # the start-up pass restores before READY
    assert live.read_bytes() == good, f"not restored; quarantine holds {_quarantined(mdir)}"
    assert _quarantined(mdir) == []
    assert history(root, "etcd")[-1].action == "restore"


def test_a_daemon_killed_between_the_restores_rename_and_its_record_leaves_a_store_the_next_start_completes(
        tmp_path, run_daemon, monkeypatch):
    """The restore on a writer's close records the refused bytes after its rename, with the
    restore (they wait in the store, with the intent committed before the rename). Killed
    between the rename and that record, the kubelet already has the good bytes back; the next
    start records both, in the order they happened: the refused write by ``external``, then
    the restore. Nothing is lost, nothing is left pending, nothing is restored twice."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 5\n")  # the close, not the debounce
    live = root / MANIFESTS / "etcd.yaml"
    good = live.read_bytes()
    bad = b"apiVersion: v1\nkind: Pod\n"
    monkeypatch.setenv("STATICPODD_TEST_CRASHPOINT", "swap:renamed")
    d = run_daemon(root)
    monkeypatch.delenv("STATICPODD_TEST_CRASHPOINT")
    d.wait_ready()
    before = [v.digest for v in history(root, "etcd")]
    with open(live, "wb") as fh:  # in place, as `cat bad > etcd.yaml`
        fh.write(bad)
    assert d.proc.wait(20) == -signal.SIGKILL
    assert live.read_bytes() == good  # renamed: the kubelet runs the good bytes
    d2 = run_daemon(root)
    d2.wait_ready()
    rec = wait_journal(root, "RECOVERED", lambda e: e.get("COMPONENT") == "etcd")
    assert rec["OUTCOME"] == "finished"
    hist = history(root, "etcd")
    assert [v.digest for v in hist[: len(before)]] == before
    assert [(v.action, v.actor, v.digest) for v in hist[len(before):]] == [
        ("external", "external", sha(bad)), ("restore", "staticpodd", sha(good))]
    assert live.read_bytes() == good
    st = staticpodctl(root, "status", "--json")
    assert st.returncode == 0 and json.loads(st.stdout)["interrupted"] == 0
    assert list((root / MANIFESTS / ".staticpodd/staging").iterdir()) == []
    assert journal(root, "RESTORED_LAST_GOOD") == []  # the first daemon died before logging it
