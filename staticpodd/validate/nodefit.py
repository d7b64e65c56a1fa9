"""Layer 6: node fit -- predict the kubelet's admission failure for a static pod that does not fit.

At admission the kubelet runs the scheduler's resource-fit predicate against the node's
**allocatable** (capacity minus kubeReserved, systemReserved and the evictionHard
``memory.available`` threshold, default 100Mi: pkg/kubelet/cm/helpers.go hardEvictionReservation).
An API pod that does not fit ends Failed with reason ``OutOfcpu``/``OutOfmemory``. A static pod
is critical (pkg/kubelet/types/pod_update.go IsCriticalPod), so the kubelet takes the preemption
path instead (pkg/kubelet/preemption/preemption.go): it looks for non-critical pods to evict,
and when none can free enough the pod ends Failed with reason ``UnexpectedAdmissionError``,
"Unexpected error while attempting to recover from admission failure: preemption: error finding
a set of pods to preempt: no set of running pods found to reclaim resources: [(res: cpu, q:
30000), ]" (cpu in millicores, memory in bytes; q is what is missing). Seen on v1.34.2
(docs/kubelet-contract.md "What the kubelet refuses"; the seed lesson's ``toobig.yaml``). Other static pods
are critical too and never preempted, so the pods of the directory count as used.
The codes keep their names (``out-of-cpu``, ``out-of-memory``: part of the ``--json`` contract).
Requests: :func:`staticpodd.validate.podfacts.pod_requests` (component-helpers resource.PodRequests).
"""

from __future__ import annotations

import os
from functools import lru_cache

from staticpodd.validate.context import Context, Options, as_dict
from staticpodd.validate.findings import Finding, make
from staticpodd.validate.podfacts import PodFacts, pod_requests, request_field
from staticpodd.validate.quantity import cpu_millis, memory_bytes, parse_quantity


@lru_cache(maxsize=1)
def _proc_capacity() -> tuple[int | None, int | None]:
    cpu = mem = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            n = sum(1 for line in fh if line.startswith("processor"))
        cpu = (n or os.cpu_count() or 0) * 1000 or None
    except OSError:
        cpu = (os.cpu_count() or 0) * 1000 or None
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return cpu, mem


def node_allocatable(options: Options) -> tuple[int | None, int | None]:
    """(cpu millicores, memory bytes) the kubelet admits pods against: capacity minus
    ``cpu_reserved_millis`` / ``memory_reserved_bytes`` and the ``memory_eviction_hard`` threshold
    (pkg/kubelet/cm/node_container_manager_linux.go GetNodeAllocatableReservation). None when the
    capacity is unknown; never below 0."""
    cpu, mem = node_capacity(options)
    alloc_cpu = max(cpu - options.cpu_reserved_millis, 0) if cpu is not None else None
    alloc_mem = None
    if mem is not None:
        alloc_mem = max(mem - options.memory_reserved_bytes - eviction_bytes(options.memory_eviction_hard, mem), 0)
    return alloc_cpu, alloc_mem


def eviction_bytes(threshold: str | None, capacity: int) -> int:
    """Bytes of an evictionHard ``memory.available`` threshold: a quantity (``100Mi``) or a
    percentage of ``capacity`` (``5%``); 0 for None/empty. Raises ValueError when unreadable.
    Source: pkg/kubelet/eviction/api GetThresholdQuantity."""
    if not threshold:
        return 0
    t = str(threshold).strip()
    if t.endswith("%"):
        return int(capacity * float(t[:-1]) / 100)
    q = parse_quantity(t)
    if q is None or q < 0:
        raise ValueError(f"not a memory quantity or percentage: {threshold!r}")
    return memory_bytes(q)


def kubelet_reservations(config_text: bytes) -> dict[str, int | str]:
    """Options for :func:`node_allocatable` from a KubeletConfiguration (``/var/lib/kubelet/config.yaml``).

    Returns ``{"cpu_reserved_millis", "memory_reserved_bytes", "memory_eviction_hard"}``:
    kubeReserved plus systemReserved (cpu, memory), and evictionHard ``memory.available``
    ("100Mi" when evictionHard is not set, the kubelet's default; "" when it is set without that
    signal: the kubelet then has no memory threshold unless mergeDefaultEvictionSettings).
    Raises ValueError naming the field when a value is not a quantity or the file is not a mapping.
    """
    from staticpodd.manifest.decoded import DecodeProblem
    from staticpodd.manifest.decoding import decode

    try:
        doc = decode(config_text, max_bytes=1 << 20).doc
    except DecodeProblem as exc:
        raise ValueError(f"line {exc.line}: {exc.message}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a KubeletConfiguration mapping")
    cpu = mem = 0
    for section in ("kubeReserved", "systemReserved"):
        res = as_dict(doc.get(section))
        for name, conv in (("cpu", cpu_millis), ("memory", memory_bytes)):
            if res.get(name) is None:
                continue
            q = parse_quantity(res[name])
            if q is None or q < 0:
                raise ValueError(f"{section}.{name}: not a quantity: {res[name]!r}")
            if name == "cpu":
                cpu += conv(q)
            else:
                mem += conv(q)
    hard = doc.get("evictionHard")
    if hard is None:
        threshold = "100Mi"
    else:
        threshold = str(as_dict(hard).get("memory.available") or "")
        if doc.get("mergeDefaultEvictionSettings") is True and not threshold:
            threshold = "100Mi"
    if threshold:
        eviction_bytes(threshold, 1 << 40)  # raises ValueError when unreadable
    return {"cpu_reserved_millis": cpu, "memory_reserved_bytes": mem, "memory_eviction_hard": threshold}


