"""The cluster view against a real kubeadm v1.37.2 control plane, published with the kubelet's own
credentials (``kubelet.conf``, the default): a park and an unpark are on the Node (annotation and
Event) within 2 s; the daemon's own deadline unpark, a broken park and a restore are Events with
their reasons; with kube-apiserver parked the verbs go on, their Events wait and are published in
order after the unpark; a refusal of the kubelet's credentials is a clear sentence and the local
verb stands. ``status --cluster`` and the documented ``kubectl`` one-liner show the park."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cplane_node import REPO, Node

PUBLISH = "cluster:\n  publish: true\n"
ANN = "staticpodd.io/parked"
DETAIL = "staticpodd.io/parked-detail"
#: docs/reference/cluster.md, "Every parked component in the cluster"
ONE_LINER = ("get", "nodes", "-o", r"custom-columns=NODE:.metadata.name,PARKED:.metadata.annotations.staticpodd\.io/parked")


def _configure(cp: Node, text: str | None) -> None:
    """Write (None: remove) the node's /etc/staticpodd/staticpodd.yaml and reload the daemon."""
    if text is None:
        cp.lab.run("rm", "-f", "/etc/staticpodd/staticpodd.yaml", check=True)
    else:
        cp.lab.run("sh", "-c", "mkdir -p /etc/staticpodd && cat > /etc/staticpodd/staticpodd.yaml", input=text,
                   check=True)
    r = cp.lab.run(sys.executable, "-m", "staticpodd.daemon", "--reload", "--root", "/", env={"PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def publishing(control_plane: Node) -> Iterator[Node]:
    _configure(control_plane, PUBLISH)
    yield control_plane
    _configure(control_plane, None)


def _annotations(cp: Node) -> dict[str, str]:
    return dict(cp.kubectl_json("get", "node", cp.name)["metadata"].get("annotations") or {})


def _ours(cp: Node) -> list[dict[str, Any]]:
    """staticpodd's Events on the Node, in the order they were queued (the name ends in the seq)."""
    items = cp.kubectl_json("get", "events", "-n", "default", "--field-selector",
                            f"involvedObject.kind=Node,involvedObject.name={cp.name}").get("items") or []
    mine = [e for e in items if (e.get("source") or {}).get("component") == "staticpodd"]
    return sorted(mine, key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1]))


def _reasons_since(cp: Node, before: int) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in _ours(cp)[before:]]


def test_a_park_and_an_unpark_are_on_the_node_within_two_seconds(cp: Node, publishing: None) -> None:
    before = len(_ours(cp))
    t0 = time.monotonic()
    park = cp.ctl_json("park", "kube-scheduler", "--reason", "manual scheduling drill")
    took = time.monotonic() - t0
    assert park["ok"] and park["cluster"]["state"] == "published", park
    ann = _annotations(cp)  # the verb said "published": the Node carries it now, no waiting
    assert ann.get(ANN) == "kube-scheduler", ann
    print(f"park, published on the Node: {took:.2f} s")
    assert took <= 2.0, f"the park took {took:.1f} s to be published"
    detail = json.loads(ann[DETAIL])
    assert detail[0]["component"] == "kube-scheduler" and detail[0]["reason"] == "manual scheduling drill"
    assert detail[0]["by"] and detail[0]["since"] and detail[0]["until"] is None and detail[0]["broken"] is False
    got = _reasons_since(cp, before)
    assert [r for r, _m in got] == ["ComponentParked"] and "manual scheduling drill" in got[0][1], got
    assert "ComponentParked" in cp.kubectl("describe", "node", cp.name).stdout
    cluster = cp.ctl_json("status", "--cluster", "--kubeconfig", "/etc/kubernetes/admin.conf")
    assert [(p["node"], p["component"]) for p in cluster["parked"]] == [(cp.name, "kube-scheduler")], cluster
    assert "kube-scheduler" in cp.kubectl(*ONE_LINER).stdout

    unpark = cp.ctl_json("unpark", "kube-scheduler")
    assert unpark["cluster"]["state"] == "published", unpark
    cp.wait(lambda: ANN not in _annotations(cp) and DETAIL not in _annotations(cp), 3, "the annotation to go")
    assert [r for r, _m in _reasons_since(cp, before)] == ["ComponentParked", "ComponentUnparked"]
    assert cp.ctl_json("status", "--cluster", "--kubeconfig", "/etc/kubernetes/admin.conf")["parked"] == []


