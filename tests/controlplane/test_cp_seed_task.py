"""The task this project exists for, verbatim, against a real kubeadm v1.37.2 control plane:
stop the scheduler, place a pod by hand with ``spec.nodeName``, start the scheduler again.

Both documents of the lesson do it with ``mv kube-scheduler.yaml ..``; here the first and last
steps are ``staticpodctl park/unpark kube-scheduler --wait`` and the middle one is the lesson's
own ``kubectl get -o yaml``, add ``nodeName``, ``kubectl replace --force``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml
from cplane_node import Node

REPO = Path(__file__).resolve().parents[2]


def _reasons(node: Node, pod: str) -> list[tuple[str, str]]:
    return [(e.get("reason"), (e.get("source") or {}).get("component") or e.get("reportingComponent") or "")
            for e in node.events(pod)]


def test_the_seed_task_verbatim_with_park_and_unpark(cp: Node) -> None:
    park = cp.ctl_json("park", "kube-scheduler", "--wait", "--reason", "manual scheduling drill")
    assert park["ok"] and park["wait"]["state"] == "stopped", park
    cp.wait(lambda: cp.pod(f"kube-scheduler-{cp.name}", "kube-system") is None, 30,
            "the scheduler's mirror pod to leave the API")

    cp.kubectl("run", "manual-schedule", "--image=httpd:2.4-alpine")
    # Pending with no node, no PodScheduled condition and no events, for as long as we watch
    end = time.monotonic() + 8
    while time.monotonic() < end:
        pod = cp.pod("manual-schedule")
        assert pod is not None
        assert pod["status"].get("phase") == "Pending" and not pod["spec"].get("nodeName"), pod["status"]
        time.sleep(1)
    assert not any(c.get("type") == "PodScheduled" and c.get("status") == "True"
                   for c in pod["status"].get("conditions") or []), pod["status"]
    assert not any(r == "Scheduled" for r, _ in _reasons(cp, "manual-schedule"))

    # the lesson's middle step: get -o yaml, add nodeName, replace --force
    doc = yaml.safe_load(cp.kubectl("get", "pod", "manual-schedule", "-o", "yaml").stdout)
    doc["spec"]["nodeName"] = cp.name
    cp.kubectl("replace", "--force", "-f", "-", input=yaml.safe_dump(doc))
    cp.wait(lambda: cp.running("manual-schedule"), 60, "manual-schedule Running")
    reasons = _reasons(cp, "manual-schedule")
    assert ("Started", "kubelet") in reasons, reasons
    assert "Scheduled" not in {r for r, _ in reasons}, reasons  # placed by hand: only the kubelet speaks

    unpark = cp.ctl_json("unpark", "kube-scheduler", "--wait")
    assert unpark["ok"] and unpark["wait"]["state"] == "running", unpark
    assert unpark["wait"]["details"]["ready_signal"] == "kubelet", unpark["wait"]  # the kubelet's own Ready

    cp.kubectl("run", "manual-schedule2", "--image=httpd:2.4-alpine")
    cp.wait(lambda: cp.running("manual-schedule2"), 60, "manual-schedule2 Running")
    assert ("Scheduled", "default-scheduler") in _reasons(cp, "manual-schedule2") or any(
        e.get("reason") == "Scheduled" and "default-scheduler" in str(e.get("reportingComponent") or e.get("source"))
        for e in cp.events("manual-schedule2")), cp.events("manual-schedule2")

    actions = [(v["action"], v.get("reason")) for v in cp.ctl_json("history", "kube-scheduler", "--all")["versions"]]
    assert ("park", "manual scheduling drill") in actions and ("unpark", None) in [(a, None) for a, _ in actions], actions


def test_unpark_wait_confirms_the_kubelets_ready_not_just_its_own_probes(cp: Node) -> None:
    # kubeadm's startupProbe has initialDelaySeconds: 10: the kubelet's prober may first tick
    # just after it and turn the pod Ready one period (10 s) later than a probe of our own
    for _ in range(2):
        cp.ctl("park", "kube-scheduler", "--wait", check=True)
        res = cp.ctl_json("unpark", "kube-scheduler", "--wait")
        assert res["ok"], res
        assert res["wait"]["details"]["ready_signal"] == "kubelet", res["wait"]
        assert "the kubelet reports it Ready" in res["wait"]["message"]
        # the cluster agrees the moment --wait returns
        pod = cp.pod(f"kube-scheduler-{cp.name}", "kube-system")
        assert pod is not None
        ready = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", pod["status"]


def test_a_deleted_mirror_pod_reads_gone_with_the_kubelets_own_credentials(cp: Node) -> None:
    res = cp.ctl_json("park", "kube-scheduler", "--wait", "--kubeconfig", "/etc/kubernetes/kubelet.conf")
    assert res["ok"], res
    # the kubelet deletes the mirror pod about a second after the file leaves; then the node
    # authorizer answers 403 (no relationship between the node and the pod), which is "gone"
    cp.wait(lambda: cp.pod(f"kube-scheduler-{cp.name}", "kube-system") is None, 30, "the mirror pod deleted")
    probe = cp.lab.run(
        sys.executable, "-c",
        "import json; from pathlib import Path; from staticpodd.proof.mirror import mirror_pod_hash; "
        f"print(json.dumps(mirror_pod_hash(Path('/etc/kubernetes/kubelet.conf'), 'kube-scheduler-{cp.name}', "
        "'kube-system')))",
        env={"PYTHONPATH": str(REPO)}, check=True)
    info = json.loads(probe.stdout)
    assert info == {"found": False, "config_hash": None, "mirror": False, "ready": None, "via": "node-authorizer"}, info
