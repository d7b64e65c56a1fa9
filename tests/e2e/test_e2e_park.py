"""The real-kubelet tier (1 and 6) against a real kubelet 1.34 + containerd: park --wait returns only
when the runtime shows the scheduler stopped, unpark --wait only when it runs and its probes
pass, and a park survives a kubelet restart."""

from __future__ import annotations

import time

from e2e_lib import Node, scheduler_bytes, wait_json


def _start_scheduler(node: Node) -> None:
    node.write("kube-scheduler.yaml", scheduler_bytes())
    node.wait_running("kube-scheduler", 60)
    node.ctl("status", check=True)  # adopts the file as version 1


def test_park_wait_returns_only_once_the_real_runtime_shows_the_scheduler_stopped(node: Node) -> None:
    _start_scheduler(node)
    t0 = time.monotonic()
    res = node.ctl("park", "kube-scheduler", "--wait=60s", "--json", "--reason", "e2e")
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stdout + res.stderr
    body = wait_json(res)
    assert body["wait"]["ok"] and body["wait"]["state"] == "stopped", body["wait"]
    # the runtime, asked independently right after the return: nothing of the pod runs
    assert not node.anything_running("kube-scheduler"), "park --wait returned while the scheduler still ran"
    assert (node.parked / "kube-scheduler.yaml").is_file()
    assert took < 30, f"park --wait took {took:.1f} s"


def test_unpark_wait_returns_only_once_the_scheduler_runs_and_its_probes_pass(node: Node) -> None:
    _start_scheduler(node)
    node.ctl("park", "kube-scheduler", "--wait=60s", check=True)
    t0 = time.time()
    res = node.ctl("unpark", "kube-scheduler", "--wait=90s", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    body = wait_json(res)
    assert body["wait"]["ok"] and body["wait"]["state"] == "running", body["wait"]
    st = node.state("kube-scheduler")
    assert st is not None, "unpark --wait returned but the runtime shows no running scheduler"
    created = max(int(c.get("createdAt") or 0) for c in node.lab.containers() if c["podSandboxId"] == st.sandbox_id)
    assert created / 1e9 >= t0 - 1, "the running container predates the unpark"
    probes = body["wait"]["details"].get("probes") or []
    startup = [p for p in probes if p["kind"] == "startupProbe"]
    assert startup and all(p["consecutive_successes"] >= 1 for p in startup), probes
    # the kubelet agrees: its own startup probe passes and the pod turns Ready soon after
    node.wait(lambda: node.kubelet_ready("kube-scheduler"), 30, "the kubelet's Ready condition")


def test_a_park_survives_a_kubelet_restart_and_unpark_works_afterwards(node: Node) -> None:
    _start_scheduler(node)
    node.ctl("park", "kube-scheduler", "--wait=60s", check=True)
    node.lab.stop_kubelet()
    node.lab.start_kubelet()
    # past the first housekeeping (2-2.5 s) and one full relist (20 s) of the new kubelet
    end = time.monotonic() + node.lab.relist_seconds + 5
    while time.monotonic() < end:
        assert not node.anything_running("kube-scheduler"), "the parked scheduler came back after a kubelet restart"
        time.sleep(0.5)
    res = node.ctl("unpark", "kube-scheduler", "--wait=90s", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert node.state("kube-scheduler") is not None