def node_capacity(options: Options) -> tuple[int | None, int | None]:
    """(cpu millicores, memory bytes) of the node: from ``options`` or /proc/cpuinfo, /proc/meminfo."""
    cpu, mem = options.cpu_capacity_millis, options.memory_capacity_bytes
    if cpu is None or mem is None:
        pcpu, pmem = _proc_capacity()
        cpu = pcpu if cpu is None else cpu
        mem = pmem if mem is None else mem
    return cpu, mem


def _message(resource: str, requested: int, used: int, allocatable: int, options: Options) -> str:
    missing = requested + used - allocatable
    cap = node_capacity(options)[0 if resource == "cpu" else 1]
    reserved = (cap or 0) - allocatable
    return (
        "the kubelet reads the file, but the pod fails admission on this node: phase Failed, reason "
        "UnexpectedAdmissionError (\"Unexpected error while attempting to recover from admission failure: "
        "preemption: error finding a set of pods to preempt: no set of running pods found to reclaim resources: "
        f'[(res: {resource}, q: {missing}), ]"): a static pod is critical, so instead of '
        f"{'OutOfcpu' if resource == 'cpu' else 'OutOfmemory'} the kubelet tries to preempt other pods and cannot "
        f"free enough; it requests {_show(resource, requested)}, {_show(resource, used)} are used by the pods "
        f"before it, and the node gives pods {_show(resource, allocatable)} (allocatable: capacity "
        f"{_show(resource, cap or 0)} minus {_show(resource, reserved)} reserved"
        + (" and evictionHard memory.available" if resource == "memory" else "")
        + ")"
    )


def rule_node_fit(ctx: Context) -> None:
    """One pod's requests against the node's allocatable.

    Codes ``out-of-cpu``, ``out-of-memory`` (errors; ``kubelet="fails-admission"``): the pod ends
    Failed with ``UnexpectedAdmissionError`` (module docstring). Allocatable comes from
    :func:`node_allocatable` (defaults: no reservation, evictionHard memory.available 100Mi).
    """
    cpu_alloc, mem_alloc = node_allocatable(ctx.options)
    cpu, mem = pod_requests(ctx.spec)
    for resource, requested, alloc, code in (
        ("cpu", cpu, cpu_alloc, "out-of-cpu"),
        ("memory", mem, mem_alloc, "out-of-memory"),
    ):
        if alloc is not None and requested > alloc:
            ctx.add(
                code,
                "error",
                request_field(ctx.spec, resource),
                _message(resource, requested, 0, alloc, ctx.options),
                f"lower the {resource} requests: the node gives pods {_show(resource, alloc)} in total",
            )


def _show(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value}m CPU"
    if abs(value) < 2**30:
        return f"{value / 2**20:.0f}Mi memory"
    return f"{value / 2**30:.2f}Gi memory"


def directory_fit(pods: dict[tuple[str, str], list[PodFacts]], options: Options) -> list[Finding]:
    """All pods of a directory together: the kubelet admits them one by one (file order here).

    Codes ``out-of-cpu`` / ``out-of-memory`` (fails-admission) at the first file whose pod no longer
    fits the node's allocatable after the pods before it (static pods are critical: never
    preempted); pods that alone exceed the node are already reported per file. Only the file the
    kubelet runs for each namespace/name (the lexically last) counts, only the resources a pod
    requests are checked for it, and a pod that fails admission adds nothing to what the pods after
    it find used (pkg/scheduler/framework/plugins/noderesources/fit.go ``fitsRequest``: a resource is
    checked only when the pod requests some of it; the kubelet counts admitted pods only). ``pods``: (namespace, name)
    -> the :class:`~staticpodd.validate.podfacts.PodFacts` of each file defining it, in file order.
    """
    cpu_cap, mem_cap = node_allocatable(options)
    winners = sorted((files[-1] for files in pods.values()), key=lambda f: f.display)
    used = [0, 0]
    out: list[Finding] = []
    for facts in winners:
        req = facts.requests
        admitted = True
        for i, (resource, cap, code) in enumerate(
            (("cpu", cpu_cap, "out-of-cpu"), ("memory", mem_cap, "out-of-memory"))
        ):
            if cap is None or req[i] == 0:
                continue  # the admission check looks only at what the pod requests (fitsRequest)
            if req[i] > cap:
                admitted = False  # too big alone: reported on its own file (rule_node_fit)
                continue
            if used[i] + req[i] > cap:
                admitted = False
                out.append(
                    make(
                        code,
                        "error",
                        facts.display,
                        facts.located,
                        facts.request_fields[i],
                        _message(resource, req[i], used[i], cap, options)
                        + " once the pods of the files before it are running",
                        "lower requests across the directory",
                    )
                )
        if admitted:  # a pod that fails admission never runs: it takes nothing from the pods after it
            used = [used[0] + req[0], used[1] + req[1]]
    return out
