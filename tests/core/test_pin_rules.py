"""staticpodctl pin's pure parts on pods as the API server returns them (fixtures/pin/*.yaml,
``kubectl get -o yaml --show-managed-fields`` shape): what stripping removes and keeps, what the
kubelet refuses in its own words, which scheduler rules a pin walks around, and the node's record."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import yaml

from staticpodd.pin.checks import kubelet_refusals, scheduler_warnings
from staticpodd.pin.local import keep_original, list_local_pins, record_pin
from staticpodd.pin.strip import pinned, strip_pod

FIXTURES = Path(__file__).parent / "fixtures" / "pin"


def load(name: str) -> dict:
    return yaml.safe_load((FIXTURES / name).read_text())


def bound(name: str, cpu: str, memory: str, labels: dict | None = None, namespace: str = "kube-system",
          phase: str = "Running") -> dict:
    """A pod already on the node, as listed by spec.nodeName=cp."""
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"nodeName": "cp", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu,
                                                                                              "memory": memory}}}]},
            "status": {"phase": phase}}


#: kubeadm's control plane on the node: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
#: (their manifests' requests), two coredns replicas; a finished Job pod that no longer counts.
ON_NODE = [bound("etcd-cp", "100m", "100Mi"), bound("kube-apiserver-cp", "250m", "0"),
           bound("kube-controller-manager-cp", "200m", "0"), bound("kube-scheduler-cp", "100m", "0"),
           bound("coredns-a", "100m", "70Mi"), bound("coredns-b", "100m", "70Mi"),
           bound("job-done", "4", "1Gi", phase="Succeeded")]


def test_a_kubectl_run_pod_strips_down_to_what_kubectl_run_was_told() -> None:
    pod = load("kubectl-run-pending.yaml")
    before = copy.deepcopy(pod)
    out, removed = strip_pod(pod)
    assert out == {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"labels": {"run": "manual-schedule"}, "name": "manual-schedule", "namespace": "default"},
                   "spec": {"containers": [{"image": "httpd:2.4-alpine", "name": "manual-schedule"}]}}
    assert pod == before  # the pod as read is left as it was (it is what a failed replace recreates from)
    assert {"status", "metadata.uid", "metadata.managedFields", "spec.priority", "spec.volumes[kube-api-access-7xk2p]",
            "spec.tolerations[node.kubernetes.io/not-ready]", "spec.serviceAccount",
            "spec.containers[manual-schedule].volumeMounts[/var/run/secrets/kubernetes.io/serviceaccount]"} <= set(removed)
    assert pinned(out, "cp")["spec"]["nodeName"] == "cp" and "nodeName" not in out["spec"]


def test_what_kubectl_apply_recorded_is_kept_even_at_its_default_value() -> None:
    out, _ = strip_pod(load("kubectl-apply-pending.yaml"))
    spec = out["spec"]
    # written by the user (last-applied-configuration), although equal to the API server's defaults
    assert spec["restartPolicy"] == "Always" and spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert spec["tolerations"] == [{"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "shop"}]
    assert spec["priorityClassName"] == "shop-critical" and "priority" not in spec  # the admission plugin computes it
    assert spec["volumes"] == [{"configMap": {"name": "web-conf"}, "name": "conf"}]
    assert spec["containers"][0]["volumeMounts"] == [{"mountPath": "/etc/nginx/conf.d", "name": "conf"}]
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "250m", "memory": "64Mi"}}
    assert spec["containers"][0]["ports"] == [{"containerPort": 80, "hostPort": 8080}]  # protocol TCP: a default
    for default in ("dnsPolicy", "schedulerName", "securityContext", "terminationGracePeriodSeconds",
                    "enableServiceLinks", "serviceAccount", "serviceAccountName", "preemptionPolicy"):
        assert default not in spec, default
    assert "kubectl.kubernetes.io/last-applied-configuration" in out["metadata"]["annotations"]


def test_a_server_side_applied_field_is_kept_and_the_owner_is_left_for_the_caller() -> None:
    out, _ = strip_pod(load("ssa-owned-pending.yaml"))
    spec = out["spec"]
    assert spec["terminationGracePeriodSeconds"] == 30  # owned by an Apply entry: the user wrote it
    assert "dnsPolicy" not in spec and "imagePullPolicy" not in spec["containers"][0]  # :latest -> Always, a default
    assert out["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"  # pin refuses it unless --force-owned
    assert out["metadata"]["generateName"] == "api-6d9f7b5c8-"


def test_a_32_cpu_pod_is_refused_in_the_kubelets_words() -> None:
    pod = pinned(strip_pod(load("kubectl-run-pending.yaml"))[0], "cp")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "32"}}
    refusals = kubelet_refusals(pod, load("node-cp.yaml"), ON_NODE)
    assert refusals == [{"level": "refuse", "rule": "resources", "reason": "OutOfcpu",
                         "message": "Node didn't have enough resource: cpu, requested: 32000, used: 850, capacity: 2000"}]


def test_memory_counts_limits_when_requests_are_absent_and_finished_pods_do_not_count() -> None:
    pod = pinned(strip_pod(load("kubectl-run-pending.yaml"))[0], "cp")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": "3800Mi"}}
    [r] = kubelet_refusals(pod, load("node-cp.yaml"), ON_NODE)
    assert r["reason"] == "OutOfmemory"
    assert r["message"] == (f"Node didn't have enough resource: memory, requested: {3800 * 2**20}, "
                            f"used: {240 * 2**20}, capacity: {3901828 * 1024}")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": "3000Mi"}}
    assert kubelet_refusals(pod, load("node-cp.yaml"), ON_NODE) == []


def test_a_notschedule_taint_is_a_warning_naming_it_and_noexecute_is_the_kubelets_refusal() -> None:
    pod = pinned(strip_pod(load("kubectl-run-pending.yaml"))[0], "cp")
    node = load("node-cp.yaml")
    assert kubelet_refusals(pod, node, ON_NODE) == []
    [w] = scheduler_warnings(pod, node, ON_NODE)
    assert w["rule"] == "taint node-role.kubernetes.io/control-plane:NoSchedule"
    assert "no toleration" in w["message"] and "TaintToleration" in w["message"]
    pod["spec"]["tolerations"] = [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]
    assert scheduler_warnings(pod, node, ON_NODE) == []
    node["spec"]["taints"].append({"key": "maintenance", "value": "disk", "effect": "NoExecute"})
    [r] = kubelet_refusals(pod, node, ON_NODE)
    assert (r["reason"], r["rule"]) == ("TaintToleration", "taint maintenance=disk:NoExecute")
    assert r["message"].startswith("Predicate TaintToleration failed: ")


def test_a_node_selector_the_node_lacks_and_a_held_host_port_are_refused() -> None:
    pod = pinned(strip_pod(load("kubectl-apply-pending.yaml"))[0], "cp")
    node = load("node-cp.yaml")
    assert kubelet_refusals(pod, node, ON_NODE) == []
    pod["spec"]["nodeSelector"] = {"disktype": "ssd"}
    holder = bound("other-web", "10m", "0", namespace="shop")
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    got = [(r["reason"], r["rule"]) for r in kubelet_refusals(pod, node, [*ON_NODE, holder])]
    assert got == [("NodeAffinity", "spec.nodeSelector disktype=ssd"), ("NodePorts", "hostPort 8080/TCP")]
    pod["spec"].pop("nodeSelector")
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["cp"]}]}]}}}
    assert [r["reason"] for r in kubelet_refusals(pod, node, ON_NODE)] == []


def test_anti_affinity_and_topology_spread_are_named_warnings() -> None:
    pod = pinned(strip_pod(load("ssa-owned-pending.yaml"))[0], "cp")
    node = load("node-cp.yaml")
    node["spec"]["taints"] = []
    assert scheduler_warnings(pod, node, ON_NODE)[0]["rule"] == "spec.topologySpreadConstraints[0]"
    twin = bound("api-6d9f7b5c8-aaaaa", "0", "0", labels={"app": "api"}, namespace="default")
    rules = [w["rule"] for w in scheduler_warnings(pod, node, [*ON_NODE, twin])]
    assert rules == ["spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]",
                     "spec.topologySpreadConstraints[0]"]
    node["spec"]["unschedulable"] = True
    assert "node.kubernetes.io/unschedulable" in [w["rule"] for w in scheduler_warnings(pod, node, ON_NODE)]


def test_the_node_keeps_the_original_and_a_record_only_it_could_have_written(tmp_path: Path) -> None:
    state = tmp_path / "var" / "lib" / "staticpodd"
    pod = load("kubectl-run-pending.yaml")
    kept = keep_original(state, pod)
    assert json.loads(Path(kept).read_text()) == pod
    assert os.stat(kept).st_mode & 0o777 == 0o600 and os.stat(state / "pins").st_mode & 0o777 == 0o700
    record_pin(state, {"namespace": "default", "name": "manual-schedule", "node": "cp", "uid": "u1",
                       "pinned_at": "2026-12-04T03:41:30Z", "actor": "root", "bare": True, "warnings": []})
    [entry] = list_local_pins(state)
    assert (entry["namespace"], entry["name"], entry["node"], entry["bare"]) == ("default", "manual-schedule", "cp", True)
    os.chmod(entry["path"], 0o666)  # anyone could have written it now: not trusted
    assert list_local_pins(state) == []
    assert list_local_pins(tmp_path / "nowhere") == []


def test_status_lists_a_pinned_pod_with_the_bare_reminder(kubeadm, ctl) -> None:
    state = kubeadm.root / "var" / "lib" / "staticpodd"
    assert "pinned to a node by hand" not in ctl("status").out
    record_pin(state, {"namespace": "default", "name": "manual-schedule", "node": "cp", "uid": "u1",
                       "pinned_at": "2026-12-04T03:41:30Z", "actor": "root", "bare": True,
                       "warnings": ["taint node-role.kubernetes.io/control-plane:NoSchedule"]})
    res = ctl("status")
    assert res.rc == 0, res.err
    assert "default/manual-schedule on node cp since 2026-12-04T03:41:30Z by root" in res.out
    assert "bare: no controller recreates them" in res.out and "without --force" in res.out
    assert "walked around: taint node-role.kubernetes.io/control-plane:NoSchedule" in res.out
    assert ctl("status", "--json").json()["pinned"][0]["name"] == "manual-schedule"


def test_pin_without_the_cluster_answers_in_one_error_never_a_traceback(kubeadm, ctl) -> None:
    res = ctl("pin", "manual-schedule", "--node", "cp")
    assert res.rc == 1 and "Traceback" not in res.err
    assert "admin.conf: cannot use this kubeconfig" in res.err, res.err


def test_the_kubernetes_client_is_imported_only_when_pin_runs(kubeadm) -> None:
    import subprocess
    import sys

    record_pin(kubeadm.root / "var" / "lib" / "staticpodd", {"namespace": "default", "name": "p", "node": "cp",
                                                            "pinned_at": "2026-12-04T03:41:30Z"})
    code = ("import sys, io, contextlib\nfrom staticpodd.cli import main\n"
            "from staticpodd.commands.parser import build_parser\n"
            "build_parser('pin', only=True).parse_args(['pin', 'x', '--node', 'cp'])\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['status', '--root', {str(kubeadm.root)!r}])\n"
            "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3')"
            " or m == 'staticpodd.pin.cluster'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0 []"


class FakeCluster:
    """The API server as pin's handler sees it (staticpodd.pin.cluster.Cluster's methods), in memory:
    for the refusals that never reach a real control plane's corner cases."""

    refuse_create: list[str] = []

    def __init__(self, kubeconfig: str) -> None:
        self.pods = {("default", "manual-schedule"): load("kubectl-run-pending.yaml"),
                     ("default", "api-6d9f7b5c8-x4k2v"): load("ssa-owned-pending.yaml")}
        FakeCluster.last = self

    def pod(self, name, namespace):
        return copy.deepcopy(self.pods.get((namespace, name)))

    def node(self, name):
        return load("node-cp.yaml") if name == "cp" else None

    def pods_on(self, node):
        return ON_NODE

    def delete(self, name, namespace, uid, resource_version):
        from staticpodd.pin.cluster import ClusterError

        meta = self.pods[(namespace, name)]["metadata"]
        if (meta["uid"], meta["resourceVersion"]) != (uid, resource_version):
            raise ClusterError("delete pod: Precondition failed: ResourceVersion in precondition: "
                               f"{resource_version}, ResourceVersion in object meta: {meta['resourceVersion']}",
                               status=409)
        del self.pods[(namespace, name)]

    def wait_gone(self, name, namespace, uid, timeout):
        return (namespace, name) not in self.pods

    def create(self, pod):
        from staticpodd.pin.cluster import ClusterError

        if self.refuse_create:
            raise ClusterError(f"create pod: {self.refuse_create.pop(0)}", status=422)
        pod = copy.deepcopy(pod)
        pod["metadata"]["uid"] = "new-uid"
        self.pods[(pod["metadata"].get("namespace", "default"), pod["metadata"]["name"])] = pod
        return pod


