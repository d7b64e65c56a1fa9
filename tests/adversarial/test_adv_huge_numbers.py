"""A 5,000-digit integer anywhere (a stray notes.yaml.bak, the configuration file) ends no verb in
a traceback: Python's int() refuses more than sys.get_int_max_str_digits() digits with ValueError,
which PyYAML and our own decoders used to let through."""

from __future__ import annotations

import pytest

HUGE = "9" * 5000


@pytest.fixture
def with_huge_stray(kubeadm):
    kubeadm.write("notes.yaml.bak", f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: notes\nbudget: {HUGE}\n".encode())
    kubeadm.write("ledger.json", ('{"kind": "Pod", "apiVersion": "v1", "count": ' + HUGE + "}").encode())
    return kubeadm


@pytest.mark.parametrize(
    "verb",
    [
        ("park", "kube-scheduler", "--reason", "drill"),
        ("validate",),
        ("validate", "{dir}/notes.yaml.bak"),
        ("doctor",),
        ("status",),
    ],
    ids=lambda v: " ".join(v[:2]).replace("{dir}/", ""),
)
def test_a_stray_with_a_5000_digit_integer_ends_no_verb_in_a_traceback(with_huge_stray, ctl_proc, verb):
    args = [a.replace("{dir}", str(with_huge_stray.manifests)) for a in verb]
    run = ctl_proc(*args)
    assert "Traceback" not in run.stderr and "ValueError" not in run.stderr, run.stderr[-2000:]
    assert run.returncode in (0, 1, 2), run.stderr


def test_park_unpark_apply_rollback_work_beside_a_5000_digit_stray(with_huge_stray, ctl_proc, tmp_path):
    sb = with_huge_stray
    for args in (("park", "kube-scheduler", "--reason", "drill"), ("unpark", "kube-scheduler")):
        run = ctl_proc(*args)
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr
    changed = tmp_path / "sched.yaml"
    changed.write_bytes(sb.manifests.joinpath("kube-scheduler.yaml").read_bytes().replace(b"--v=2", b"--v=3")
                        + b"\n# changed\n")
    run = ctl_proc("apply", str(changed), "--as", "kube-scheduler", "--reason", "more logs")
    assert run.returncode == 0, run.stderr
    run = ctl_proc("rollback", "kube-scheduler", "--reason", "undo")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr


def test_a_5000_digit_integer_in_the_configuration_is_a_clear_configuration_error(kubeadm, ctl_proc):
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(f"debounce: {HUGE}\n")
    run = ctl_proc("park", "kube-scheduler", "--reason", "drill")
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    assert "staticpodd.yaml:1:11" in run.stderr and "integer of 5000 digits is too large" in run.stderr, run.stderr
    run = ctl_proc("unpark", "kube-scheduler")
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
