"""staticpodd.node.staticpod_park and staticpod_info with real ansible-core on sandbox ``--root`` nodes
(the collection installed from its tarball), and the failures when staticpodctl is missing or too old.
"""

from __future__ import annotations

import shutil
import time

from collection_harness import scheduler_manifest

PARK = "park kube-scheduler"
INFO = "read the node"


def _deploy(fleet, corpus, *names, text=None):
    for name in names or [n.name for n in fleet.nodes]:
        node = fleet.node(name)
        seed = node.root.parent / "seed.yaml"
        seed.write_text(text or scheduler_manifest(corpus))
        node.ctl("apply", str(seed), "--as", "kube-scheduler", check=True)  # version 1


def test_park_is_changed_then_ok_the_same_deadline_is_ok_and_a_different_one_is_refused(fleet, corpus):
    _deploy(fleet, corpus, "cp-1")
    node = fleet.node("cp-1")
    run = fleet.playbook("park.yml", {"target": "cp-1", "park_for": "30m", "reason": "etcd defrag"})
    t = run.one(PARK, "cp-1")
    assert t["status"] == "changed", t
    assert t["result"]["park"]["reason"] == "etcd defrag" and t["result"]["park"]["until"]
    assert any("staticpodd is not running on this node" in w for w in t["result"].get("warnings", [])), t
    assert not node.live().exists() and node.parked().exists()
    parked = node.directory()

    again = fleet.playbook("park.yml", {"target": "cp-1", "park_for": "30m"})  # the same task, rerun
    t = again.one(PARK, "cp-1")
    assert t["status"] == "ok", t
    assert "already parked" in t["result"]["msg"]
    assert fleet.playbook("park.yml", {"target": "cp-1"}).one(PARK, "cp-1")["status"] == "ok"  # any park will do
    until = t["result"]["park"]["until"]
    assert fleet.playbook("park.yml", {"target": "cp-1", "park_until": until}).one(PARK, "cp-1")["status"] == "ok"

    other = fleet.playbook("park.yml", {"target": "cp-1", "park_for": "2h"})
    t = other.one(PARK, "cp-1")
    assert t["status"] == "failed" and t["result"]["code"] == "deadline-differs", t
    assert until in t["result"]["msg"] and "unpark it first" in t["result"]["msg"]
    assert node.directory() == parked
    assert node.ctl("status")["components"][0]["parked"]["until"] == until  # the deadline did not move


def test_unpark_is_changed_then_ok_and_check_mode_changes_nothing(fleet, corpus):
    _deploy(fleet, corpus, "cp-1")
    node = fleet.node("cp-1")
    live = node.everything()

    check = fleet.playbook("park.yml", {"target": "cp-1"}, check=True, diff=True)
    t = check.one(PARK, "cp-1")
    assert t["status"] == "changed" and t["result"]["state"] == "parked"
    assert t["result"]["diff"]["before"] == "state: live\n" and t["result"]["diff"]["after"] == "state: parked\n"
    assert node.everything() == live  # not a byte, not the store

    assert fleet.playbook("park.yml", {"target": "cp-1"}).one(PARK, "cp-1")["status"] == "changed"
    parked = node.everything()
    check = fleet.playbook("park.yml", {"target": "cp-1", "park_state": "unparked"}, check=True)
    assert check.one(PARK, "cp-1")["status"] == "changed"
    assert node.everything() == parked

    run = fleet.playbook("park.yml", {"target": "cp-1", "park_state": "unparked"})
    t = run.one(PARK, "cp-1")
    assert t["status"] == "changed" and t["result"]["state"] == "live", t
    assert node.live().exists() and not node.parked().exists()
    again = fleet.playbook("park.yml", {"target": "cp-1", "park_state": "unparked"})
    assert again.one(PARK, "cp-1")["status"] == "ok"
    assert [v["action"] for v in node.history()] == ["apply", "park", "unpark"]


def test_needs_force_is_told_apart_from_already_parked_by_its_code(fleet, corpus):
    node = fleet.node("cp-1")
    shutil.copyfile(corpus / "manifests" / "07-kubeadm-docs-haproxy.yaml", node.live("haproxy.yaml"))
    before = node.directory()
    run = fleet.playbook("park.yml", {"target": "cp-1", "component": "haproxy"})
    t = run.one(PARK, "cp-1")
    assert t["status"] == "failed" and t["result"]["code"] == "needs-force", t
    assert "[needs-force]" in t["result"]["msg"] and "--force" in t["result"]["msg"]
    assert node.directory() == before

    forced = fleet.playbook("park.yml", {"target": "cp-1", "component": "haproxy", "force": True})
    assert forced.one(PARK, "cp-1")["status"] == "changed"
    assert not node.live("haproxy.yaml").exists()
    again = fleet.playbook("park.yml", {"target": "cp-1", "component": "haproxy"})  # exit 4 too, but already-parked
    assert again.one(PARK, "cp-1")["status"] == "ok"


def test_park_of_an_unknown_component_fails_clearly(fleet):
    run = fleet.playbook("park.yml", {"target": "cp-1", "component": "kube-nothing"})
    t = run.one(PARK, "cp-1")
    assert t["status"] == "failed" and t["result"]["code"] == "unknown-component"
    assert "kube-nothing" in t["result"]["msg"]


