"""Adversarial CLI tests: odd arguments, --json error paths, exit codes."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from spd_testlib import REPO, staticpodctl_cmd


@pytest.mark.parametrize("argv", [
    ["show", "kube-scheduler@99999999999999999999"],
    ["rollback", "kube-scheduler", "--to", "99999999999999999999"],
    ["history", "kube-scheduler", "--limit", "99999999999999999999"],
])
# Found as a bug (OverflowError traceback, no JSON, exit 1); fixed in the working tree meanwhile: kept as a regression test.
def test_huge_version_number_is_a_clean_error(kubeadm, ctl_proc, argv):
    assert ctl_proc("history", "kube-scheduler").returncode == 0
    p = ctl_proc(*argv, "--json")
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, (p.stdout, p.stderr)
    obj = json.loads(lines[0])
    if argv[0] == "history":  # a huge --limit is just "all of them"
        assert obj["ok"] is True and p.returncode == 0
        return
    assert obj["ok"] is False
    assert obj["error"]["code"] in ("unknown-version", "usage")
    assert p.returncode in (2, 3)


# Regression (found by adversarial testing, fixed in the working tree meanwhile): --lock-timeout nan is
#   accepted and waits forever for the lock (should be a usage error, exit 2)
def test_lock_timeout_nan_is_usage_error(kubeadm, ctl_proc):
    p = ctl_proc("park", "kube-scheduler", "--lock-timeout", "nan", "--json")
    assert p.returncode == 2, p.stdout
    assert json.loads(p.stdout)["error"]["code"] == "usage"
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


@pytest.mark.parametrize("value", ["[", "null", "~", "|"])
# Regression (found by adversarial testing, fixed in the working tree meanwhile): the line scan of
#   /var/lib/kubelet/config.yaml takes 'staticPodPath: [' (YAML error), null, ~ or a block-scalar indicator as
#   a relative directory name (<root>/var/lib/kubelet/[ ...) instead of refusing (78) or using the default
def test_kubelet_config_static_pod_path_odd_values(kubeadm, ctl_proc, value):
    kcfg = kubeadm.root / "var" / "lib" / "kubelet" / "config.yaml"
    kcfg.parent.mkdir(parents=True)
    kcfg.write_text(f"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: {value}\n")
    p = ctl_proc("status", "--json")
    obj = json.loads(p.stdout)
    if p.returncode == 78:
        assert obj["error"]["code"] == "config-invalid"
        return
    assert obj["manifest_dir"] == str(kubeadm.manifests), obj["manifest_dir"]


# Regression (found by adversarial testing, fixed in the working tree meanwhile): file names are printed raw
#   in text output: a name holding ESC sequences (or \\r, \\n) rewrites the operator's terminal in
#   status/validate
def test_status_text_escapes_control_characters(sandbox, ctl_proc):
    from spd_testlib import small_pod

    sandbox.write("x\x1b[2Jy.yaml", small_pod("web", "nginx:1.27"))
    for argv in (["status"], ["validate", str(sandbox.manifests)]):
        p = ctl_proc(*argv)
        assert "\x1b" not in p.stdout and "\x1b" not in p.stderr, argv


# Regression (found by adversarial testing, fixed in the working tree meanwhile): when the manifest directory
#   path is a regular file, changing verbs die with an internal NotADirectoryError traceback (recover ->
#   sweep_staging) instead of fs-error
def test_manifest_dir_is_a_file(tmp_path, ctl_proc):
    root = tmp_path / "r2"
    (root / "etc" / "kubernetes").mkdir(parents=True)
    (root / "etc" / "kubernetes" / "manifests").write_text("")
    p = subprocess.run([*staticpodctl_cmd(), "park", "x", "--json", "--root", str(root)],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert "Traceback" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["error"]["code"] == "fs-error"
    assert p.returncode == 1


@pytest.mark.parametrize("verb", [["status"]])
def test_status_into_closed_pipe(sandbox, verb):
    from spd_testlib import small_pod

    for i in range(1500):
        sandbox.write(f"web-{i:04d}.yaml", small_pod(f"web-{i:04d}", "nginx:1.27"))
    args = [a if a != "validate" else "validate" for a in verb]
    if verb[0] == "validate":
        args = ["validate", str(sandbox.manifests), *verb[1:]]
    p = subprocess.Popen([*staticpodctl_cmd(), *args, "--root", str(sandbox.root)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(10)
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    assert "Traceback" not in err, err[-600:]
    assert rc in (0, 1)  # validate exits 1 on errors (unpinned images are only warnings)