def test_pin_refuses_a_bound_pod_and_an_owned_one_without_force_owned(kubeadm, ctl, monkeypatch) -> None:
    import staticpodd.pin.cluster

    monkeypatch.setattr(staticpodd.pin.cluster, "Cluster", FakeCluster)
    res = ctl("pin", "api-6d9f7b5c8-x4k2v", "--node", "cp")
    assert res.rc == 4 and "owned by ReplicaSet/api-6d9f7b5c8" in res.err and "--force-owned" in res.err
    res = ctl("pin", "api-6d9f7b5c8-x4k2v", "--node", "cp", "--force-owned", "--dry-run", "--json")
    assert res.rc == 0 and "ownerReferences" not in res.json()["manifest"]["metadata"]
    assert "metadata.ownerReferences" in res.json()["removed"]
    real_pod = FakeCluster.pod

    def bound_pod(self, name, namespace):
        pod = real_pod(self, name, namespace)
        pod["spec"]["nodeName"] = "worker-1"
        return pod

    monkeypatch.setattr(FakeCluster, "pod", bound_pod)
    res = ctl("pin", "manual-schedule", "--node", "cp")
    assert res.rc == 4 and "already bound to node worker-1: spec.nodeName cannot change" in res.err


def test_a_create_refused_twice_keeps_the_pod_as_read_and_says_where(kubeadm, ctl, monkeypatch) -> None:
    import staticpodd.pin.cluster

    monkeypatch.setattr(staticpodd.pin.cluster, "Cluster", FakeCluster)
    monkeypatch.setattr(FakeCluster, "refuse_create", ["denied by policy", "quota exceeded"])
    res = ctl("pin", "manual-schedule", "--node", "cp", "--json")
    assert res.rc == 1
    err = res.json()["error"]
    assert err["code"] == "replace-failed" and err["details"]["original_back"] is False
    assert "denied by policy" in err["message"] and "quota exceeded" in err["message"]
    kept = json.loads(Path(err["details"]["original_kept"]).read_text())
    assert kept == load("kubectl-run-pending.yaml")  # the pod exactly as read, to create again by hand
    assert list_local_pins(kubeadm.root / "var" / "lib" / "staticpodd") == []  # nothing was pinned