def test_info_reports_components_parks_drift_strays_findings_and_the_daemon_of_each_node(fleet, corpus):
    _deploy(fleet, corpus)
    fleet.start_daemon(fleet.node("cp-1"))
    cp2 = fleet.node("cp-2")
    cp2.live().write_text(cp2.live().read_text().replace("--leader-elect=true", "--leader-elect=false"))  # by hand
    shutil.copyfile(cp2.live(), cp2.live("kube-scheduler.yaml.bak"))  # a stray the kubelet runs too
    cp3 = fleet.node("cp-3")
    cp3.ctl("park", "kube-scheduler", "--for", "1h", "--reason", "CHG-7 etcd", check=True)

    run = fleet.playbook("info.yml")

    assert run.rc == 0, run.out
    r1 = run.one(INFO, "cp-1")["result"]
    assert r1["daemon"]["running"] is True and r1["states"] == {"kube-scheduler": "live"}
    assert r1["parks"] == [] and r1["drift"] == [] and r1["healthy"] is True
    assert r1["staticpodctl_version"] and r1["store"] == "ok"
    r2 = run.one(INFO, "cp-2")["result"]
    assert r2["daemon"]["running"] is False
    assert r2["drift"] == ["kube-scheduler"]
    assert r2["strays"] == ["kube-scheduler.yaml.bak"]
    codes = {f["code"] for f in r2["findings"]}
    assert {"stray", "duplicate-pod"} <= codes, codes
    assert r2["healthy"] is False and any(p["code"] == "drift" for p in r2["problems"])
    r3 = run.one(INFO, "cp-3")["result"]
    assert r3["parked_components"] == ["kube-scheduler"] and r3["states"]["kube-scheduler"] == "parked"
    park = r3["parks"][0]
    assert park["reason"] == "CHG-7 etcd" and park["actor"] and park["until"] and park["since"]
    # registered results are read from another host: what the rolling drill's refusal does
    assert run.one("parked anywhere", "cp-1")["result"]["msg"] == ["cp-3"]
    assert run.stats("cp-2")["changed"] == 0


def test_the_daemon_on_one_node_and_the_modules_do_not_fight(fleet, corpus):
    """With staticpodd running on cp-1, a change through the module is recognised by the daemon as
    staticpodctl's own (by digest), not as drift, and a park is not undone by it."""
    _deploy(fleet, corpus, "cp-1")
    fleet.start_daemon(fleet.node("cp-1"))
    changed = fleet.work / "changed.yaml"
    changed.write_text(scheduler_manifest(corpus).replace("--leader-elect=true", "--leader-elect=false"))
    assert fleet.playbook("manifest.yml", {"manifest_file": str(changed)}, limit="cp-1").rc == 0
    assert fleet.playbook("park.yml", {"target": "cp-1"}).one(PARK, "cp-1")["status"] == "changed"
    time.sleep(1.5)  # give the daemon's watch time to see both changes
    info = fleet.playbook("info.yml", limit="cp-1").one(INFO, "cp-1")["result"]
    assert info["daemon"]["running"] is True
    assert info["parked_components"] == ["kube-scheduler"] and info["drift"] == []
    assert [v["action"] for v in fleet.node("cp-1").history()] == ["apply", "apply", "park"]


def test_a_missing_or_too_old_staticpodctl_fails_with_a_clear_message(fleet, tmp_path):
    run = fleet.playbook("missing_ctl.yml", {"staticpodctl_path": str(tmp_path / "nope")})
    r = run.one(INFO, "cp-1")
    assert r["status"] == "failed" and "is not an executable file on this node" in r["result"]["msg"]

    bare = dict(PATH="/usr/bin:/bin")  # no staticpodctl on the node's PATH
    run = fleet.playbook("missing_ctl.yml", env=bare)
    r = run.one(INFO, "cp-1")
    assert r["status"] == "failed" and "staticpodctl was not found on this node's PATH" in r["result"]["msg"]

    old = tmp_path / "staticpodctl-0.0.9"
    old.write_text("#!/bin/sh\necho 'staticpodctl 0.0.9'\n")
    old.chmod(0o755)
    run = fleet.playbook("missing_ctl.yml", {"staticpodctl_path": str(old)})
    r = run.one(INFO, "cp-1")["result"]
    assert "staticpodctl 0.0.9" in r["msg"] and "older than the staticpodd.node collection needs (>= 0.1.0)" in r["msg"]

    found = fleet.playbook("missing_ctl.yml")  # the project's staticpodctl, found on PATH
    assert found.one(INFO, "cp-1")["status"] == "ok"


def test_a_component_moved_back_by_hand_is_ok_to_unpark_in_check_mode_and_for_real(fleet, corpus):
    _deploy(fleet, corpus, "cp-1")
    node = fleet.node("cp-1")
    node.ctl("park", "kube-scheduler", check=True)
    node.parked().rename(node.live())  # the README's 3 a.m. escape hatch
    check = fleet.playbook("park.yml", {"target": "cp-1", "park_state": "unparked"}, check=True)
    assert check.one(PARK, "cp-1")["status"] == "ok"
    run = fleet.playbook("park.yml", {"target": "cp-1", "park_state": "unparked"})
    t = run.one(PARK, "cp-1")
    assert t["status"] == "ok" and "moved back by hand" in t["result"]["msg"], t
    assert node.ctl("status")["components"][0]["parked"] is None  # the park record is closed