def test_the_daemons_deadline_unpark_a_broken_park_and_a_restore_are_events(cp: Node, publishing: None) -> None:
    before = len(_ours(cp))
    cp.ctl("park", "kube-scheduler", "--for", "3s", check=True)
    cp.wait(lambda: "ParkExpired" in [r for r, _m in _reasons_since(cp, before)], 45, "ParkExpired")
    cp.wait(lambda: ANN not in _annotations(cp), 10, "the annotation to go after the deadline")

    before = len(_ours(cp))
    cp.ctl("park", "kube-scheduler", check=True)
    cp.lab.run("cp", "/etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml",
               "/etc/kubernetes/manifests/kube-scheduler.yaml", check=True)  # written back by hand
    cp.wait(lambda: "ParkBroken" in [r for r, _m in _reasons_since(cp, before)], 30, "ParkBroken")
    cp.wait(lambda: _annotations(cp).get(ANN) == "kube-scheduler(broken)", 10, "the annotation to say broken")
    cp.ctl("unpark", "kube-scheduler", "--discard", check=True)
    cp.wait(lambda: ANN not in _annotations(cp), 10, "the annotation to go after the discard")

    _configure(cp, PUBLISH + "on_invalid: restore\n")
    try:
        before = len(_ours(cp))
        cp.lab.run("sh", "-c", "printf 'apiVersion: v1\\nkind: Pod\\nmetadata: {name: kube-scheduler}\\n' "
                   "> /etc/kubernetes/manifests/kube-scheduler.yaml", check=True)  # no containers: invalid
        cp.wait(lambda: "RestoredLastGood" in [r for r, _m in _reasons_since(cp, before)], 30, "RestoredLastGood")
    finally:
        _configure(cp, PUBLISH)


def test_with_kube_apiserver_parked_the_verbs_go_on_and_their_events_follow_in_order(cp: Node, publishing: None) -> None:
    t0 = time.monotonic()
    cp.ctl_json("park", "kube-scheduler", "--reason", "timing")
    cp.ctl_json("unpark", "kube-scheduler", "--reason", "timing")
    normal = (time.monotonic() - t0) / 2
    before = len(_ours(cp))
    park = cp.ctl_json("park", "kube-apiserver", "--force", "--wait", "--reason", "api down")
    try:
        assert park["ok"] and park["wait"]["state"] == "stopped", park
        t0 = time.monotonic()
        down = cp.ctl_json("park", "kube-scheduler", "--reason", "while the API server is parked")
        slow = time.monotonic() - t0
        assert down["ok"] and down["cluster"]["state"] == "queued", down
        assert "connection refused" in (down["cluster"]["error"] or ""), down
        cp.ctl_json("unpark", "kube-scheduler", "--reason", "while the API server is parked")
        print(f"park with the API server up: {normal:.2f} s; parked: {slow:.2f} s")
        assert slow < normal + 1.5, f"a park took {slow:.2f} s with the API server parked, {normal:.2f} s without"
    finally:  # whatever failed above, the API server comes back (the next tests need it)
        up = cp.ctl_json("unpark", "kube-apiserver", "--wait", "--reason", "api back")
    assert up["ok"], up
    want = [("ComponentParked", "kube-apiserver"), ("ComponentParked", "kube-scheduler"),
            ("ComponentUnparked", "kube-scheduler"), ("ComponentUnparked", "kube-apiserver")]

    def published() -> list[tuple[str, str]] | None:
        try:
            got = [(r, m.split(":")[0]) for r, m in _reasons_since(cp, before)]
        except Exception:  # noqa: BLE001 - the API server is still coming back
            return None
        return got if len(got) >= 4 else None

    got = cp.wait(published, 60, "the queued Events after the unpark")
    assert got == want, got
    assert ANN not in _annotations(cp)


NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: not-this-node
"""


def test_a_refusal_of_the_kubelets_credentials_is_a_clear_sentence_and_the_verb_stands(cp: Node,
                                                                                    publishing: None) -> None:
    cp.kubectl("apply", "-f", "-", input=NODE)  # a Node the kubelet's identity may not modify
    _configure(cp, PUBLISH + "node_name: not-this-node\n")
    try:
        p = cp.ctl("park", "kube-scheduler", "--json")
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        park = json.loads(p.stdout)
        assert park["ok"] and park["cluster"]["state"] == "queued", park
        assert "not-this-node" in park["cluster"]["error"] and "forbidden" in park["cluster"]["error"].lower(), park
        text = cp.ctl("unpark", "kube-scheduler")
        assert text.returncode == 0 and "cluster: queued" in text.stdout and "Traceback" not in text.stderr
    finally:
        _configure(cp, PUBLISH)
        cp.kubectl("delete", "node", "not-this-node", check=False)


def test_the_shipped_rbac_lets_a_dedicated_identity_publish_and_read(cp: Node, publishing: None) -> None:
    import yaml

    rbac = (REPO / "packaging/kubernetes/staticpodd-rbac.yaml").read_text()
    cp.kubectl("apply", "-f", "-", input=rbac)
    token = cp.kubectl("create", "token", "staticpodd", "-n", "kube-system", "--duration", "1h").stdout.strip()
    admin = yaml.safe_load(cp.lab.run("cat", "/etc/kubernetes/admin.conf", check=True).stdout)
    kubeconfig = {"apiVersion": "v1", "kind": "Config",
                  "clusters": [{"name": "k", "cluster": admin["clusters"][0]["cluster"]}],
                  "users": [{"name": "staticpodd", "user": {"token": token}}],
                  "contexts": [{"name": "k", "context": {"cluster": "k", "user": "staticpodd"}}],
                  "current-context": "k"}
    cp.lab.run("sh", "-c", "umask 077; mkdir -p /etc/staticpodd && cat > /etc/staticpodd/publisher.conf",
               input=yaml.safe_dump(kubeconfig), check=True)
    _configure(cp, PUBLISH + "  kubeconfig: /etc/staticpodd/publisher.conf\n")
    try:
        before = len(_ours(cp))
        park = cp.ctl_json("park", "kube-scheduler", "--reason", "dedicated identity")
        assert park["cluster"]["state"] == "published", park
        assert cp.ctl_json("unpark", "kube-scheduler")["cluster"]["state"] == "published"
        assert [r for r, _m in _reasons_since(cp, before)] == ["ComponentParked", "ComponentUnparked"]
        # the publisher may not list Nodes: status --cluster says so, in one sentence
        denied = cp.ctl("status", "--cluster", "--kubeconfig", "/etc/staticpodd/publisher.conf")
        assert denied.returncode == 1 and "forbidden" in denied.stderr and "Traceback" not in denied.stderr
        cp.kubectl("create", "clusterrolebinding", "staticpodd-viewer-test", "--clusterrole=staticpodd:viewer",
                   "--serviceaccount=kube-system:staticpodd")
        seen = cp.ctl_json("status", "--cluster", "--kubeconfig", "/etc/staticpodd/publisher.conf")
        assert seen["ok"] and seen["nodes"] >= 1 and seen["parked"] == [], seen
    finally:
        _configure(cp, PUBLISH)
        cp.kubectl("delete", "clusterrolebinding", "staticpodd-viewer-test", check=False)
        cp.kubectl("delete", "-f", "-", input=rbac, check=False)
        cp.lab.run("rm", "-f", "/etc/staticpodd/publisher.conf")


def test_a_pod_pinned_by_hand_is_on_the_node_and_in_status_cluster(cp: Node, publishing: None) -> None:
    cp.ctl("park", "kube-scheduler", "--wait", "--reason", "pin drill", check=True)
    cp.wait(lambda: cp.pod(f"kube-scheduler-{cp.name}", "kube-system") is None, 30,
            "the scheduler's mirror pod to leave the API")
    cp.kubectl("run", "manual-schedule", "--image=httpd:2.4-alpine")
    cp.wait(lambda: cp.pod("manual-schedule"), 30, "manual-schedule created")
    before = len(_ours(cp))
    pin = cp.ctl_json("pin", "manual-schedule", "--node", cp.name)
    assert pin["ok"] and pin["cluster"]["state"] == "published", pin
    ann = cp.wait(lambda: _annotations(cp).get("staticpodd.io/pinned") == "default/manual-schedule" and
                  _annotations(cp), 10, "the pinned annotation")
    detail = json.loads(ann["staticpodd.io/pinned-detail"])
    assert detail[0]["bare"] is True and detail[0]["node"] == cp.name and detail[0]["uid"] == pin["pinned"]["uid"]
    assert [r for r, _m in _reasons_since(cp, before)] == ["PodPinned"]
    view = cp.ctl_json("status", "--cluster", "--kubeconfig", "/etc/kubernetes/admin.conf")
    assert [(p["namespace"], p["name"], p["bare"], p["present"]) for p in view["pinned"]] == [
        ("default", "manual-schedule", True, True)], view
    text = cp.ctl("status", "--cluster", "--kubeconfig", "/etc/kubernetes/admin.conf").stdout
    assert "kubectl drain refuses them without --force" in text and "default/manual-schedule" in text
    cp.kubectl("delete", "pod", "manual-schedule", "--grace-period=0", "--force")
    view = cp.ctl_json("status", "--cluster", "--kubeconfig", "/etc/kubernetes/admin.conf")
    assert [p["present"] for p in view["pinned"]] == [False], view
