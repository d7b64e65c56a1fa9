"""Read verbs on a node at rest: ``status`` and ``history`` take a recorded file's digest
from the stat signature its bytes were read with (observed.sig, the scan's own cache) instead of
reading and hashing the file; a file whose stat changed since is read, so drift is never missed."""

from __future__ import annotations

import os

from spd_testlib import wait_out_racy_window

from staticpodd.node import fsops


def _settle(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    """Record the directory, then scan it again once every ctime is older than the racy window."""
    wait_out_racy_window(monkeypatch, [p for p in kubeadm.manifests.iterdir() if p.is_file()])
    copy = tmp_path / "ks.yaml"
    copy.write_bytes((kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    assert ctl("apply", str(copy), "--as", "kube-scheduler").rc == 0


def _reads(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = fsops.read_state
    monkeypatch.setattr(fsops, "read_state", lambda p: seen.append(os.path.basename(p)) or real(p))
    return seen


def test_status_of_a_node_at_rest_reads_no_manifest_and_shows_the_recorded_digests(kubeadm, ctl, tmp_path,
                                                                                     monkeypatch) -> None:
    _settle(kubeadm, ctl, tmp_path, monkeypatch)
    before = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    seen = _reads(monkeypatch)
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert seen == []
    assert rows == before
    assert {c["drift"] for c in rows.values()} == {False}
    assert rows["etcd"]["mode"] == "0600"


def test_history_of_a_component_at_rest_reads_no_manifest(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    _settle(kubeadm, ctl, tmp_path, monkeypatch)
    seen = _reads(monkeypatch)
    got = ctl("history", "kube-apiserver", "--json").json()
    assert seen == []
    assert got["current_digest"] == got["versions"][-1]["digest"]


def test_new_bytes_with_the_old_size_and_mtime_put_back_are_still_drift(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    _settle(kubeadm, ctl, tmp_path, monkeypatch)
    p = kubeadm.manifests / "etcd.yaml"
    st = os.stat(p)
    data = p.read_bytes()
    p.write_bytes(data.replace(b"etcd", b"ETCD", 1))  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: only the ctime tells
    seen = _reads(monkeypatch)
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert seen == ["etcd.yaml"]
    assert rows["etcd"]["drift"] is True
    hist = ctl("history", "etcd", "--json").json()
    assert hist["current_digest"] != hist["versions"][-1]["digest"]


def test_a_chmod_since_the_recording_shows_the_new_mode(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    _settle(kubeadm, ctl, tmp_path, monkeypatch)
    os.chmod(kubeadm.manifests / "etcd.yaml", 0o644)
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["etcd"]["mode"] == "0644"
    assert rows["etcd"]["drift"] is False
