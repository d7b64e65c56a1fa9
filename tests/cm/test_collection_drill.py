"""The collection's rolling drill (``ansible-playbook staticpodd.node.rolling_drill``, run from the
installed tarball) on three sandbox control-plane nodes, staticpodd running on cp-1, ``wait`` proven
against the stand-in runtime (tests/cm/standin_runtime.py; no kubelet can run here).

Every node has post-park and post-unpark hooks (the real hooks.d mechanism) that append
``<verb> <node> <time>`` to one shared log, so the order of parks across the fleet is read from the
nodes themselves, not from Ansible's account of it.
"""

from __future__ import annotations

import os
import stat
import time

from collection_harness import VENV_BIN, scheduler_manifest

DRILL = "staticpodd.node.rolling_drill"
REFUSE = "Refuse to start when the component is already parked on a node of the group"
STOP = "Stop when the component was parked on another node meanwhile"
PARK = "Park the component (the daemon unparks it at the deadline if this run dies)"
UNPARK = "Unpark the component and wait until it runs and passes its probes"


def _hook(node, phase_verb: str, body: str) -> None:
    d = node.root / "etc" / "staticpodd" / "hooks.d" / f"{phase_verb}.d"
    d.mkdir(parents=True, exist_ok=True)
    for p in (d.parent.parent, d.parent, d):
        os.chmod(p, 0o755)
    hook = d / "10-drill-log"
    hook.write_text("#!/bin/sh\n" + body)
    os.chmod(hook, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


def _prepare(fleet, corpus, port: int):
    log = fleet.work / "drill.log"
    log.write_text("")
    seed = fleet.work / "kube-scheduler.yaml"
    seed.write_text(scheduler_manifest(corpus, port))
    for node in fleet.nodes:
        node.ctl("apply", str(seed), "--as", "kube-scheduler", check=True)
        for verb in ("park", "unpark"):
            _hook(node, f"post-{verb}", f'echo "$STATICPODD_VERB {node.name} $(date +%s.%N)" >> {log}\n')
    return log


def _events(log):
    return [line.split()[:2] for line in log.read_text().splitlines() if line.strip()]


def test_the_drill_parks_one_scheduler_at_a_time_and_leaves_every_node_running(fleet, corpus, probe_server):
    log = _prepare(fleet, corpus, probe_server.port)
    fleet.start_daemon(fleet.node("cp-1"))

    run = fleet.playbook(DRILL, {"drill_hold": 1, "drill_wait_timeout": "30s", "drill_reason": "drill test"})

    assert run.rc == 0, run.out
    # in inventory order, each park followed by its own unpark before the next node's park
    assert _events(log) == [["park", "cp-1"], ["unpark", "cp-1"], ["park", "cp-2"], ["unpark", "cp-2"],
                            ["park", "cp-3"], ["unpark", "cp-3"]]
    for node in fleet.nodes:
        park, unpark = run.one(PARK, node.name), run.one(UNPARK, node.name)
        assert park["status"] == "changed" and park["result"]["wait"]["state"] == "stopped", park
        assert park["result"]["park"]["until"] and park["result"]["park"]["reason"] == "drill test"
        assert unpark["status"] == "changed" and unpark["result"]["wait"]["state"] == "running", unpark
        assert node.live().exists() and not node.parked().exists()
        assert [v["action"] for v in node.history()] == ["apply", "park", "unpark"]
    assert run.one(REFUSE, "cp-1")["status"] == "ok"
    warned = {h: any("staticpodd is not running" in w for w in run.one(PARK, h)["result"].get("warnings", []))
              for h in ("cp-1", "cp-2")}
    assert warned == {"cp-1": False, "cp-2": True}  # the deadline is kept by the daemon only where it runs


def test_the_drill_refuses_to_start_when_the_scheduler_is_already_parked_on_another_node(
        fleet, corpus, probe_server):
    log = _prepare(fleet, corpus, probe_server.port)
    fleet.node("cp-2").ctl("park", "kube-scheduler", "--reason", "someone else's maintenance", check=True)
    log.write_text("")
    before = {n.name: n.directory() for n in fleet.nodes}

    run = fleet.playbook(DRILL, {"drill_hold": 0, "drill_wait_timeout": "30s"})

    assert run.rc != 0
    refused = run.one(REFUSE, "cp-1")
    assert refused["status"] == "failed"
    assert "kube-scheduler is already parked on cp-2" in refused["result"]["msg"], refused
    assert _events(log) == []  # nothing parked or unparked anywhere
    assert {n.name: n.directory() for n in fleet.nodes} == before
    assert not [t for t in run.out["tasks"] if t["task"] in (PARK, UNPARK)]


def test_the_drill_stops_when_another_node_is_parked_while_it_runs(fleet, corpus, probe_server):
    """Another operator parks cp-3's scheduler while the drill is on cp-1 (cp-1's post-unpark hook
    stands in for them): the drill re-reads the group before cp-2's park and stops there."""
    log = _prepare(fleet, corpus, probe_server.port)
    cp3 = fleet.node("cp-3")
    _hook(fleet.node("cp-1"), "post-unpark",
          f'echo "$STATICPODD_VERB cp-1 $(date +%s.%N)" >> {log}\n'
          f'{VENV_BIN / "staticpodctl"} park kube-scheduler --root {cp3.root} --reason other-operator >/dev/null\n')

    run = fleet.playbook(DRILL, {"drill_hold": 0, "drill_wait_timeout": "30s"})

    assert run.rc != 0
    assert _events(log) == [["park", "cp-1"], ["unpark", "cp-1"], ["park", "cp-3"]]  # cp-3's by the other operator
    stop = run.one(STOP, "cp-2")
    assert stop["status"] == "failed" and "parked on cp-3" in stop["result"]["msg"]
    assert fleet.node("cp-2").live().exists() and [v["action"] for v in fleet.node("cp-2").history()] == ["apply"]
    assert fleet.node("cp-1").live().exists()


def test_the_drill_does_not_start_when_a_node_of_the_group_cannot_be_read(fleet, corpus, probe_server):
    log = _prepare(fleet, corpus, probe_server.port)
    cp3 = fleet.node("cp-3")
    cp3.manifest_dir.rename(cp3.manifest_dir.with_name("manifests.away"))  # staticpodctl cannot look there

    run = fleet.playbook(DRILL, {"drill_hold": 0, "drill_wait_timeout": "30s"})

    assert run.rc != 0
    assert run.one("Read the node", "cp-3")["status"] == "failed"
    assert _events(log) == []
    assert not [t for t in run.out["tasks"] if t["task"] in (PARK, UNPARK)]
    assert fleet.node("cp-1").live().exists() and fleet.node("cp-2").live().exists()


def test_a_drill_that_dies_mid_park_is_undone_by_the_daemon_at_the_park_deadline(fleet, corpus, probe_server):
    """The drill's safety net: its park carries ``for: drill_deadline``, and staticpodd unparks at it."""
    _prepare(fleet, corpus, probe_server.port)
    node = fleet.node("cp-1")
    fleet.start_daemon(node)
    run = fleet.playbook("park.yml", {"target": "cp-1", "park_for": "2s", "reason": "drill"})
    assert run.one("park kube-scheduler", "cp-1")["status"] == "changed"
    assert not node.live().exists()
    deadline = time.monotonic() + 40
    while not node.live().exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert node.live().exists(), "staticpodd did not unpark at the deadline"
    assert node.history()[-1]["action"] == "unpark" and node.history()[-1]["actor"] == "staticpodd"


CLUSTER = "Refuse to start when anything is parked anywhere in the cluster"


def test_the_drill_refuses_to_start_when_the_cluster_view_shows_a_park_anywhere(fleet, corpus, probe_server, tmp_path):
    """A node outside the group (node-9, another team's) has etcd parked: with drill_cluster_kubeconfig the
    drill reads every Node's staticpodd.io annotations (status --cluster, against a stand-in API server
    here; the real one in tests/controlplane/test_cp_cluster_view.py) and parks nothing."""
    from fake_apiserver import FakeApiServer

    log = _prepare(fleet, corpus, probe_server.port)
    api = FakeApiServer(nodes=("cp-1", "node-9")).start()
    try:
        api.nodes["node-9"]["metadata"]["annotations"] = {
            "staticpodd.io/parked": "etcd",
            "staticpodd.io/parked-detail": '[{"component": "etcd", "by": "alice", "reason": "defrag", '
                                           '"since": "2026-12-04T06:00:00Z", "until": null, "broken": false}]'}
        kubeconfig = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
        run = fleet.playbook(DRILL, {"drill_hold": 0, "drill_cluster_kubeconfig": str(kubeconfig)})
        assert run.rc != 0
        refused = run.one(CLUSTER, "cp-1")
        assert refused["status"] == "failed"
        assert "parked in the cluster: etcd on node-9 (by alice: defrag)" in refused["result"]["msg"], refused
        assert _events(log) == [] and all(n.live().exists() for n in fleet.nodes)

        api.nodes["node-9"]["metadata"]["annotations"] = {}
        run = fleet.playbook(DRILL, {"drill_hold": 0, "drill_wait": False, "drill_cluster_kubeconfig": str(kubeconfig)})
        assert run.rc == 0, run.out
        assert run.one(CLUSTER, "cp-1")["status"] == "ok"
    finally:
        api.stop()

