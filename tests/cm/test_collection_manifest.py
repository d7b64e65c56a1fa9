"""staticpodd.node.staticpod_manifest with real ansible-core (a venv of its own) on a fleet of sandbox
``--root`` nodes in one inventory, the collection built with ansible-galaxy and installed from the
tarball. Assertions are on the playbook's JSON result and on the nodes' files (sha256, inode, mtime).
"""

from __future__ import annotations

import hashlib
import os

from collection_harness import scheduler_manifest

TASK = "kube-scheduler manifest"
NODES = ("cp-1", "cp-2", "cp-3")


def _files(fleet, corpus, tmp_path):
    good = tmp_path / "kube-scheduler.yaml"
    good.write_text(scheduler_manifest(corpus))
    changed = tmp_path / "kube-scheduler-changed.yaml"
    changed.write_text(good.read_text().replace("--leader-elect=true", "--leader-elect=false"))
    invalid = tmp_path / "kube-scheduler-invalid.yaml"
    invalid.write_text(good.read_text().replace("\n    image: ", "\n\timage: ", 1))
    return good, changed, invalid


def test_apply_is_changed_on_every_node_then_ok_and_the_rerun_touches_nothing(fleet, corpus, tmp_path):
    good, _, _ = _files(fleet, corpus, tmp_path)
    first = fleet.playbook("manifest.yml", {"manifest_file": str(good), "reason": "CHG-1"})
    assert first.rc == 0, first.out
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    for host, t in first.results(TASK).items():
        assert t["status"] == "changed", (host, t)
        r = t["result"]
        assert r["version"] == 1 and r["digest"] == digest and r["component"] == "kube-scheduler"
        assert r["location"] == "live" and r["previous_digest"] is None
        assert fleet.node(host).live().read_bytes() == good.read_bytes()
    assert sorted(first.results(TASK)) == sorted(NODES)
    before = {n.name: n.snapshot() for n in fleet.nodes}

    again = fleet.playbook("manifest.yml", {"manifest_file": str(good), "reason": "CHG-1"})

    assert again.rc == 0
    for host, t in again.results(TASK).items():
        assert t["status"] == "ok", (host, t)
        assert t["result"]["version"] == 1 and t["result"]["digest"] == digest  # the version in place
        assert again.stats(host)["changed"] == 0
    assert {n.name: n.snapshot() for n in fleet.nodes} == before  # no rename, no chmod, no mtime change
    for n in fleet.nodes:
        versions = n.history()
        assert [v["version"] for v in versions] == [1] and versions[0]["reason"] == "CHG-1"


def test_check_mode_changes_no_byte_and_diff_shows_the_change(fleet, corpus, tmp_path):
    good, changed, _ = _files(fleet, corpus, tmp_path)
    assert fleet.playbook("manifest.yml", {"manifest_file": str(good)}, limit="cp-1,cp-2").rc == 0
    before = {n.name: n.everything() for n in fleet.nodes}  # store, parked area, staging: every file

    run = fleet.playbook("manifest.yml", {"manifest_file": str(changed)}, check=True, diff=True)

    assert run.rc == 0, run.out
    for host in NODES:
        t = run.one(TASK, host)
        assert t["status"] == "changed", (host, t)  # "would change"
        assert t["result"]["version"] is None
        assert t["result"]["digest"] == hashlib.sha256(changed.read_bytes()).hexdigest()
    diff = run.one(TASK, "cp-1")["result"]["diff"]
    assert "--leader-elect=true" in diff["before"] and "--leader-elect=false" in diff["after"]
    assert "--leader-elect=false" not in diff["before"]
    assert run.one(TASK, "cp-3")["result"]["diff"]["before"] == ""  # nothing there yet: all of it is new
    shown = [d for d in run.out["diffs"] if d["task"] == TASK]
    assert len(shown) == 3  # Ansible's --diff display got all three
    assert {n.name: n.everything() for n in fleet.nodes} == before
    assert not fleet.node("cp-3").live().exists()

    # without --diff no diff is returned; without --check the change lands
    real = fleet.playbook("manifest.yml", {"manifest_file": str(changed)}, limit="cp-1")
    t = real.one(TASK, "cp-1")
    assert t["status"] == "changed" and "diff" not in t["result"] and t["result"]["version"] == 2
    assert "diff" not in t["result"]["staticpodctl"]  # the manifest's bytes only when asked for
    assert fleet.node("cp-1").live().read_bytes() == changed.read_bytes()


