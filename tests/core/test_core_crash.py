"""Crash safety: a real staticpodctl process is killed with SIGKILL at each step of apply, park
and unpark (``STATICPODD_TEST_CRASHPOINT`` makes it kill itself exactly there). Afterwards the
kubelet's directory must hold the old state or the new one — never both, never neither — and the
next command must finish or undo the operation from its recorded intent and sweep staging files.
"""

from __future__ import annotations

import hashlib
import signal

import pytest

SCHED = "kube-scheduler.yaml"


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def assert_only_manifests(sb) -> None:
    assert sb.visible() == sorted(["etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", SCHED]) or \
        sb.visible() == sorted(["etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml"])


@pytest.mark.parametrize("point,finished", [
    ("swap:staged", False), ("swap:intent", False), ("swap:exchanged", True), ("swap:renamed", True),
    ("swap:recorded", True),
])
def test_apply_killed_at_each_step_leaves_old_or_new_and_is_finished_or_undone(kubeadm, ctl_proc, tmp_path,
                                                                                point, finished) -> None:
    assert ctl_proc("park", "kube-controller-manager").returncode == 0 and ctl_proc("unpark", "kube-controller-manager").returncode == 0  # adopt
    old = (kubeadm.manifests / SCHED).read_bytes()
    new = old.replace(b"--leader-elect=true", b"--leader-elect=false")
    src = tmp_path / SCHED
    src.write_bytes(new)
    r = ctl_proc("apply", str(src), env={"STATICPODD_TEST_CRASHPOINT": point})
    assert r.returncode == -signal.SIGKILL, r.stderr
    live = (kubeadm.manifests / SCHED).read_bytes()
    assert live in (old, new)
    assert live == (new if finished else old)
    assert_only_manifests(kubeadm)
    rec = ctl_proc("recover", "--json")
    assert rec.returncode == 0, rec.stderr
    import json

    outcomes = json.loads(rec.stdout)["recovered"]
    if point == "swap:recorded":
        assert outcomes == []  # it had finished; nothing was pending
    elif point == "swap:staged":
        assert outcomes == []  # no intent yet: only the staging file, which is swept
    else:
        assert [o["outcome"] for o in outcomes] == ["finished" if finished else "undone"]
    assert list((kubeadm.manifests / ".staticpodd/staging").iterdir()) == []
    hist = json.loads(ctl_proc("history", "kube-scheduler", "--json").stdout)["versions"]
    assert hist[-1]["digest"] == sha(live)
    assert json.loads(ctl_proc("status", "--json").stdout)["interrupted"] == 0


# move:linked exists only in the link()+unlink() fallback (between the two calls).
STEPS = [(p, f, fb) for p, f in ((":intent", False), (":renamed", True)) for fb in (False, True)]


@pytest.mark.parametrize("point,finished,fallback", [("park" + p, f, fb) for p, f, fb in STEPS]
                         + [("move:linked", None, True)])
def test_park_killed_at_each_step_is_finished_or_undone(kubeadm, ctl_proc, point, finished, fallback) -> None:
    env = {"STATICPODD_TEST_CRASHPOINT": point}
    if fallback:
        env["STATICPODD_TEST_NO_RENAMEAT2"] = "1"
    old = (kubeadm.manifests / SCHED).read_bytes()
    r = ctl_proc("park", "kube-scheduler", "--reason", "drill", env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    live = (kubeadm.manifests / SCHED)
    parked = (kubeadm.parked / SCHED)
    assert live.exists() or parked.exists()
    rec = ctl_proc("recover")
    assert rec.returncode == 0, rec.stderr
    # exactly one copy, byte-identical, and the store agrees with the directory
    assert live.exists() != parked.exists()
    assert (live if live.exists() else parked).read_bytes() == old
    import json

    st = {c["component"]: c for c in json.loads(ctl_proc("status", "--json").stdout)["components"]}
    if finished is True:
        assert not live.exists()
    if finished is False:
        assert live.exists()
    assert st["kube-scheduler"]["state"] == ("parked" if parked.exists() else "live")
    assert (st["kube-scheduler"]["parked"] is not None) == parked.exists()


@pytest.mark.parametrize("point,finished,fallback", [("unpark" + p, f, fb) for p, f, fb in STEPS]
                         + [("move:linked", True, True)])
def test_unpark_killed_at_each_step_is_finished_or_undone(kubeadm, ctl_proc, point, finished, fallback) -> None:
    old = (kubeadm.manifests / SCHED).read_bytes()
    assert ctl_proc("park", "kube-scheduler").returncode == 0
    env = {"STATICPODD_TEST_CRASHPOINT": point}
    if fallback:
        env["STATICPODD_TEST_NO_RENAMEAT2"] = "1"
    r = ctl_proc("unpark", "kube-scheduler", env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    rec = ctl_proc("recover")
    assert rec.returncode == 0, rec.stderr
    live, parked = kubeadm.manifests / SCHED, kubeadm.parked / SCHED
    assert live.exists() != parked.exists()
    assert live.exists() == finished
    assert (live if live.exists() else parked).read_bytes() == old
    import json

    st = {c["component"]: c for c in json.loads(ctl_proc("status", "--json").stdout)["components"]}
    assert st["kube-scheduler"]["state"] == ("live" if finished else "parked")
    assert (st["kube-scheduler"]["parked"] is None) == finished


def test_any_changing_command_recovers_first(kubeadm, ctl_proc, tmp_path) -> None:
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.manifests / SCHED).read_bytes() + b"# new\n")
    r = ctl_proc("apply", str(src), env={"STATICPODD_TEST_CRASHPOINT": "swap:renamed"})
    assert r.returncode == -signal.SIGKILL
    assert ctl_proc("park", "kube-controller-manager").returncode == 0
    import json

    hist = json.loads(ctl_proc("history", "kube-scheduler", "--json").stdout)["versions"]
    assert hist[-1]["action"] == "apply" and hist[-1]["digest"] == sha(src.read_bytes())


def test_status_calls_an_interrupted_apply_interrupted_not_someone_elses_edit(kubeadm, ctl_proc, tmp_path) -> None:
    """A newcomer's try: after an apply SIGKILLed past its rename, status said "drift: changed by
    someone else" beside "interrupted operations: 1". The row now names the operation."""
    ctl_proc("status")  # adopt the four
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.manifests / SCHED).read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false"))
    r = ctl_proc("apply", str(src), env={"STATICPODD_TEST_CRASHPOINT": "swap:renamed"})
    assert r.returncode == -signal.SIGKILL, r.stderr
    out = ctl_proc("status").stdout
    row = next(line for line in out.splitlines() if line.startswith("kube-scheduler"))
    assert "INTERRUPTED: a swap stopped half-way" in row and "staticpodctl recover" in row, out
    assert "someone else" not in row, out
    assert ctl_proc("recover").returncode == 0
    row = next(line for line in ctl_proc("status").stdout.splitlines() if line.startswith("kube-scheduler"))
    assert "INTERRUPTED" not in row and "drift" not in row, row
