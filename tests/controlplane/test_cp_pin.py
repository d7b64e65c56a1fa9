"""``staticpodctl pin`` against a real kubeadm v1.37.2 control plane: the seed task with pin as its
middle step, a pod too big for the node refused before anything is replaced (in the kubelet's
words), a taint walked around (a warning; ``--strict`` refuses), and a create refused after the
delete (a ValidatingAdmissionPolicy the test installs): the original pod comes back."""

from __future__ import annotations

import json

import pytest
from cplane_node import Node

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: pin-test-no-nodename
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["pods"]
  validations:
  - expression: "!has(object.spec.nodeName) || object.spec.nodeName == ''"
    message: "pin-test: pods may not be created with spec.nodeName"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: pin-test-no-nodename
spec:
  policyName: pin-test-no-nodename
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: default
"""

BIG = """\
apiVersion: v1
kind: Pod
metadata:
  name: big
  namespace: default
spec:
  containers:
  - name: big
    image: httpd:2.4-alpine
    resources:
      requests:
        cpu: "32"
"""


def _reasons(node: Node, pod: str) -> list[tuple[str, str]]:
    return [(e.get("reason"), (e.get("source") or {}).get("component") or e.get("reportingComponent") or "")
            for e in node.events(pod)]


def _pending(cp: Node, name: str) -> dict:
    pod = cp.wait(lambda: cp.pod(name), 30, f"{name} created")
    assert pod["status"].get("phase") == "Pending" and not pod["spec"].get("nodeName"), pod["status"]
    return pod


def _park(cp: Node) -> None:
    park = cp.ctl_json("park", "kube-scheduler", "--wait", "--reason", "manual scheduling drill")
    assert park["ok"] and park["wait"]["state"] == "stopped", park
    cp.wait(lambda: cp.pod(f"kube-scheduler-{cp.name}", "kube-system") is None, 30,
            "the scheduler's mirror pod to leave the API")


def test_the_seed_task_with_pin_as_its_middle_step(cp: Node) -> None:
    _park(cp)
    cp.kubectl("run", "manual-schedule", "--image=httpd:2.4-alpine")
    pod = _pending(cp, "manual-schedule")

    # what kubectl run wrote, and nothing the API server or its admission plugins added
    dry = cp.ctl_json("pin", "manual-schedule", "--node", cp.name, "--dry-run")
    assert dry["ok"] and dry["checks"] == [], dry
    assert dry["manifest"] == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {"run": "manual-schedule"}, "name": "manual-schedule", "namespace": "default"},
        "spec": {"containers": [{"image": "httpd:2.4-alpine", "name": "manual-schedule"}], "nodeName": cp.name}}
    assert cp.pod("manual-schedule")["metadata"]["uid"] == pod["metadata"]["uid"]  # --dry-run replaced nothing

    res = cp.ctl_json("pin", "manual-schedule", "--node", cp.name, "--wait")
    assert res["ok"], res
    assert res["wait"]["state"] == "running", res["wait"]
    assert [c for c in res["checks"] if c["level"] == "refuse"] == [], res["checks"]
    pod = cp.pod("manual-schedule")
    assert pod["spec"]["nodeName"] == cp.name and pod["status"]["phase"] == "Running"
    assert pod["metadata"]["uid"] == res["pinned"]["uid"]
    reasons = _reasons(cp, "manual-schedule")
    assert ("Started", "kubelet") in reasons, reasons
    assert "Scheduled" not in {r for r, _ in reasons}, reasons  # placed by hand: only the kubelet speaks

    # the node remembers: status lists it with the reminder, the journal has the entry
    st = cp.ctl("status")
    assert f"default/manual-schedule on node {cp.name}" in st.stdout, st.stdout
    assert "bare: no controller recreates them" in st.stdout
    assert [p["name"] for p in cp.ctl_json("status")["pinned"]] == ["manual-schedule"]

    unpark = cp.ctl_json("unpark", "kube-scheduler", "--wait")
    assert unpark["ok"] and unpark["wait"]["state"] == "running", unpark
    cp.kubectl("run", "manual-schedule2", "--image=httpd:2.4-alpine")
    cp.wait(lambda: cp.running("manual-schedule2"), 60, "manual-schedule2 Running")
    assert any(e.get("reason") == "Scheduled" and "default-scheduler" in json.dumps(e.get("source") or {})
               + str(e.get("reportingComponent")) for e in cp.events("manual-schedule2")), cp.events("manual-schedule2")


def test_a_32_cpu_pod_is_refused_before_anything_is_replaced_in_the_kubelets_words(cp: Node) -> None:
    cp.kubectl("apply", "-f", "-", input=BIG)
    before = _pending(cp, "big")
    p = cp.ctl("pin", "big", "--node", cp.name, "--json")
    assert p.returncode == 1, p.stdout + p.stderr
    res = json.loads(p.stdout)
    assert res["error"]["code"] == "pin-refused", res
    assert "OutOfcpu: Node didn't have enough resource: cpu, requested: 32000, used: " in res["error"]["message"]
    assert "nothing was replaced" in res["error"]["message"]
    after = cp.pod("big")
    assert after["metadata"]["uid"] == before["metadata"]["uid"] and not after["spec"].get("nodeName")


def test_a_taint_without_toleration_is_a_warning_naming_it_and_strict_refuses(cp: Node) -> None:
    cp.kubectl("taint", "nodes", cp.name, "pin-test=drill:NoSchedule")
    try:
        cp.kubectl("run", "tainted", "--image=httpd:2.4-alpine")
        before = _pending(cp, "tainted")  # the scheduler itself leaves it Pending: the taint
        p = cp.ctl("pin", "tainted", "--node", cp.name, "--strict", "--json")
        assert p.returncode == 1, p.stdout + p.stderr
        res = json.loads(p.stdout)
        assert res["error"]["code"] == "pin-refused" and "taint pin-test=drill:NoSchedule" in res["error"]["message"]
        assert cp.pod("tainted")["metadata"]["uid"] == before["metadata"]["uid"]

        p = cp.ctl("pin", "tainted", "--node", cp.name, "--wait")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "warning: scheduler rule taint pin-test=drill:NoSchedule" in p.stderr, p.stderr
        assert cp.running("tainted")
    finally:
        cp.kubectl("taint", "nodes", cp.name, "pin-test=drill:NoSchedule-", check=False)


def test_a_create_refused_after_the_delete_puts_the_original_back_and_says_so(cp: Node) -> None:
    cp.kubectl("apply", "-f", "-", input=POLICY)
    try:
        probe = ["run", "vap-probe", "--image=httpd:2.4-alpine", "--dry-run=server",
                 f"--overrides={json.dumps({'spec': {'nodeName': cp.name}})}"]
        cp.wait(lambda: cp.kubectl(*probe, check=False).returncode != 0, 30, "the admission policy in force")
        _park(cp)
        cp.kubectl("run", "manual-schedule", "--image=httpd:2.4-alpine", "--labels=drill=pin")
        before = _pending(cp, "manual-schedule")

        p = cp.ctl("pin", "manual-schedule", "--node", cp.name, "--json")
        assert p.returncode == 1, p.stdout + p.stderr
        err = json.loads(p.stdout)["error"]
        assert err["code"] == "replace-failed", err
        assert "the delete went through" in err["message"] and "pin-test: pods may not be created" in err["message"]
        assert "the original pod was created again" in err["message"] and err["details"]["original_back"] is True
        after = cp.pod("manual-schedule")
        assert after is not None and after["metadata"]["uid"] == err["details"]["original_uid"]
        assert after["metadata"]["uid"] != before["metadata"]["uid"]
        assert not after["spec"].get("nodeName") and after["metadata"]["labels"] == {"drill": "pin"}
        kept = json.loads(cp.lab.path(err["details"]["original_kept"]).read_text())
        assert kept["metadata"]["uid"] == before["metadata"]["uid"]  # the pod exactly as read
        assert cp.ctl_json("status")["pinned"] == []  # nothing was pinned
    finally:
        cp.kubectl("delete", "validatingadmissionpolicybinding,validatingadmissionpolicy", "pin-test-no-nodename",
                   check=False)


@pytest.fixture(autouse=True)
def _forget_pins(cp: Node):
    """Each test starts with no local pin records (they live under the node's state dir)."""
    import shutil

    shutil.rmtree(cp.lab.path("/var/lib/staticpodd/pins"), ignore_errors=True)
    yield
