"""A park made while ``kubeadm upgrade`` waits: kubeadm times out and renames its backup (the old
manifest) back, so the kubelet runs the component while it is "parked", and the parked copy holds
kubeadm's new bytes. Seen on a real kubeadm v1.37.2 control plane (tests/controlplane); here the
same files are laid by hand on a sandbox root: park, then the old bytes written back."""

from __future__ import annotations

import json


def _kubeadm_new(old: bytes) -> bytes:
    return old.replace(b"    - --leader-elect=true\n", b"    - --leader-elect=true\n    - --v=2\n", 1)


def _broken_park(kubeadm, ctl) -> bytes:
    live = kubeadm.manifests / "kube-scheduler.yaml"
    old = live.read_bytes()
    assert ctl("status").rc == 0  # adopts kubeadm's original
    live.write_bytes(_kubeadm_new(old))  # kubeadm's swap
    assert ctl("park", "kube-scheduler", "--reason", "drill").rc == 0
    live.write_bytes(old)  # kubeadm's rollback: its backup renamed back
    return old


def test_unparks_refusal_names_unpark_discard_not_a_file_to_delete_by_hand(kubeadm, ctl) -> None:
    _broken_park(kubeadm, ctl)
    res = ctl("unpark", "kube-scheduler")
    assert res.rc != 0
    assert "staticpodctl unpark kube-scheduler --discard" in res.err, res.err
    assert ".staticpodd/parked" not in res.err, res.err  # never "delete a file in .staticpodd/ by hand"
    doctor = ctl("doctor")
    assert "unpark kube-scheduler --discard" in doctor.out, doctor.out


def test_after_the_discard_no_verb_calls_the_live_file_drift(kubeadm, ctl) -> None:
    old = _broken_park(kubeadm, ctl)
    assert ctl("unpark", "kube-scheduler", "--discard").rc == 0
    assert (kubeadm.manifests / "kube-scheduler.yaml").read_bytes() == old
    status = json.loads(ctl("status", "--json").out)
    row = next(c for c in status["components"] if c["component"] == "kube-scheduler")
    assert row["state"] == "live" and not row["drift"], row
    assert "drift" not in ctl("doctor").out
    hist = ctl("history", "kube-scheduler")
    assert "drift" not in hist.out and "differs from the newest version" not in hist.out, hist.out


def test_history_never_calls_the_parked_copy_the_current_file(kubeadm, ctl) -> None:
    live = kubeadm.manifests / "kube-scheduler.yaml"
    assert ctl("park", "kube-scheduler").rc == 0
    parked = kubeadm.manifests / ".staticpodd/parked/kube-scheduler.yaml"
    parked.write_bytes(_kubeadm_new(parked.read_bytes()))  # changed by hand while parked
    hist = ctl("history", "kube-scheduler")
    assert "the current file" not in hist.out, hist.out
    assert "the parked copy" in hist.out, hist.out
    assert not live.exists()
