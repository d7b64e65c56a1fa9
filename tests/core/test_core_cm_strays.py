"""doctor and validate name the config-management tool that left a stray, and the fix."""

from __future__ import annotations


def test_an_ansible_backup_is_named_as_such_with_the_fix(kubeadm, ctl) -> None:
    live = kubeadm.manifests / "kube-scheduler.yaml"
    (kubeadm.manifests / "kube-scheduler.yaml.16532.2026-11-29@18:35:09~").write_bytes(live.read_bytes())
    r = ctl("doctor", "--json")
    assert r.rc == 1  # the backup defines the same pod: an error
    strays = [f for f in r.json()["findings"] if f["code"] == "stray"]
    assert len(strays) == 1
    assert "an Ansible backup of kube-scheduler.yaml" in strays[0]["message"]
    assert "backup: yes" in strays[0]["hint"]


def test_a_puppet_temp_file_is_named_as_such_with_the_fix(kubeadm, ctl) -> None:
    (kubeadm.manifests / "kube-scheduler.yaml20261129-14192-1xi1mkg").write_bytes(b"")
    r = ctl("validate", str(kubeadm.manifests), "--json")
    strays = [f for f in r.json()["findings"] if f["code"] == "stray"]
    assert len(strays) == 1
    assert "a Puppet tempfile of kube-scheduler.yaml" in strays[0]["message"]
    assert "staging_location" in strays[0]["hint"]