def test_a_bad_manifest_fails_with_its_line_and_finding_code_and_changes_nothing(fleet, corpus, tmp_path):
    good, _, invalid = _files(fleet, corpus, tmp_path)
    assert fleet.playbook("manifest.yml", {"manifest_file": str(good)}).rc == 0
    before = {n.name: n.directory() for n in fleet.nodes}

    run = fleet.playbook("manifest.yml", {"manifest_file": str(invalid)}, limit="cp-1")

    assert run.rc != 0
    t = run.one(TASK, "cp-1")
    assert t["status"] == "failed"
    r = t["result"]
    assert r["code"] == "invalid-manifest" and r["changed"] is False
    assert "content:20:1: error[yaml-tab]" in r["msg"], r["msg"]  # file:line:column, finding code
    assert "nothing was changed" in r["msg"]
    assert r["error"]["findings"][0]["line"] == 20

    # the same bytes from a path on the node: the message names that file
    on_node = fleet.node("cp-2").root.parent / "desired.yaml"
    on_node.write_bytes(invalid.read_bytes())
    run = fleet.playbook("manifest.yml", {"manifest_src": str(on_node)}, limit="cp-2")
    r = run.one(TASK, "cp-2")["result"]
    assert f"{on_node}:20:1: error[yaml-tab]" in r["msg"], r["msg"]
    # not a byte in any kubelet directory (the store does record the refused digest and its verdict)
    assert {n.name: n.directory() for n in fleet.nodes} == before


def test_validate_false_is_refused_rather_than_silently_ignored(fleet, corpus, tmp_path):
    good, _, _ = _files(fleet, corpus, tmp_path)
    run = fleet.playbook("manifest.yml", {"manifest_file": str(good), "validate": False}, limit="cp-1")
    r = run.one(TASK, "cp-1")
    assert r["status"] == "failed" and "validate=false is not supported" in r["result"]["msg"]
    assert not fleet.node("cp-1").live().exists()


def test_state_absent_takes_it_out_keeps_its_versions_and_is_ok_on_rerun(fleet, corpus, tmp_path):
    good, _, _ = _files(fleet, corpus, tmp_path)
    assert fleet.playbook("manifest.yml", {"manifest_file": str(good)}, limit="cp-1").rc == 0
    node = fleet.node("cp-1")
    before = node.everything()

    check = fleet.playbook("manifest.yml", {"manifest_state": "absent"}, limit="cp-1", check=True, diff=True)
    t = check.one(TASK, "cp-1")
    assert t["status"] == "changed" and "--leader-elect=true" in t["result"]["diff"]["before"]
    assert t["result"]["diff"]["after"] == ""
    assert node.everything() == before

    run = fleet.playbook("manifest.yml", {"manifest_state": "absent", "reason": "retired"}, limit="cp-1")
    assert run.one(TASK, "cp-1")["status"] == "changed", run.out
    assert not node.live().exists() and not node.parked().exists()
    assert [n for n in os.listdir(node.manifest_dir) if not n.startswith(".")] == []
    actions = [v["action"] for v in node.history()]
    assert actions[0] == "apply" and actions[-1] == "discard", actions  # the bytes stay in history
    assert node.ctl("show", "kube-scheduler@1")["content"] == good.read_text()

    again = fleet.playbook("manifest.yml", {"manifest_state": "absent"}, limit="cp-1")
    assert again.one(TASK, "cp-1")["status"] == "ok"


