"""doctor and validate name the config-management tool that left a stray, and the fix."""

from __future__ import annotations

from spd_testlib import small_pod


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


def test_a_removed_stray_leaves_the_strays_metric_and_status_offers_no_rollback_of_it(sandbox, ctl) -> None:
    """kube-scheduler.yaml.bak adopted, then removed by hand: the removal is the fix, so the
    staticpodd_strays alert stops firing and status does not offer to put the leftover back
    (rollback would make the kubelet read it, and run the pod from it, again)."""
    from staticpodd.daemon.metrics import snapshot_from_status
    from staticpodd.engine import Actor, Engine
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    sandbox.write("kube-scheduler.yaml", small_pod("kube-scheduler"))
    sandbox.write("kube-scheduler.yaml.bak", small_pod("kube-scheduler"))
    eng = Engine(Layout.build(sandbox.root), actor=Actor("test", 0), journal=Journal("staticpodd", str(sandbox.root)))
    with eng.locked():
        eng.scan()
        assert snapshot_from_status(eng.status(), [], started_at=0.0, now=1.0).strays == 1
        (sandbox.manifests / "kube-scheduler.yaml.bak").unlink()
        eng.scan()
    assert snapshot_from_status(eng.status(), [], started_at=0.0, now=1.0).strays == 0
    eng.close()
    r = ctl("status")
    row = next(line for line in r.out.splitlines() if line.startswith("kube-scheduler.yaml.bak"))
    assert "removed stray" in row and "rollback" not in row
