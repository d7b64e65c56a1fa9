"""What the kubelet will refuse and what the scheduler would have said, for a pod pinned to a node
(no client import: every input is a plain mapping as the API server returns it).

A pod created with ``spec.nodeName`` skips the scheduler: the kubelet of that node admits it or
not with its own checks (pkg/kubelet/lifecycle/predicate.go ``generalFilter``), and a refused pod
ends ``Failed`` with the check's reason. :func:`kubelet_refusals` predicts them, in the kubelet's
words (``reason``, ``message``):

- resources (``OutOfcpu``, ``OutOfmemory``, ``OutOfpods``): ``Node didn't have enough resource:
  cpu, requested: 32000, used: 950, capacity: 2000`` -- the pod's requests (requests, else limits;
  init containers and sidecars: :func:`staticpodd.validate.podfacts.pod_requests`, the rule the
  static pod check uses) against the Node's ``status.allocatable`` minus the requests of the pods
  already bound to it and not finished; cpu in millicores, memory in bytes; a resource is checked
  only when the pod requests some of it (noderesources ``fitsRequest``). An API pod is not
  critical, so no preemption is tried (unlike a static pod: nodefit's docstring);
- ``NodeAffinity``: ``nodeSelector`` and required node affinity against the Node's labels;
- ``NodePorts``: a ``hostPort`` another pod on the node holds;
- ``TaintToleration``: a ``NoExecute`` taint the pod does not tolerate (the kubelet checks only
  NoExecute; the taint manager would evict the pod anyway).

:func:`scheduler_warnings` names each rule only the scheduler enforces, which the pin walks
around: a ``NoSchedule`` taint without a toleration, a cordoned node (``spec.unschedulable``),
required pod affinity and anti-affinity, ``topologySpreadConstraints`` with
``whenUnsatisfiable: DoNotSchedule``. They are warnings: the kubelet runs the pod regardless.
"""

from __future__ import annotations

