"""The Ansible collection's rolling drill against a real kubelet 1.34 + containerd (the real-kubelet
tier and the collection): ``ansible-playbook staticpodd.node.rolling_drill`` from the built tarball parks the
scheduler with ``wait`` (the real runtime shows it stopped before the task returns), holds, and
unparks with ``wait`` (it runs again and its probes pass before the task returns). The
stand-in-runtime version of this drill, on three nodes, is tests/cm/test_collection_drill.py."""

from __future__ import annotations

import json
import threading
import time

import yaml
from collection_harness import (
    Fleet,
    ansible_bin,
    ansible_env,
    build_collection,
    install_collection,
)
from collection_harness import Node as CmNode
from e2e_lib import Node, scheduler_bytes

DRILL = "staticpodd.node.rolling_drill"
PARK = "Park the component (the daemon unparks it at the deadline if this run dies)"
UNPARK = "Unpark the component and wait until it runs and passes its probes"


def test_the_rolling_drill_parks_and_unparks_a_real_scheduler_with_wait(node: Node, tmp_path) -> None:
    node.write("kube-scheduler.yaml", scheduler_bytes())
    node.wait_running("kube-scheduler", 60)
    node.ctl("status", check=True)  # adopted as version 1

    bindir = ansible_bin()
    collections = install_collection(bindir, build_collection(bindir, tmp_path / "dist"), tmp_path / "collections")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"control_plane": {"hosts": {"cp-1": {
        "ansible_connection": "local",
        "ansible_python_interpreter": str(bindir / "python"),
        "staticpodd_root": str(node.root),
        "staticpodd_node_name": node.lab.node_name,
        "staticpodd_crictl": str(node.lab.crictl_path),
        "staticpodd_runtime_endpoint": node.lab.endpoint,
    }}}}}}))
    work = tmp_path / "work"
    work.mkdir()
    fleet = Fleet([CmNode("cp-1", node.root)], inventory, ansible_env(tmp_path / "home", collections, bindir),
                  bindir, work)

    # what the real runtime shows while the playbook runs, sampled independently of it
    seen: list[tuple[float, bool]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen.append((time.monotonic(), node.anything_running("kube-scheduler")))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        run = fleet.playbook(DRILL, {"drill_hold": 3, "drill_wait_timeout": "90s", "drill_reason": "e2e drill"})
    finally:
        done.set()
        sampler.join(5)

    assert run.rc == 0, run.out
    park, unpark = run.one(PARK, "cp-1"), run.one(UNPARK, "cp-1")
    assert park["status"] == "changed" and park["result"]["wait"]["state"] == "stopped", park
    assert unpark["status"] == "changed" and unpark["result"]["wait"]["state"] == "running", unpark
    # the scheduler really stopped during the drill, and runs at its end
    assert any(not running for _, running in seen), "the real runtime never showed the scheduler stopped"
    assert node.anything_running("kube-scheduler"), "the scheduler does not run after the drill"
    status = json.loads(node.ctl("status", "--json", check=True).stdout)
    row = next(c for c in status["components"] if c["component"] == "kube-scheduler")
    assert row["state"] == "live" and not row["parked"], row
