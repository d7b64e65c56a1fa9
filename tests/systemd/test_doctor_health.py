"""`staticpodctl doctor` as automation reads it : its exit status and its count.

Real parts: a staticpodd subprocess on a sandbox --root (tests/daemon/daemon_harness.py) and its
heartbeat, the CLI as a process, read-only bind mounts (needs root; `mount -o remount,bind,ro`).
The "enabled unit but daemon down" case needs a booted systemd: tests/node/test_node_service.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from daemon_harness import Daemon, NotifySocket, make_root, wait_until

REPO = Path(__file__).resolve().parents[2]
M = "etc/kubernetes/manifests"


def doctor(root: Path) -> tuple[int, dict, str]:
    env = {**os.environ, "STATICPODD_NO_JOURNAL": "1"}
    j = subprocess.run([sys.executable, "-m", "staticpodd.cli", "doctor", "--json", "--root", str(root)],
                       capture_output=True, text=True, cwd=REPO, env=env)
    t = subprocess.run([sys.executable, "-m", "staticpodd.cli", "doctor", "--root", str(root)],
                       capture_output=True, text=True, cwd=REPO, env=env)
    assert j.returncode == t.returncode, (j.stdout, t.stdout)
    return j.returncode, json.loads(j.stdout), t.stdout + t.stderr


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` as a read-only bind mount of itself (as ProtectSystem= or a ro file system makes it)."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root")
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def test_doctor_counts_the_problems_the_daemon_reports(tmp_path: Path) -> None:
    """An invalid file with several findings is one problem, as for the daemon; a stray and the
    duplicate pod it makes are one each: doctor's count equals the heartbeat's."""
    root = make_root(tmp_path)
    m = root / M
    sched = m / "kube-scheduler.yaml"
    text = sched.read_text()
    # three things the kubelet refuses in one file
    bad = text.replace("hostNetwork: true", 'hostNetwork: "true"').replace("priority: 2000001000",
                                                                           'priority: "high"')
    bad = bad.replace("  containers:\n", "  restartPolicy: Sometimes\n  containers:\n", 1)
    shutil.copy(m / "etcd.yaml", m / "etcd.yaml.bak")
    notify = NotifySocket()
    d = Daemon(root, notify)
    try:
        d.wait_ready()
        sched.write_text(bad)
        wait_until(lambda: any(p["code"] == "invalid-live" for p in d.heartbeat().get("problems", [])),
                   what="the daemon reports the invalid file")
        time.sleep(1)
        hb = d.heartbeat()
        rc, doc, text_out = doctor(root)
    finally:
        d.stop()
        notify.close()
    errors = [f for f in doc["findings"] if f["severity"] == "error" and f["path"].endswith("kube-scheduler.yaml")]
    assert len(errors) >= 2, doc["findings"]  # several findings, one problem
    assert rc == 1
    n = len(hb["problems"])
    assert f"{n} problem(s) found" in text_out, (hb["problems"], text_out)
    assert [p["code"] for p in doc["problems"]] == [], doc["problems"]  # nothing the daemon said twice


def test_doctor_reports_a_read_only_manifest_directory(kubeadm, ctl) -> None:
    with read_only(kubeadm.manifests):
        rc, doc, text = doctor(kubeadm.root)
    assert rc == 1, text
    ro = [p for p in doc["problems"] if p["code"] == "manifest-dir-read-only"]
    assert ro and ro[0]["path"] == str(kubeadm.manifests), doc["problems"]
    assert "no problems found" not in text


def test_doctor_reports_a_read_only_store(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0  # a store
    state = kubeadm.root / "var/lib/staticpodd"
    with read_only(state):
        rc, doc, text = doctor(kubeadm.root)
    assert rc == 1, text
    assert "store-read-only" in [p["code"] for p in doc["problems"]], doc["problems"]


def test_doctor_is_clean_on_a_clean_node(kubeadm, ctl) -> None:
    rc, doc, text = doctor(kubeadm.root)
    assert rc == 0 and "no problems found" in text, text
