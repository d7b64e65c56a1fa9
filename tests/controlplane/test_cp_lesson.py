"""The lesson's other claims, against a real kubeadm v1.37.2 control plane, as the product predicts
them: what the kubelet admits and refuses, what a taint does to a pod placed by hand, what the
mirror pods are, and a kubeadm init on a node where staticpodd already runs."""

from __future__ import annotations

import json
import time

import yaml
from cplane_node import Node

BIG = {"cpu": "32"}


def _pod(name: str, node: str | None, *, requests: dict[str, str] | None = None, namespace: str = "default") -> dict:
    c: dict = {"name": "web", "image": "httpd:2.4-alpine", "imagePullPolicy": "IfNotPresent"}
    if requests:
        c["resources"] = {"requests": requests}
    spec: dict = {"containers": [c]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def test_kubeadm_init_on_a_node_where_staticpodd_runs_first_adopts_the_four_manifests(cp: Node) -> None:
    # the session's daemon was started before `kubeadm init`: preflight passed (the fixture's
    # init returned 0) and the daemon recorded kubeadm's four files as they appeared
    for comp in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        versions = cp.ctl_json("history", comp, "--all")["versions"]
        first = min(versions, key=lambda v: v["seq"])
        assert first["action"] == "external" and first["actor"] == "external", first
        assert first["location"] == "live"
    log = (cp.lab.work / "kubeadm.log").read_text()
    assert "[preflight]" in log and "Your Kubernetes control-plane has initialized successfully" in log


def test_a_32_cpu_pod_placed_by_hand_fails_OutOfcpu_and_validate_predicts_the_static_pods_refusal(cp: Node) -> None:
    cp.kubectl("apply", "-f", "-", input=json.dumps(_pod("toobig", cp.name, requests=BIG)))
    pod = cp.wait(lambda: (p := cp.pod("toobig")) and p["status"].get("phase") == "Failed" and p, 60,
                  "the kubelet to reject toobig")
    assert pod["status"]["reason"] == "OutOfcpu", pod["status"]
    assert "Node didn't have enough resource: cpu, requested: 32000" in pod["status"]["message"], pod["status"]

    # the same spec as a static pod: staticpodctl predicts the kubelet's words for a critical pod
    static = _pod("toobig", None, requests=BIG, namespace="kube-system")
    f = cp.lab.work / "toobig.yaml"
    f.write_text(yaml.safe_dump(static))
    res = cp.ctl_json("validate", str(f))
    found = [x for x in res["findings"] if x["code"] == "out-of-cpu"]
    assert found, res["findings"]
    predicted = found[0]["message"]
    assert "UnexpectedAdmissionError" in predicted and "(res: cpu, q:" in predicted, predicted

    # and the kubelet, given that file, says what was predicted (written by hand: apply refuses it).
    # A static pod refused at admission gets no mirror pod: its verdict is in the kubelet's log.
    offset = cp.lab.kubelet_log.stat().st_size
    tmp = cp.lab.path("/etc/kubernetes/manifests/.toobig.yaml.tmp")
    target = cp.lab.path("/etc/kubernetes/manifests/toobig.yaml")
    try:
        tmp.write_bytes(f.read_bytes())
        tmp.rename(target)  # whole, at once: the kubelet never reads half a file

        def denied() -> str | None:
            with cp.lab.kubelet_log.open("rb") as fh:
                fh.seek(offset)
                for line in fh.read().decode("utf-8", "replace").splitlines():
                    if '"Pod admission denied"' in line and f'pod="kube-system/toobig-{cp.name}"' in line:
                        return line
            return None

        line = cp.wait(denied, 90, "the kubelet's admission verdict on the static toobig")
        assert 'reason="UnexpectedAdmissionError"' in line, line
        assert "no set of running pods found to reclaim resources: [(res: cpu, q:" in line, line
        assert cp.pod(f"toobig-{cp.name}", "kube-system") is None  # no mirror pod for a refused static pod
    finally:
        target.unlink(missing_ok=True)


def test_a_tainted_node_runs_a_pod_placed_by_hand_without_a_toleration(cp: Node) -> None:
    cp.kubectl("taint", "nodes", cp.name, "drill=manual:NoSchedule")
    try:
        cp.kubectl("apply", "-f", "-", input=json.dumps(_pod("handplaced", cp.name)))
        cp.wait(lambda: cp.running("handplaced"), 60, "handplaced Running on the tainted node")
        # the scheduler would not have placed it: a scheduled pod stays Pending
        cp.kubectl("apply", "-f", "-", input=json.dumps(_pod("scheduled", None)))
        time.sleep(3)
        pod = cp.pod("scheduled")
        assert pod and pod["status"]["phase"] == "Pending", pod["status"]
        conds = {c["type"]: c for c in pod["status"].get("conditions") or []}
        assert "untolerated taint" in conds["PodScheduled"]["message"], conds
    finally:
        cp.kubectl("taint", "nodes", cp.name, "drill=manual:NoSchedule-", check=False)


def test_a_deleted_mirror_pod_comes_back_and_staticpodd_records_no_change(cp: Node) -> None:
    name = f"kube-apiserver-{cp.name}"
    assert name.endswith(f"-{cp.name}")  # the static pod's name carries the node name
    before = cp.pod(name, "kube-system")
    assert before is not None
    seqs = len(cp.ctl_json("history", "kube-apiserver", "--all")["versions"])
    cp.kubectl("delete", "pod", "-n", "kube-system", name, "--wait=false")
    after = cp.wait(lambda: (p := cp.pod(name, "kube-system")) and p["metadata"]["uid"] != before["metadata"]["uid"] and p,
                    150, "the mirror pod to come back (the kubelet recreates it at its next sync of the pod)")
    ann = after["metadata"]["annotations"]
    assert ann["kubernetes.io/config.mirror"] == before["metadata"]["annotations"]["kubernetes.io/config.mirror"]
    time.sleep(2)
    assert len(cp.ctl_json("history", "kube-apiserver", "--all")["versions"]) == seqs
    status = {c["component"]: c for c in cp.ctl_json("status")["components"]}
    assert status["kube-apiserver"]["state"] == "live" and not status["kube-apiserver"]["drift"], status["kube-apiserver"]
    names = [p["metadata"]["name"] for p in cp.kubectl_json("get", "pods", "-n", "kube-system")["items"]]
    assert sorted(names) == sorted(f"{c}-{cp.name}" for c in ("etcd", "kube-apiserver", "kube-controller-manager",
                                                              "kube-scheduler")), names