from ..validate.podfacts import pod_requests
from ..validate.quantity import cpu_millis, memory_bytes, parse_quantity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: The words of pkg/scheduler/framework/plugins (ErrReason...), as the kubelet prints them in
#: ``Predicate NAME failed: REASON``.
NODE_AFFINITY_REASON = "node(s) didn't match Pod's node affinity/selector"
NODE_PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
TAINT_REASON = "node(s) had untolerated taint(s)"


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def finished(pod: dict[str, Any]) -> bool:
    """Whether the pod's phase is Succeeded or Failed (the kubelet no longer counts it)."""
    return _d(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def allocatable(node: dict[str, Any]) -> dict[str, int | None]:
    """The Node's ``status.allocatable`` as ``{"cpu": millicores, "memory": bytes, "pods": n}``
    (None where the Node does not say or the quantity does not parse)."""
    alloc = _d(_d(node.get("status")).get("allocatable"))
    out: dict[str, int | None] = {}
    for name, conv in (("cpu", cpu_millis), ("memory", memory_bytes), ("pods", memory_bytes)):
        q = parse_quantity(alloc.get(name)) if alloc.get(name) is not None else None
        out[name] = conv(q) if q is not None else None
    return out


def _refusal(reason: str, message: str, rule: str) -> dict[str, str]:
    return {"level": "refuse", "rule": rule, "reason": reason, "message": message}


def _warning(rule: str, message: str) -> dict[str, str]:
    return {"level": "warn", "rule": rule, "message": message}


def tolerates(tolerations: list[Any], taint: dict[str, Any]) -> bool:
    """Whether any toleration matches ``taint`` (k8s.io/api/core/v1 Toleration.ToleratesTaint):
    an empty effect matches every effect, an empty key with Exists matches every key, Exists
    ignores the value, Equal (the default) compares it."""
    for t in tolerations:
        t = _d(t)
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if t.get("key"):
            if t.get("key") != taint.get("key"):
                continue
        elif op != "Exists":
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _taint_text(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def _expr_matches(expr: dict[str, Any], value: str | None) -> bool:
    op, values = expr.get("operator"), [str(v) for v in _l(expr.get("values"))]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_matches(pod: dict[str, Any], node: dict[str, Any]) -> tuple[bool, str | None]:
    """Whether the pod's ``nodeSelector`` and required node affinity admit the node, and the rule
    that does not (``spec.nodeSelector.KEY`` or ``...requiredDuringSchedulingIgnoredDuringExecution``)."""
    spec = _d(pod.get("spec"))
    labels = {str(k): str(v) for k, v in _d(_d(node.get("metadata")).get("labels")).items()}
    name = str(_d(node.get("metadata")).get("name") or "")
    for key, value in _d(spec.get("nodeSelector")).items():
        if labels.get(str(key)) != str(value):
            return False, f"spec.nodeSelector {key}={value}"
    node_affinity = _d(_d(spec.get("affinity")).get("nodeAffinity"))
    required = _d(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        for term in _l(required.get("nodeSelectorTerms")):
            term = _d(term)
            exprs, fields = _l(term.get("matchExpressions")), _l(term.get("matchFields"))
            if not exprs and not fields:
                continue  # an empty term matches no node
            if all(_expr_matches(_d(e), labels.get(str(_d(e).get("key")))) for e in exprs) and all(
                    _expr_matches(_d(f), name if _d(f).get("key") == "metadata.name" else None) for f in fields):
                return True, None
        return False, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    return True, None


def _host_ports(pod: dict[str, Any]) -> list[tuple[str, str, int]]:
    out = []
    spec = _d(pod.get("spec"))
    for kind in ("initContainers", "containers"):
        for c in _l(spec.get(kind)):
            for p in _l(_d(c).get("ports")):
                p = _d(p)
                if isinstance(p.get("hostPort"), int) and p["hostPort"] > 0:
                    out.append((str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), p["hostPort"]))
    return out


def kubelet_refusals(pod: dict[str, Any], node: dict[str, Any], others: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What the node's kubelet refuses at admission, first the way it orders them (module docstring).

    ``pod``: the pod to pin; ``node``: the Node; ``others``: the pods bound to that node (finished
    ones are skipped here). Returns ``[{"level": "refuse", "rule", "reason", "message"}]``, where
    ``reason``/``message`` are the kubelet's own (the pod's status would read them).
    """
    out: list[dict[str, str]] = []
    active = [p for p in others if not finished(p)]
    alloc = allocatable(node)
    cpu, mem = pod_requests(_d(pod.get("spec")))
    pods_cap = alloc["pods"]
    if pods_cap is not None and len(active) + 1 > pods_cap:
        out.append(_refusal("OutOfpods", f"Node didn't have enough resource: pods, requested: 1, used: {len(active)}, "
                            f"capacity: {pods_cap}", "resources"))
    used_cpu = sum(pod_requests(_d(p.get("spec")))[0] for p in active)
    used_mem = sum(pod_requests(_d(p.get("spec")))[1] for p in active)
    for resource, requested, used in (("cpu", cpu, used_cpu), ("memory", mem, used_mem)):
        cap = alloc[resource]
        if cap is not None and requested > 0 and requested > cap - used:
            out.append(_refusal(f"OutOf{resource}", f"Node didn't have enough resource: {resource}, requested: "
                                f"{requested}, used: {used}, capacity: {cap}", "resources"))
    ok, rule = node_matches(pod, node)
    if not ok:
        out.append(_refusal("NodeAffinity", f"Predicate NodeAffinity failed: {NODE_AFFINITY_REASON}", rule or ""))
    held = {hp for p in active for hp in _host_ports(p)}
    for ip, proto, port in _host_ports(pod):
        if any(h[1] == proto and h[2] == port and (ip == "0.0.0.0" or h[0] in ("0.0.0.0", ip)) for h in held):
            out.append(_refusal("NodePorts", f"Predicate NodePorts failed: {NODE_PORTS_REASON}",
                                f"hostPort {port}/{proto}"))
            break
    tolerations = _l(_d(pod.get("spec")).get("tolerations"))
    for taint in _l(_d(node.get("spec")).get("taints")):
        taint = _d(taint)
        if taint.get("effect") == "NoExecute" and not tolerates(tolerations, taint):
            out.append(_refusal("TaintToleration", f"Predicate TaintToleration failed: {TAINT_REASON}",
                                f"taint {_taint_text(taint)}"))
            break
    return out


def _selector_matches(selector: Any, labels: dict[str, Any]) -> bool:
    sel = _d(selector)
    if not sel:
        return False  # a null selector matches no pod (pod affinity terms)
    for k, v in _d(sel.get("matchLabels")).items():
        if str(labels.get(k)) != str(v) or k not in labels:
            return False
    for e in _l(sel.get("matchExpressions")):
        e = _d(e)
        value = labels.get(str(e.get("key")))
        if not _expr_matches(e, None if value is None else str(value)):
            return False
    return True


def scheduler_warnings(pod: dict[str, Any], node: dict[str, Any], others: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each scheduler rule the pin walks around, naming it (module docstring).

    Returns ``[{"level": "warn", "rule", "message"}]``; empty when the scheduler would have been
    content with this node as far as the node and the pods on it tell. Pod (anti-)affinity with a
    topologyKey other than ``kubernetes.io/hostname`` and topology spread constraints are named
    without being evaluated (that needs every node of the domain).
    """
    out: list[dict[str, str]] = []
    spec = _d(pod.get("spec"))
    name = _d(node.get("metadata")).get("name")
    tolerations = _l(spec.get("tolerations"))
    for taint in _l(_d(node.get("spec")).get("taints")):
        taint = _d(taint)
        if taint.get("effect") == "NoSchedule" and not tolerates(tolerations, taint):
            out.append(_warning(f"taint {_taint_text(taint)}",
                                f"node {name} has the taint {_taint_text(taint)} and the pod has no toleration for it: "
                                "the scheduler would not place it there (TaintToleration); the kubelet does not check "
                                "NoSchedule taints, so it runs"))
    if _d(node.get("spec")).get("unschedulable"):
        out.append(_warning("node.kubernetes.io/unschedulable",
                            f"node {name} is cordoned (spec.unschedulable): the scheduler places nothing new there "
                            "(NodeUnschedulable)"))
    affinity = _d(spec.get("affinity"))
    namespace = _d(pod.get("metadata")).get("namespace") or "default"
    active = [p for p in others if not finished(p)]
    for kind, anti in (("podAffinity", False), ("podAntiAffinity", True)):
        for i, term in enumerate(_l(_d(affinity.get(kind)).get("requiredDuringSchedulingIgnoredDuringExecution"))):
            term = _d(term)
            rule = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"
            topo = term.get("topologyKey")
            if topo != "kubernetes.io/hostname":
                out.append(_warning(rule, f"{rule} (topologyKey {topo}) is not checked here: the scheduler would "
                                    f"have checked it across every node of the domain; pinning skips it"))
                continue
            namespaces = _l(term.get("namespaces")) or [namespace]
            hit = [p for p in active if (_d(p.get("metadata")).get("namespace") or "default") in namespaces
                   and _selector_matches(term.get("labelSelector"), _d(_d(p.get("metadata")).get("labels")))]
            if anti and hit:
                out.append(_warning(rule, f"{rule}: pod {_d(hit[0].get('metadata')).get('name')} on node {name} "
                                    "matches the anti-affinity selector: the scheduler would not place it there "
                                    "(InterPodAffinity)"))
            elif not anti and not hit:
                out.append(_warning(rule, f"{rule}: no pod on node {name} matches the affinity selector: the "
                                    "scheduler would not place it there (InterPodAffinity)"))
    for i, c in enumerate(_l(spec.get("topologySpreadConstraints"))):
        c = _d(c)
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            rule = f"spec.topologySpreadConstraints[{i}]"
            out.append(_warning(rule, f"{rule} (topologyKey {c.get('topologyKey')}, maxSkew {c.get('maxSkew')}) is "
                                "not checked: the scheduler would have spread the pod (PodTopologySpread); pinning "
                                "skips it"))
    return out
