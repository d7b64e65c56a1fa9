"""Adversarial configuration files: YAML alias cycles and alias bombs in staticpodd.yaml."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from spd_testlib import REPO

CYCLE = "a: &a [*a]\n"


def _bomb() -> str:
    lines = ["a: &a [x,x,x,x,x,x,x,x,x]"]
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text", [CYCLE, _bomb()], ids=["alias-cycle", "alias-bomb"])
# Regression (found by adversarial testing, fixed in the working tree meanwhile): config with a YAML alias
#   cycle/bomb hangs load_config (_check_duplicate_keys walks the node graph with no visited set): every verb
#   hangs instead of exit 78
def test_alias_config_is_refused_not_hung(kubeadm, ctl_proc, text):
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(text)
    try:
        # status/park/unpark tolerate a broken config (with a warning); validate refuses it (78)
        st = ctl_proc("status", "--json", timeout=15)
        p = ctl_proc("validate", str(kubeadm.manifests), "--json", timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("staticpodctl hung on the configuration file")
    assert st.returncode in (0, 78)
    assert p.returncode == 78
    assert json.loads(p.stdout)["error"]["code"] == "config-invalid"


# Regression (found by adversarial testing, fixed in the working tree meanwhile): SIGHUP with a config holding
#   a YAML alias cycle hangs the daemon's main loop: heartbeat stops, on_invalid=restore stops working
def test_daemon_survives_sighup_with_alias_cycle(kubeadm, tmp_path):
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("on_invalid: restore\nrescan_interval: 1\ndebounce: 0.2\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    d = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(kubeadm.root)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        hb = kubeadm.root / "run" / "staticpodd" / "daemon.json"
        deadline = time.monotonic() + 20
        while not hb.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hb.exists()
        cfg.write_text(CYCLE)
        d.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        cfg.write_text("on_invalid: restore\nrescan_interval: 1\ndebounce: 0.2\n")
        good = (kubeadm.manifests / "etcd.yaml").read_bytes()
        (kubeadm.manifests / "etcd.yaml").write_text("kind: Pod\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (kubeadm.manifests / "etcd.yaml").read_bytes() == good:
                break
            time.sleep(0.2)
        assert (kubeadm.manifests / "etcd.yaml").read_bytes() == good, "daemon no longer restores"
    finally:
        d.kill()
        d.wait()


@pytest.mark.parametrize("version", ["1.29", "1.99"])
def test_an_unsupported_kubernetes_version_never_blocks_unpark(kubeadm, ctl_proc, version):
    """``kubernetes_version: "1.29"`` has the right form, so the config schema passed it, and
    unpark failed as fs-error on the missing schemas/pod-1.29.json (the pod stayed parked; a
    newcomer's try). Now it is a configuration error like any other: unpark warns and goes on,
    apply refuses with exit 78 naming the field, doctor reports the configuration."""
    assert ctl_proc("park", "kube-scheduler").returncode == 0
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f'node_name: cp-1\nkubernetes_version: "{version}"\n')
    res = ctl_proc("unpark", "kube-scheduler")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kubernetes_version" in res.stderr and "not supported" in res.stderr, res.stderr
    assert (kubeadm.manifests / "kube-scheduler.yaml").is_file()
    res = ctl_proc("apply", str(kubeadm.manifests / "kube-scheduler.yaml"), "--json")
    assert res.returncode == 78, res.stdout + res.stderr
    err = json.loads(res.stdout)["error"]
    assert err["field"] == "kubernetes_version" and err["line"] == 2, err
    doc = json.loads(ctl_proc("doctor", "--json").stdout)
    assert any(p["code"] == "config-invalid" for p in doc["problems"]), doc["problems"]