def test_a_pin_is_journalled_with_its_fields_and_recorded_on_the_node(kubeadm, ctl, monkeypatch) -> None:
    from spd_testlib import journal_entries

    import staticpodd.pin.cluster
    from staticpodd.journal import Event

    monkeypatch.setattr(staticpodd.pin.cluster, "Cluster", FakeCluster)
    res = ctl("pin", "manual-schedule", "--node", "cp")
    assert res.rc == 0, res.err
    assert "pinned to node cp" in res.out and "`kubectl drain` refuses it without --force" in res.out
    assert "warning: scheduler rule taint node-role.kubernetes.io/control-plane:NoSchedule" in res.err
    created = FakeCluster.last.pods[("default", "manual-schedule")]
    assert created["spec"]["nodeName"] == "cp" and "status" not in created
    [entry] = list_local_pins(kubeadm.root / "var" / "lib" / "staticpodd")
    assert (entry["uid"], entry["node"], entry["warnings"]) == (
        "new-uid", "cp", ["taint node-role.kubernetes.io/control-plane:NoSchedule"])
    entries = journal_entries(kubeadm.root, want=lambda es: any(e.get("STATICPODD_EVENT") == "PINNED" for e in es))
    [got] = [e for e in entries if e.get("STATICPODD_EVENT") == "PINNED"]
    assert got["MESSAGE_ID"] == Event.PINNED.message_id and got["PRIORITY"] == "4"  # a warning was walked around
    assert (got["POD"], got["POD_NAMESPACE"], got["NODE"], got["POD_UID"]) == ("manual-schedule", "default", "cp",
                                                                              "new-uid")
    assert got["WARNINGS"] == "taint node-role.kubernetes.io/control-plane:NoSchedule"
    assert got["ORIGINAL_KEPT"].startswith(str(kubeadm.root / "var" / "lib" / "staticpodd" / "pins" / "originals"))


