"""A 5,000-digit integer anywhere the tools read: every verb answers, none ends in a traceback.

CPython refuses ``int()`` of a decimal string of more than 4,300 digits with a ValueError; the
kubelet's decoder has no such limit (go-yaml keeps an out-of-range integer as a string: the
differential in tests/validate/test_differential_go.py decides what the kubelet does).
"""

from __future__ import annotations

import json
import os

HUGE = "9" * 5000


def _no_traceback(p):
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr[-2000:]


def test_every_verb_works_beside_a_stray_holding_a_huge_integer(kubeadm, ctl_proc, tmp_path):
    kubeadm.write("notes.yaml.bak", f"notes: {HUGE}\n".encode())
    p = ctl_proc("validate", str(kubeadm.manifests), "--json")
    _no_traceback(p)
    files = {f["path"].rsplit("/", 1)[-1]: f for f in json.loads(p.stdout)["findings"]}
    assert "notes.yaml.bak" in files  # a stray the kubelet cannot run as a pod
    for args in (("park", "kube-scheduler"), ("unpark", "kube-scheduler"), ("doctor",), ("status",)):
        p = ctl_proc(*args)
        _no_traceback(p)
    new = (kubeadm.manifests / "kube-scheduler.yaml").read_bytes() + b"# changed\n"
    src = tmp_path / "new.yaml"
    src.write_bytes(new)
    p = ctl_proc("apply", str(src), "--as", "kube-scheduler")
    _no_traceback(p)
    assert p.returncode == 0, p.stderr
    p = ctl_proc("rollback", "kube-scheduler")
    _no_traceback(p)
    assert p.returncode == 0, p.stderr


def test_a_huge_integer_in_a_manifest_is_the_kubelets_verdict_not_a_crash(sandbox, ctl_proc, tmp_path):
    f = tmp_path / "pod.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: kube-system\nspec:\n"
                 f"  priority: {HUGE}\n  containers:\n  - name: c\n    image: nginx:1.27\n")
    p = ctl_proc("validate", str(f), "--json")
    _no_traceback(p)
    assert p.returncode == 1  # go-yaml keeps it as a string: not an int32 for spec.priority


def test_a_huge_integer_in_the_configuration_names_its_line_and_unpark_still_works(kubeadm, ctl_proc):
    conf = kubeadm.root / "etc/staticpodd/staticpodd.yaml"
    conf.parent.mkdir(parents=True)
    conf.write_text(f"retention:\n  keep_versions: {HUGE}\n")
    os.chmod(conf, 0o600)
    p = ctl_proc("park", "kube-scheduler")
    _no_traceback(p)
    p = ctl_proc("unpark", "kube-scheduler")
    _no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert "staticpodd.yaml:2:18" in p.stderr and "5000 digits" in p.stderr, p.stderr
