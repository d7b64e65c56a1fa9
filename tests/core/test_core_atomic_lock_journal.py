"""What the kubelet can observe while we write, the lock between writers, and journald."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from spd_testlib import REPO, journal_entries, small_pod

from staticpodd.journal import Event


def test_a_reader_only_ever_sees_a_complete_old_or_new_file_and_no_extra_names(sandbox, tmp_path) -> None:
    """Like the kubelet's relist: list non-dot names and read each, in a loop, while apply swaps
    two versions back and forth as fast as it can."""
    from staticpodd.engine import Actor, Engine
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    a = small_pod("web", image="nginx:1.27").encode() + b"#" * 200_000 + b"\n"
    b = small_pod("web", image="nginx:1.28").encode() + b"#" * 100_000 + b"\n"
    sandbox.write("web.yaml", a)
    eng = Engine(Layout.build(sandbox.root), actor=Actor("test", 0), journal=Journal("test", str(sandbox.root)))
    stop = threading.Event()
    seen: dict[str, int] = {"reads": 0}
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            names = sorted(n for n in os.listdir(sandbox.manifests) if not n.startswith("."))
            if names != ["web.yaml"]:
                bad.append(f"names {names}")
            try:
                data = (sandbox.manifests / "web.yaml").read_bytes()
            except FileNotFoundError:
                bad.append("web.yaml missing")
                continue
            if data not in (a, b):
                bad.append(f"partial read of {len(data)} bytes")
            seen["reads"] += 1

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(60):
            eng.apply(b if i % 2 == 0 else a, source="web.yaml")
    finally:
        stop.set()
        t.join()
    assert seen["reads"] > 0
    assert bad == []


def test_a_second_writer_waits_for_the_lock_then_gives_up_naming_the_holder(kubeadm, ctl_proc) -> None:
    lock = kubeadm.root / "run/staticpodd/lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "os.write(fd, b'pid %d: staticpodctl edit kube-apiserver by bob\\n' % os.getpid())\n"
         "print('held', flush=True)\n"
         "time.sleep(30)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        r = ctl_proc("park", "kube-scheduler", "--lock-timeout", "0.5", "--json")
        assert r.returncode == 5
        import json

        err = json.loads(r.stdout)["error"]
        assert err["code"] == "lock-timeout" and "edit kube-apiserver by bob" in err["message"]
        assert "kube-scheduler.yaml" in kubeadm.visible()
    finally:
        holder.kill()
        holder.wait()
    assert ctl_proc("park", "kube-scheduler", "--lock-timeout", "5").returncode == 0


def test_two_concurrent_applies_serialise_and_both_are_recorded(sandbox, tmp_path) -> None:
    files = []
    for i in range(2):
        p = tmp_path / f"src{i}" / "web.yaml"
        p.parent.mkdir()
        p.write_text(small_pod("web", image=f"nginx:1.{20 + i}"))
        files.append(p)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-m", "staticpodd.cli", "apply", str(p), "--root", str(sandbox.root)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in files]
    for p in procs:
        assert p.wait(60) == 0, p.stderr.read()
    out = subprocess.run([sys.executable, "-m", "staticpodd.cli", "history", "web", "--json", "--root",
                          str(sandbox.root)], env=env, capture_output=True, text=True)
    import json

    versions = json.loads(out.stdout)["versions"]
    assert sorted(v["seq"] for v in versions) == [1, 2]


def test_every_action_is_in_journald_with_its_message_id_and_fields_but_no_manifest_contents(kubeadm, ctl_proc,
                                                                                             tmp_path) -> None:
    src = tmp_path / "kube-scheduler.yaml"
    src.write_bytes((kubeadm.manifests / "kube-scheduler.yaml").read_bytes().replace(b"--leader-elect=true",
                                                                                      b"--leader-elect=false"))
    assert ctl_proc("park", "kube-scheduler", "--reason", "drill 42").returncode == 0
    assert ctl_proc("unpark", "kube-scheduler").returncode == 0
    assert ctl_proc("apply", str(src), "--reason", "no leader election").returncode == 0
    assert ctl_proc("rollback", "kube-scheduler").returncode == 0

    want = {Event.PARKED.message_id, Event.UNPARKED.message_id, Event.APPLIED.message_id,
            Event.ROLLED_BACK.message_id}
    entries = journal_entries(kubeadm.root, want=lambda es: want <= {e.get("MESSAGE_ID") for e in es})
    by_id = {e["MESSAGE_ID"]: e for e in entries if e.get("MESSAGE_ID") in want}
    assert set(by_id) == want
    parked = by_id[Event.PARKED.message_id]
    assert parked["COMPONENT"] == "kube-scheduler"
    assert parked["REASON"] == "drill 42"
    assert parked["SYSLOG_IDENTIFIER"] == "staticpodctl"
    assert parked["ACTOR"] and len(parked["DIGEST"]) == 64 and parked["VERSION"].isdigit()
    applied = by_id[Event.APPLIED.message_id]
    assert applied["VERSION"].isdigit() and applied["REASON"] == "no leader election"
    for e in entries:
        blob = " ".join(str(v) for v in e.values())
        assert "--leader-elect" not in blob and "--kubeconfig" not in blob


def test_without_journald_entries_go_to_stderr(kubeadm, ctl_proc) -> None:
    r = ctl_proc("park", "kube-scheduler", env={"STATICPODD_NO_JOURNAL": "1"})
    assert r.returncode == 0
    assert "STATICPODD_EVENT=PARKED" in r.stderr and "COMPONENT=kube-scheduler" in r.stderr


def test_fast_verbs_do_not_import_jsonschema_or_watchdog(kubeadm, tmp_path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = (
        "import sys\nfrom staticpodd import cli\n"
        "for argv in (['park', 'kube-scheduler'], ['unpark', 'kube-scheduler'], ['status'], "
        "['history', 'kube-scheduler']):\n"
        f"    assert cli.main(argv + ['--root', {str(kubeadm.root)!r}]) == 0, argv\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'watchdog')]\n"
        "print('IMPORTED:' + ','.join(bad), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "IMPORTED:\n" in r.stderr
