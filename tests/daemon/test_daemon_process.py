"""The real staticpodd, run as a subprocess on a tmp_path --root, watched through sd_notify,
its heartbeat, the SQLite store and journald.

Only systemd's supervision is stood in for: the test owns the NOTIFY_SOCKET datagram socket
and sets WATCHDOG_USEC, as systemd would for a Type=notify service with WatchdogSec=.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from daemon_harness import (
    REPO,
    corpus_dir,
    head_digest,
    history,
    journal,
    make_root,
    sha,
    staticpodctl,
    wait_journal,
    wait_until,
)

pytestmark = pytest.mark.slow

MANIFESTS = "etc/kubernetes/manifests"


def test_ready_status_watchdog_heartbeat_and_clean_stop(tmp_path, run_daemon, notify_socket):
    root = make_root(tmp_path)
    d = run_daemon(root, watchdog_usec=600_000)  # ping every 0.3 s
    ready = d.wait_ready()
    assert "STATUS=4 live, 0 parked; no problems" in ready.split("\n")
    notify_socket.wait_for(lambda m: m == "WATCHDOG=1")
    first = len(notify_socket.messages)
    notify_socket.wait_for(lambda m: m == "WATCHDOG=1", after=first)
    hb = d.heartbeat()
    assert hb["pid"] == d.proc.pid and hb["state"] == "running" and hb["ready"] is True
    assert hb["summary"] == {"live": 4, "parked": 0, "missing": 0, "problems": 0}
    assert time.time() - hb["last_loop"] < 15 and hb["heartbeat_interval"] <= 10
    assert [v.action for v in history(root, "kube-scheduler")] == ["external"]  # adopted at start
    assert d.stop() == 0
    notify_socket.wait_for(lambda m: m.split("\n")[0] == "STOPPING=1", timeout=2)
    assert d.heartbeat()["state"] == "stopped"
    started = wait_journal(root, "DAEMON_STARTED")
    assert started["SYSLOG_IDENTIFIER"] == "staticpodd" and started["PRIORITY"] == "5"
    assert started["MESSAGE_ID"] == "56784f2f85df4587bb35596e079a41e4"
    wait_journal(root, "DAEMON_STOPPING", lambda e: e.get("SIGNAL") == "SIGTERM")


def test_an_external_edit_is_recorded_as_a_version_by_external(tmp_path, run_daemon):
    root = make_root(tmp_path)
    d = run_daemon(root)
    d.wait_ready()
    path = root / MANIFESTS / "kube-scheduler.yaml"
    new = path.read_bytes().replace(b"- --v=2", b"- --v=4") + b"# tuned by hand\n"
    with open(path, "wb") as f:  # like `cat > file`: truncate, then write in two steps
        f.write(new[:100])
        f.flush()
        time.sleep(0.05)
        f.write(new[100:])
    wait_until(lambda: head_digest(root, "kube-scheduler") == sha(new), what="edit recorded")
    v = history(root, "kube-scheduler")[-1]
    assert (v.action, v.actor, v.seq) == ("external", "external", 2)
    e = wait_journal(root, "EXTERNAL_CHANGE",
                     lambda e: e.get("COMPONENT") == "kube-scheduler" and e.get("CHANGE") != "adopted")
    assert e["PRIORITY"] == "4" and e["ACTOR"] == "external" and e["VERSION"] == "2"
    assert e["DIGEST"] == sha(new)
    # no manifest contents in any entry the daemon wrote
    for entry in journal(root):
        assert "--v=4" not in entry.get("MESSAGE", "") and "tuned by hand" not in str(entry)


def test_a_restore_that_failed_is_retried_with_back_off_and_succeeds_once_the_cause_is_gone(tmp_path, run_daemon):
    """A blocked staging directory (a plain file where the directory goes) makes the restore of
    an invalid edit fail; the daemon tries again on later passes (one entry per retry) and puts
    the good bytes back once the staging directory can be made, without a restart."""
    root = make_root(tmp_path, "on_invalid: restore\n")
    d = run_daemon(root)
    d.wait_ready()
    path = root / MANIFESTS / "kube-apiserver.yaml"
    good = path.read_bytes()
    staging = root / MANIFESTS / ".staticpodd/staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(mode=0o700, exist_ok=True)
    staging.write_bytes(b"in the way\n")
    path.write_bytes(good.replace(b"\n    - --", b"\n\t- --", 1))  # a parse error
    failed = wait_journal(root, "POLICY_ACTION_FAILED", lambda e: e.get("FILE_NAME") == "kube-apiserver.yaml",
                          timeout=20)
    assert "tried again in 2 s" in failed["MESSAGE"]
    wait_journal(root, "POLICY_ACTION_FAILED", lambda e: e.get("FILE_NAME") == "kube-apiserver.yaml"
                 and "(retry 1)" in e["MESSAGE"], timeout=20)
    staging.unlink()
    wait_until(lambda: path.read_bytes() == good, timeout=30, what="the good bytes back once staging works")
    wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("FILE_NAME") == "kube-apiserver.yaml")
    wait_until(lambda: not any(p.get("path", "").endswith("kube-apiserver.yaml")
                               for p in d.heartbeat().get("problems", [])), what="the problem cleared")


def test_an_invalid_in_place_edit_is_restored_under_restore(tmp_path, run_daemon):
    """on_invalid: restore puts the last good version back long before the kubelet's 20 s relist
    (rescan_interval stays at 20 s, so only the inotify path can be this quick)."""
    root = make_root(tmp_path, "on_invalid: restore\n")
    d = run_daemon(root)
    d.wait_ready()
    path = root / MANIFESTS / "kube-apiserver.yaml"
    good = path.read_bytes()
    bad = good.replace(b"\n    - --", b"\n\t- --", 1)  # a tab in the indentation: a parse error
    assert bad != good
    t0 = time.monotonic()
    path.write_bytes(bad)
    wait_until(lambda: path.read_bytes() == good, timeout=15, interval=0.01, what="the good bytes back")
    assert time.monotonic() - t0 < 15
    # the bad bytes are kept in history (recorded with the restore, right after its rename)
    wait_until(lambda: [v.digest for v in history(root, "kube-apiserver")][-2:] == [sha(bad), sha(good)],
               what="the bad bytes and the restore recorded")
    inv = wait_journal(root, "INVALID_LIVE", lambda e: e.get("FILE_NAME") == "kube-apiserver.yaml")
    assert inv["PRIORITY"] == "3" and inv["POLICY"] == "restore"
    assert "\t" not in inv["MESSAGE"]
    wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("COMPONENT") == "kube-apiserver")
    wait_until(lambda: d.heartbeat().get("problems") == [], what=f"no problems left: {d.heartbeat().get('problems')}")


def test_an_invalid_edit_under_alert_stays_and_is_a_problem(tmp_path, run_daemon, notify_socket):
    root = make_root(tmp_path)
    d = run_daemon(root)
    d.wait_ready()
    path = root / MANIFESTS / "etcd.yaml"
    path.write_bytes(b"")  # B05: empty file -> "Object 'Kind' is missing in 'null'"
    e = wait_journal(root, "INVALID_LIVE", lambda e: e.get("FILE_NAME") == "etcd.yaml")
    assert e["PRIORITY"] == "3" and e["POLICY"] == "alert"
    assert path.read_bytes() == b""
    wait_until(lambda: any(p["code"] == "invalid-live" for p in d.heartbeat().get("problems", [])))
    notify_socket.wait_for(lambda m: m.startswith("STATUS=") and "invalid-live etcd.yaml" in m)


def test_a_bak_stray_is_reported_and_under_quarantine_moved_out(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    shutil.copyfile(mdir / "kube-apiserver.yaml", mdir / "kube-apiserver.yaml.bak")
    stray = wait_journal(root, "STRAY_FOUND", lambda e: e.get("FILE_NAME") == "kube-apiserver.yaml.bak")
    assert stray["PRIORITY"] == "4" and "on_stray=alert" in stray["MESSAGE"]
    dup = wait_journal(root, "DUPLICATE_POD")
    assert "kube-apiserver.yaml.bak" in dup["MESSAGE"]
    assert (mdir / "kube-apiserver.yaml.bak").exists()
    assert d.stop() == 0

    (root / "etc/staticpodd").mkdir(parents=True)
    (root / "etc/staticpodd/staticpodd.yaml").write_text("on_stray: quarantine\n")
    d2 = run_daemon(root)
    d2.wait_ready()
    assert not (mdir / "kube-apiserver.yaml.bak").exists()
    moved = list((mdir / ".staticpodd/quarantine").iterdir())
    assert [p.name.startswith("kube-apiserver.yaml.bak.") for p in moved] == [True]
    assert moved[0].read_bytes() == (mdir / "kube-apiserver.yaml").read_bytes()
    wait_journal(root, "STRAY_QUARANTINED", lambda e: e.get("FILE_NAME") == "kube-apiserver.yaml.bak")
    # and a new stray while running (vim's probe file) goes the same way
    (mdir / "4913").write_bytes(b"")
    wait_until(lambda: not (mdir / "4913").exists(), what="4913 quarantined")


def test_a_park_deadline_set_while_the_daemon_was_down_is_honoured(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    original = (mdir / "kube-scheduler.yaml").read_bytes()
    r = staticpodctl(root, "park", "kube-scheduler", "--for", "4s", "--reason", "drill")
    assert r.returncode == 0, r.stderr
    assert not (mdir / "kube-scheduler.yaml").exists()
    d = run_daemon(root)
    d.wait_ready()
    assert d.heartbeat()["summary"]["parked"] == 1
    assert not (mdir / "kube-scheduler.yaml").exists()  # not before its deadline
    wait_until(lambda: (mdir / "kube-scheduler.yaml").exists(), timeout=15, what="unpark at deadline")
    assert (mdir / "kube-scheduler.yaml").read_bytes() == original
    e = wait_journal(root, "PARK_EXPIRED", lambda e: e.get("COMPONENT") == "kube-scheduler")
    assert e["REASON"] == "drill"
    wait_journal(root, "UNPARKED", lambda e: e.get("ACTOR") == "staticpodd")
    wait_until(lambda: d.heartbeat().get("summary", {}).get("parked") == 0)


def test_an_expired_park_is_restored_at_start(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    assert staticpodctl(root, "park", "kube-scheduler", "--for", "1s").returncode == 0
    time.sleep(1.2)
    d = run_daemon(root)
    d.wait_ready()
    wait_until(lambda: (mdir / "kube-scheduler.yaml").exists(), timeout=10)


def test_a_parked_copy_edited_by_hand_is_drift_and_a_write_back_breaks_the_park(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    assert staticpodctl(root, "park", "kube-scheduler").returncode == 0
    d = run_daemon(root)
    d.wait_ready()
    parked = mdir / ".staticpodd/parked/kube-scheduler.yaml"
    edited = parked.read_bytes() + b"# edited while parked\n"
    parked.write_bytes(edited)
    e = wait_journal(root, "EXTERNAL_CHANGE", lambda e: e.get("CHANGE") == "parked-copy-edited")
    assert e["LOCATION"] == "parked"
    wait_until(lambda: head_digest(root, "kube-scheduler") == sha(edited))
    # kubeadm (or Ansible) writes the file back while it is parked
    (mdir / "kube-scheduler.yaml").write_bytes(edited)
    b = wait_journal(root, "PARK_BROKEN", lambda e: e.get("COMPONENT") == "kube-scheduler")
    assert b["PRIORITY"] == "3"
    wait_until(lambda: any(p["code"] == "park-broken" for p in d.heartbeat().get("problems", [])))


@pytest.mark.parametrize("how", ["replaced", "recreated"])
def test_a_replaced_or_recreated_directory_is_watched_again(tmp_path, run_daemon, how):
    root = make_root(tmp_path, "rescan_interval: 2\n")
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    if how == "replaced":
        new = root / "etc/kubernetes/manifests.new"
        shutil.copytree(mdir, new, ignore=shutil.ignore_patterns(".staticpodd"))
        os.rename(mdir, root / "etc/kubernetes/manifests.old")
        os.rename(new, mdir)
    else:
        keep = {n: (mdir / n).read_bytes() for n in os.listdir(mdir) if not n.startswith(".")}
        shutil.rmtree(mdir)
        time.sleep(0.3)
        mdir.mkdir()
        for n, data in keep.items():
            (mdir / n).write_bytes(data)
    wait_journal(root, "DIRECTORY_REWATCHED", timeout=15)
    wait_until(lambda: d.heartbeat().get("watch", {}).get("generation", 0) >= 2)
    path = mdir / "kube-controller-manager.yaml"
    new_bytes = path.read_bytes() + b"# after the directory was " + how.encode() + b"\n"
    path.write_bytes(new_bytes)
    wait_until(lambda: head_digest(root, "kube-controller-manager") == sha(new_bytes), what="edit in new dir")


def test_a_flood_of_1000_writes_to_50_files_records_exactly_the_final_bytes(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    template = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: flood-{i}\n  namespace: kube-system\n"
        "spec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n"
        '    args: ["--round={r}"]\n'
    )
    final: dict[str, bytes] = {}
    for r in range(20):
        for i in range(50):
            data = template.format(i=i, r=r).encode()
            with open(mdir / f"flood-{i:02d}.yaml", "wb") as f:
                f.write(data)
            final[f"flood-{i:02d}"] = data

    def all_recorded() -> bool:
        return all(head_digest(root, c) == sha(data) for c, data in final.items())

    wait_until(all_recorded, timeout=60, interval=0.5, what="final bytes of all 50 files recorded")
    for c, data in final.items():
        assert (mdir / f"{c}.yaml").read_bytes() == data
        assert history(root, c)[-1].actor == "external"
    assert d.proc.poll() is None


def test_a_bad_config_is_refused_at_start_with_exit_78(tmp_path, run_daemon, notify_socket):
    root = make_root(tmp_path, "debounce: 0.3\nrescan_interval: -1\n")
    d = run_daemon(root)
    assert d.proc.wait(30) == 78
    err = d.stderr
    assert "rescan_interval: -1 is less than the minimum of 1" in err
    assert "staticpodd.yaml:2:" in err
    assert not any("READY=1" in m for m in notify_socket.messages)
    e = wait_journal(root, "CONFIG_INVALID")
    assert e["PRIORITY"] == "3" and e["FIELD"] == "rescan_interval" and e["LINE"] == "2"


def test_an_unsupported_kubernetes_version_is_refused_at_start(tmp_path, run_daemon):
    root = make_root(tmp_path, 'kubernetes_version: "1.2"\n')
    d = run_daemon(root)
    assert d.proc.wait(30) == 78
    assert "kubernetes_version" in d.stderr


def reload(root, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "staticpodd.daemon", "--root", str(root), "--reload", "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        cwd=str(REPO),
    )


def test_sighup_with_a_bad_config_keeps_the_old_one_and_a_good_one_takes_effect(tmp_path, run_daemon, notify_socket):
    root = make_root(tmp_path, "on_invalid: alert\n")
    cfg = root / "etc/staticpodd/staticpodd.yaml"
    d = run_daemon(root)
    d.wait_ready()
    n = len(notify_socket.messages)
    cfg.write_text("on_invalid: restore\nwait:\n  timeout: -5\n")
    r = reload(root)
    assert r.returncode == 78, r.stderr
    assert "wait.timeout" in r.stderr
    notify_socket.wait_for(lambda m: m.startswith("RELOADING=1\nMONOTONIC_USEC="), after=n)
    notify_socket.wait_for(lambda m: m.startswith("READY=1"), after=n + 1)
    e = wait_journal(root, "CONFIG_INVALID")
    assert e["FIELD"] == "wait.timeout"
    hb = d.heartbeat()
    assert hb["config"]["generation"] == 1 and hb["reload"]["status"] == "refused"
    assert d.proc.poll() is None

    cfg.write_text("on_invalid: restore\n")
    r = reload(root)
    assert r.returncode == 0, r.stderr
    wait_journal(root, "CONFIG_RELOADED")
    assert d.heartbeat()["config"]["generation"] == 2
    # the new policy is in force: an invalid write is now restored
    path = root / MANIFESTS / "kube-scheduler.yaml"
    good = path.read_bytes()
    path.write_bytes(b"kind: Pod\n")
    wait_until(lambda: path.read_bytes() == good, what="restore under the reloaded policy")


def test_reload_without_a_running_daemon_fails(tmp_path):
    root = make_root(tmp_path)
    r = reload(root, timeout=1)
    assert r.returncode == 1 and "no running daemon" in r.stderr


def test_an_interrupted_park_is_finished_before_ready(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    r = staticpodctl(root, "park", "kube-scheduler", env={"STATICPODD_TEST_CRASHPOINT": "park:renamed"})
    assert r.returncode == -signal.SIGKILL
    assert (mdir / ".staticpodd/parked/kube-scheduler.yaml").exists()
    d = run_daemon(root)
    d.wait_ready()
    rec = wait_journal(root, "RECOVERED", lambda e: e.get("COMPONENT") == "kube-scheduler")
    assert rec["OUTCOME"] == "finished"
    ready_at = wait_journal(root, "DAEMON_STARTED")  # the background journal may not have sent it yet
    assert int(rec["__REALTIME_TIMESTAMP"]) <= int(ready_at["__REALTIME_TIMESTAMP"])
    assert d.heartbeat()["summary"]["parked"] == 1


def test_a_mode_change_is_recorded_and_a_loose_mode_reported(tmp_path, run_daemon):
    root = make_root(tmp_path)
    d = run_daemon(root)
    d.wait_ready()
    os.chmod(root / MANIFESTS / "etcd.yaml", 0o644)
    e = wait_journal(root, "EXTERNAL_CHANGE", lambda e: e.get("CHANGE") == "mode-changed")
    assert e["FILE_NAME"] == "etcd.yaml"
    wait_journal(root, "DIRECTORY_PROBLEM", lambda e: e.get("FINDING") == "loose-permissions")


def test_corpus_is_where_the_harness_expects_it():
    if not (corpus_dir() / "manifests").is_dir():
        pytest.skip("corpus absent")
    assert (corpus_dir() / "manifests" / "01-zetaoss-kubeadm-kube-apiserver.yaml").is_file()


def test_a_held_lock_delays_start_and_changes_but_never_the_watchdog(tmp_path, run_daemon, notify_socket):
    """staticpodctl holds the flock (here: the test holds it): the daemon waits, keeps pinging
    WATCHDOG=1, and catches up once the lock is free."""
    import fcntl

    root = make_root(tmp_path)
    lock = root / "run/staticpodd/lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        d = run_daemon(root, watchdog_usec=1_000_000)
        notify_socket.wait_for(lambda m: m.startswith("STATUS=starting: waiting for the lock"))
        n = len(notify_socket.messages)
        notify_socket.wait_for(lambda m: m == "WATCHDOG=1", after=n)
        assert not any("READY=1" in m for m in notify_socket.messages)
        fcntl.flock(fd, fcntl.LOCK_UN)
        d.wait_ready()
        fcntl.flock(fd, fcntl.LOCK_EX)
        path = root / MANIFESTS / "etcd.yaml"
        new = path.read_bytes() + b"# while locked\n"
        path.write_bytes(new)
        n = len(notify_socket.messages)
        notify_socket.wait_for(lambda m: m == "WATCHDOG=1", after=n)
        notify_socket.wait_for(lambda m: m == "WATCHDOG=1", after=len(notify_socket.messages))
        assert head_digest(root, "etcd") != sha(new)  # nothing written under someone else's lock
        wait_until(lambda: any(p["code"] == "lock-timeout" for p in d.heartbeat().get("problems", [])))
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    wait_until(lambda: head_digest(root, "etcd") == sha(new), what="recorded after the lock was released")
    wait_until(lambda: not d.heartbeat().get("problems"))


def test_a_missing_manifest_directory_is_reported_and_watched_once_it_appears(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    saved = tmp_path / "saved"
    shutil.move(mdir, saved)
    d = run_daemon(root)
    d.wait_ready()
    e = wait_journal(root, "DIRECTORY_PROBLEM", lambda e: e.get("FINDING") == "manifest-dir-missing")
    assert e["PRIORITY"] == "3"
    assert any(p["code"] == "manifest-dir-missing" for p in d.heartbeat()["problems"])
    shutil.move(saved, mdir)
    wait_journal(root, "DIRECTORY_REWATCHED", lambda e: e.get("CHANGE") == "created")
    wait_until(lambda: d.heartbeat().get("summary", {}).get("live") == 4, what="4 live after it appeared")
    assert not d.heartbeat()["problems"]
    path = mdir / "etcd.yaml"
    new = path.read_bytes() + b"# after it appeared\n"
    path.write_bytes(new)
    wait_until(lambda: head_digest(root, "etcd") == sha(new))


def test_a_reload_that_moves_the_manifest_directory_watches_the_new_one(tmp_path, run_daemon):
    root = make_root(tmp_path)
    other = root / "srv/pod-manifests"
    other.mkdir(parents=True)
    shutil.copyfile(root / MANIFESTS / "etcd.yaml", other / "etcd.yaml")
    os.chmod(other / "etcd.yaml", 0o600)
    d = run_daemon(root)
    d.wait_ready()
    (root / "etc/staticpodd").mkdir(parents=True)
    (root / "etc/staticpodd/staticpodd.yaml").write_text("manifest_dir: /srv/pod-manifests\n")
    r = reload(root)
    assert r.returncode == 0, r.stderr
    hb = d.heartbeat()
    assert hb["manifest_dir"] == str(other) and hb["config"]["generation"] == 2
    wait_until(lambda: d.heartbeat().get("summary", {}).get("live") == 1)
    new = (other / "etcd.yaml").read_bytes() + b"# in the new directory\n"
    (other / "etcd.yaml").write_bytes(new)
    wait_until(lambda: head_digest(root, "etcd") == sha(new), what="edit in the new directory recorded")


def test_metrics_are_written_for_node_exporter_when_enabled(tmp_path, run_daemon):
    root = make_root(tmp_path, "metrics:\n  enabled: true\n  textfile_dir: /var/lib/prometheus/node-exporter\n")
    prom_dir = root / "var/lib/prometheus/node-exporter"
    prom_dir.mkdir(parents=True)
    d = run_daemon(root)
    d.wait_ready()
    prom = prom_dir / "staticpodd.prom"
    text = wait_until(lambda: prom.exists() and prom.read_text())
    assert 'staticpodd_components{state="live"} 4' in text
    shutil.copyfile(root / MANIFESTS / "etcd.yaml", root / MANIFESTS / "etcd.yaml~")
    wait_until(lambda: "staticpodd_strays 1" in prom.read_text(), what="stray counted in metrics")


def test_without_systemd_python_the_stdlib_notify_and_stderr_logging_take_over(tmp_path, notify_socket):
    """The daemon with systemd-python hidden: sd_notify through the stdlib implementation (to an
    abstract socket), journal entries as lines on stderr."""
    root = make_root(tmp_path)
    code = (
        "import sys; sys.modules['systemd'] = None\n"
        "from staticpodd.daemon import main\n"
        f"sys.exit(main(['--root', {str(root)!r}]))\n"
    )
    env = {**os.environ, "NOTIFY_SOCKET": notify_socket.name, "WATCHDOG_USEC": "400000"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        notify_socket.wait_for(lambda m: m.startswith("READY=1\nSTATUS=4 live"))
        notify_socket.wait_for(lambda m: m == "WATCHDOG=1")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    notify_socket.wait_for(lambda m: m.startswith("STOPPING=1"))
    assert "STATICPODD_EVENT=DAEMON_STARTED" in err and "STATICPODD_EVENT=DAEMON_STOPPING" in err
    assert journal(root) == []


def test_a_vim_style_save_is_one_change_and_its_temp_files_are_left_alone(tmp_path, run_daemon):
    """vim writes a probe file ``4913``, renames the original to ``x~``, writes the new file and
    removes the backup, all within milliseconds: under quarantine and restore policies the daemon
    records the final bytes once and never reports or moves the short-lived files."""
    root = make_root(tmp_path, "on_stray: quarantine\non_invalid: restore\n")
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    path = mdir / "kube-scheduler.yaml"
    new = path.read_bytes() + b"# saved from vim\n"
    for _ in range(3):
        (mdir / "4913").write_bytes(b"")
        os.unlink(mdir / "4913")
        os.rename(path, mdir / "kube-scheduler.yaml~")
        with open(path, "wb") as f:
            f.write(new[: len(new) // 2])
            f.flush()
            f.write(new[len(new) // 2 :])
        os.chmod(path, 0o600)
        os.unlink(mdir / "kube-scheduler.yaml~")
    wait_until(lambda: head_digest(root, "kube-scheduler") == sha(new))
    time.sleep(1.0)  # past the quiet time of every name touched
    assert path.read_bytes() == new
    assert not (mdir / ".staticpodd/quarantine").exists() or not list((mdir / ".staticpodd/quarantine").iterdir())
    assert journal(root, "STRAY_FOUND") == [] and journal(root, "INVALID_LIVE") == []
    assert [v.digest for v in history(root, "kube-scheduler")][-1] == sha(new)


def test_the_seed_procedure_mv_out_of_the_directory_is_an_external_removal(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    os.rename(mdir / "kube-scheduler.yaml", mdir.parent / "kube-scheduler.yaml")  # mv kube-scheduler.yaml ..
    e = wait_journal(root, "EXTERNAL_REMOVAL", lambda e: e.get("COMPONENT") == "kube-scheduler")
    assert e["PRIORITY"] == "4" and e["CHANGE"] == "removed"
    wait_until(lambda: d.heartbeat().get("summary", {}).get("live") == 3)
    os.rename(mdir.parent / "kube-scheduler.yaml", mdir / "kube-scheduler.yaml")  # and back
    wait_journal(root, "EXTERNAL_CHANGE",
                 lambda e: e.get("COMPONENT") == "kube-scheduler" and e.get("CHANGE") != "adopted")
    wait_until(lambda: d.heartbeat().get("summary", {}).get("live") == 4)


def test_an_explicit_config_file_that_is_missing_is_refused(tmp_path, run_daemon):
    root = make_root(tmp_path)
    d = run_daemon(root, args=["--config", str(tmp_path / "nope.yaml")])
    assert d.proc.wait(30) == 78
    assert "configuration file not found" in d.stderr


def test_an_expired_park_that_cannot_be_undone_is_retried_with_back_off_until_it_can(tmp_path, run_daemon):
    """The park expires while the file was written back meanwhile (kubeadm): unpark refuses to
    overwrite the live file, the daemon says so and keeps it as a problem; it tries again on later
    passes, after 2 s, then 4 s, … (one entry per retry, never one per pass), and once the
    obstacle is gone the unpark goes through and the problem clears, without a restart."""
    root = make_root(tmp_path, "rescan_interval: 1\n")
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    assert staticpodctl(root, "park", "kube-scheduler", "--for", "3s").returncode == 0
    parked = (mdir / ".staticpodd/parked/kube-scheduler.yaml").read_bytes()
    (mdir / "kube-scheduler.yaml").write_bytes(parked + b"# written back by kubeadm\n")
    wait_journal(root, "PARK_BROKEN", lambda e: e.get("COMPONENT") == "kube-scheduler")
    failed = wait_journal(root, "POLICY_ACTION_FAILED", lambda e: e.get("PRIORITY") == "3", timeout=20)
    assert failed["ERROR"] == "live-file-exists"
    wait_until(lambda: any(p["code"] == "park-expired-unpark-failed" for p in d.heartbeat().get("problems", [])))
    time.sleep(3)  # three more rescans: one retry (after 2 s), not one per pass
    failures = [e for e in journal(root, "POLICY_ACTION_FAILED") if e.get("PRIORITY") == "3"]
    assert len(failures) == 2 and "(retry 1); tried again in 4 s" in failures[-1]["MESSAGE"]
    assert (mdir / ".staticpodd/parked/kube-scheduler.yaml").read_bytes() == parked  # nothing lost
    (mdir / "kube-scheduler.yaml").unlink()  # the obstacle goes: the next retry unparks
    wait_until(lambda: (mdir / "kube-scheduler.yaml").exists()
               and (mdir / "kube-scheduler.yaml").read_bytes() == parked, timeout=20)
    wait_until(lambda: not any(p["code"] == "park-expired-unpark-failed" for p in d.heartbeat().get("problems", [])))


def test_a_subdirectory_and_a_symlink_are_reported(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    d = run_daemon(root)
    d.wait_ready()
    (mdir / "apps").mkdir()
    (mdir / "apps" / "web.yaml").write_bytes((mdir / "etcd.yaml").read_bytes())
    elsewhere = root / "srv/kube-vip.yaml"
    elsewhere.parent.mkdir(parents=True)
    shutil.copyfile(corpus_dir() / "manifests/08-kube-vip-docs-arp.yaml", elsewhere)
    os.symlink(elsewhere, mdir / "kube-vip.yaml")
    sub = wait_journal(root, "DIRECTORY_PROBLEM", lambda e: e.get("FINDING") == "subdirectory-ignored")
    assert sub["FILE_NAME"] == "apps"
    link = wait_journal(root, "DIRECTORY_PROBLEM", lambda e: e.get("FINDING") == "symlink")
    assert link["FILE_NAME"] == "kube-vip.yaml"
    codes = {p["code"] for p in d.heartbeat()["problems"]}
    assert {"subdirectory-ignored", "symlink"} <= codes


def test_reload_never_signals_a_process_that_is_not_the_daemon(tmp_path):
    """A stale heartbeat whose pid now belongs to something else: SIGHUP would kill it."""
    import json

    root = make_root(tmp_path)
    other = subprocess.Popen(["sleep", "30"])
    try:
        hb = root / "run/staticpodd/daemon.json"
        hb.parent.mkdir(parents=True)
        hb.write_text(json.dumps({"pid": other.pid, "state": "running", "reload": {"seq": 0}}))
        r = reload(root, timeout=2)
        assert r.returncode == 1 and "no running daemon" in r.stderr
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_an_unexpected_exception_in_the_loop_is_a_daemon_error_entry_and_exit_1(tmp_path, run_daemon, monkeypatch):
    # Found by a newcomer (stop 16): a bug in the loop ended the daemon with a traceback on stderr
    # only; the journal said nothing, so `journalctl -u staticpodd -p err` showed no reason.
    monkeypatch.setenv("STATICPODD_TEST_FAILPOINT", "daemon:loop")
    root = make_root(tmp_path)
    d = run_daemon(root)
    d.wait_ready()
    assert d.proc.wait(15) == 1
    e = wait_journal(root, "DAEMON_ERROR", lambda e: e.get("ERROR") == "internal-error")
    assert "RuntimeError: test failpoint daemon:loop" in e["MESSAGE"]
    assert "Traceback" in e["TRACEBACK"] and int(e["PRIORITY"]) == 3
    assert d.heartbeat()["state"] == "stopped"
