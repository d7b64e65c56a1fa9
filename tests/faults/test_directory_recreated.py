"""The manifest directory deleted and recreated under a running daemon.

``rm -rf /etc/kubernetes/manifests`` takes the parked copies (``.staticpodd/parked``) with it,
then a tool recreates the directory with some files changed, one new, one left out. Asserted on
bytes and history: every byte string the recreated directory holds is recorded (sha256 in the
store); the parked component's park stands and ``unpark`` brings back the exact bytes it was
parked with, from history; while the directory is missing, staticpodctl gives a clean fs-error
and changes nothing; the daemon keeps running, never tracebacks, and watches the new directory.

Real staticpodd (inotify, SQLite, journald), real staticpodctl processes.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from daemon_harness import Daemon, NotifySocket, make_root, wait_journal, wait_until
from faultlib import assert_no_traceback, recorded, recorded_digests, run_ctl, sha

MDIR = "etc/kubernetes/manifests"


def test_a_directory_deleted_and_recreated_under_the_daemon_loses_nothing(tmp_path: Path) -> None:
    root = make_root(tmp_path, "debounce: 0.2\nrescan_interval: 2\n")
    mdir = root / MDIR
    notify = NotifySocket()
    d = Daemon(root, notify)
    try:
        d.wait_ready()
        assert run_ctl(root, "park", "kube-scheduler").returncode == 0
        parked_bytes = (mdir / ".staticpodd/parked/kube-scheduler.yaml").read_bytes()
        keep = {n: (mdir / n).read_bytes() for n in ("kube-apiserver.yaml", "etcd.yaml",
                                                     "kube-controller-manager.yaml")}
        shutil.rmtree(mdir)
        time.sleep(0.5)
        # meanwhile: a CLI write verb fails cleanly and creates nothing
        res = run_ctl(root, "unpark", "kube-scheduler", "--json")
        assert_no_traceback(res.stdout, res.stderr)
        assert res.returncode == 1 and json.loads(res.stdout)["error"]["code"] == "fs-error", res.stdout
        assert not mdir.exists()
        # the directory comes back: apiserver edited, etcd as it was, a new pod, controller-manager left out
        mdir.mkdir(mode=0o700)
        edited = keep["kube-apiserver.yaml"] + b"# edited while the directory was gone\n"
        (mdir / "kube-apiserver.yaml").write_bytes(edited)
        (mdir / "etcd.yaml").write_bytes(keep["etcd.yaml"])
        new_pod = (b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: node-agent\n  namespace: kube-system\nspec:\n"
                   b"  containers:\n  - name: a\n    image: registry.k8s.io/pause:3.10\n")
        (mdir / "node-agent.yaml").write_bytes(new_pod)
        wait_journal(root, "DIRECTORY_REWATCHED", timeout=15)
        wait_until(lambda: {sha(edited), sha(new_pod)} <= recorded_digests(root), timeout=20,
                   what="the recreated directory's new bytes recorded")
        # the park stands; unpark brings back the parked bytes from history, byte-identical
        st = json.loads(run_ctl(root, "status", "--json").stdout)
        sched = next(c for c in st["components"] if c["component"] == "kube-scheduler")
        assert sched["state"] == "missing" and sched["parked"] is not None, sched
        un = run_ctl(root, "unpark", "kube-scheduler")
        assert un.returncode == 0, un.stdout + un.stderr
        assert sha((mdir / "kube-scheduler.yaml").read_bytes()) == sha(parked_bytes)
        # nothing lost: every byte string that was ever in the directory is in some version
        have = recorded_digests(root)
        assert {sha(b) for b in (*keep.values(), edited, new_pod, parked_bytes)} <= have
        # controller-manager, left out, is recorded as removed and can be put back from history
        cm = recorded(root, "kube-controller-manager")
        assert sha(cm[-1][4]) == sha(keep["kube-controller-manager.yaml"])
        assert d.proc.poll() is None
        assert "Traceback" not in d.stderr, d.stderr
    finally:
        if d.proc.poll() is None:
            d.stop()
        notify.close()