def test_a_kubeconfig_another_user_could_have_written_is_not_used(kubeadm, ctl) -> None:
    conf = kubeadm.root / "etc" / "kubernetes" / "admin.conf"
    conf.write_text("apiVersion: v1\nkind: Config\n")
    conf.chmod(0o666)
    res = ctl("pin", "manual-schedule", "--node", "cp")
    assert res.rc == 1 and "another user could have written this kubeconfig; not used" in res.err, res.err


def test_a_kubeconfig_in_a_directory_another_user_could_write_is_not_used(kubeadm, ctl) -> None:
    """The kubeconfig itself is root's 0600, but its directory is group-writable: someone could swap
    in one whose exec credential plugin the client would run as root."""
    conf = kubeadm.root / "etc" / "kubernetes" / "admin.conf"
    conf.write_text("apiVersion: v1\nkind: Config\n")
    conf.chmod(0o600)
    conf.parent.chmod(0o775)
    res = ctl("pin", "manual-schedule", "--node", "cp")
    assert res.rc == 1 and "another user could have written this kubeconfig; not used" in res.err, res.err
    assert "group-writable" in res.err


def test_a_pod_that_changed_after_it_was_read_is_not_deleted(kubeadm, ctl, monkeypatch) -> None:
    import staticpodd.pin.cluster

    monkeypatch.setattr(staticpodd.pin.cluster, "Cluster", FakeCluster)
    real_pods_on = FakeCluster.pods_on

    def bound_meanwhile(self, node):  # a scheduler binds it between the read and the delete
        self.pods[("default", "manual-schedule")]["metadata"]["resourceVersion"] = "2872"
        self.pods[("default", "manual-schedule")]["spec"]["nodeName"] = "worker-1"
        return real_pods_on(self, node)

    monkeypatch.setattr(FakeCluster, "pods_on", bound_meanwhile)
    res = ctl("pin", "manual-schedule", "--node", "cp")
    assert res.rc == 4 and "changed after it was read" in res.err and "nothing was replaced" in res.err, res.err
    assert FakeCluster.last.pods[("default", "manual-schedule")]["spec"]["nodeName"] == "worker-1"