def test_apply_with_wait_proves_the_new_config_hash_runs_on_the_stand_in_runtime(fleet, corpus, tmp_path,
                                                                                  probe_server):
    """``wait`` against the stand-in runtime (tests/cm/standin_runtime.py: no kubelet can run here)."""
    good = tmp_path / "kube-scheduler.yaml"
    good.write_text(scheduler_manifest(corpus, probe_server.port))
    changed = tmp_path / "kube-scheduler-changed.yaml"
    changed.write_text(good.read_text().replace("--leader-elect=true", "--leader-elect=false"))
    assert fleet.playbook("manifest.yml", {"manifest_file": str(good)}, limit="cp-1").rc == 0

    run = fleet.playbook("manifest.yml", {"manifest_file": str(changed), "wait": True, "wait_timeout": "20s"},
                         limit="cp-1")

    t = run.one(TASK, "cp-1")
    assert t["status"] == "changed", t
    w = t["result"]["wait"]
    assert w["state"] == "running", w
    assert w["details"]["config_hash"] != w["details"]["before_config_hash"]
    assert probe_server.requests  # the manifest's own probes ran against the real server


def test_a_failed_wait_with_rollback_on_failure_fails_the_task_and_puts_the_previous_bytes_back(
        fleet, corpus, tmp_path, probe_server):
    good = tmp_path / "kube-scheduler.yaml"
    good.write_text(scheduler_manifest(corpus, probe_server.port))
    broken = tmp_path / "kube-scheduler-broken.yaml"
    broken.write_text(scheduler_manifest(corpus, 1))  # its probes dial a closed port: never healthy
    assert fleet.playbook("manifest.yml", {"manifest_file": str(good)}, limit="cp-1").rc == 0

    run = fleet.playbook("manifest.yml", {"manifest_file": str(broken), "wait": True, "wait_timeout": "6s",
                                          "rollback_on_failure": True}, limit="cp-1")

    t = run.one(TASK, "cp-1")
    assert t["status"] == "failed", t
    assert t["result"].get("code") == "wait-timeout", t["result"]
    assert t["result"]["rollback"]["ok"] is True
    assert fleet.node("cp-1").live().read_bytes() == good.read_bytes()
    assert fleet.node("cp-1").history()[-1]["action"] == "rollback"


def test_a_manifest_for_another_pod_needs_rename_and_a_parked_component_stays_parked_unless_unpark(
        fleet, corpus, tmp_path):
    good, changed, _ = _files(fleet, corpus, tmp_path)
    node = fleet.node("cp-1")
    assert fleet.playbook("manifest.yml", {"manifest_file": str(good)}, limit="cp-1").rc == 0
    other = tmp_path / "renamed.yaml"
    other.write_text(good.read_text().replace("\n  name: kube-scheduler\n", "\n  name: kube-scheduler-two\n"))
    before = node.directory()
    run = fleet.playbook("manifest.yml", {"manifest_file": str(other)}, limit="cp-1")
    r = run.one(TASK, "cp-1")["result"]
    assert r["code"] == "conflict" and "kube-scheduler-two" in r["msg"] and "rename=true" in r["msg"], r
    assert node.directory() == before

    node.ctl("park", "kube-scheduler", check=True)
    run = fleet.playbook("manifest.yml", {"manifest_file": str(changed)}, limit="cp-1")
    t = run.one(TASK, "cp-1")
    assert t["status"] == "changed" and t["result"]["location"] == "parked", t
    assert not node.live().exists() and node.parked().read_bytes() == changed.read_bytes()
    run = fleet.playbook("manifest.yml", {"manifest_file": str(changed), "unpark": True}, limit="cp-1")
    t = run.one(TASK, "cp-1")
    assert t["status"] == "changed" and t["result"]["location"] == "live", t
    assert node.live().read_bytes() == changed.read_bytes()
