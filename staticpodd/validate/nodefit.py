"""Layer 6: node fit -- predict the kubelet's OutOfcpu / OutOfmemory admission failures.

At admission the kubelet runs the scheduler's resource-fit predicate against the node: a pod
whose requests exceed what is left ends in phase Failed with reason ``OutOfcpu``/``OutOfmemory``
and message "Node didn't have enough resource: cpu, requested: 32000, used: 1200, capacity:
4000" (cpu in millicores, memory in bytes). Source: KUBELET.md "What the kubelet refuses"
(the seed lesson's ``toobig.yaml``); pkg/kubelet/lifecycle/predicate.go; component-helpers
resource.PodRequests (init containers and sidecars).
"""

from __future__ import annotations

import os
from functools import lru_cache

from staticpodd.validate.context import Context, Options, as_dict, as_list
from staticpodd.validate.findings import Finding, make
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


def node_capacity(options: Options) -> tuple[int | None, int | None]:
    """(cpu millicores, memory bytes) of the node: from ``options`` or /proc/cpuinfo, /proc/meminfo."""
    cpu, mem = options.cpu_capacity_millis, options.memory_capacity_bytes
    if cpu is None or mem is None:
        pcpu, pmem = _proc_capacity()
        cpu = pcpu if cpu is None else cpu
        mem = pmem if mem is None else mem
    return cpu, mem


def _container_requests(c: dict) -> tuple[int, int]:
    res = as_dict(c.get("resources"))
    req = as_dict(res.get("requests"))
    lim = as_dict(res.get("limits"))
    out = []
    for name, conv in (("cpu", cpu_millis), ("memory", memory_bytes)):
        raw = req.get(name, lim.get(name))  # requests default to limits (SetDefaults_Pod)
        q = parse_quantity(raw) if raw is not None else None
        out.append(conv(q) if q is not None and q > 0 else 0)
    return out[0], out[1]


def pod_requests(spec: dict) -> tuple[int, int]:
    """Effective (cpu millicores, memory bytes) the scheduler counts for a pod spec.

    max(sum of containers + sidecars, max over init containers of (init + sidecars started
    before it)), plus ``overhead``. Source: k8s.io/component-helpers/resource PodRequests.
    """
    total = [0, 0]
    for c in as_list(spec.get("containers")):
        r = _container_requests(as_dict(c))
        total = [total[0] + r[0], total[1] + r[1]]
    sidecars = [0, 0]
    init_max = [0, 0]
    for c in as_list(spec.get("initContainers")):
        c = as_dict(c)
        r = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = [sidecars[0] + r[0], sidecars[1] + r[1]]
            total = [total[0] + r[0], total[1] + r[1]]
            init_max = [max(init_max[0], sidecars[0]), max(init_max[1], sidecars[1])]
        else:
            init_max = [max(init_max[0], r[0] + sidecars[0]), max(init_max[1], r[1] + sidecars[1])]
    out = [max(total[0], init_max[0]), max(total[1], init_max[1])]
    overhead = as_dict(spec.get("overhead"))
    for i, (name, conv) in enumerate((("cpu", cpu_millis), ("memory", memory_bytes))):
        q = parse_quantity(overhead.get(name)) if name in overhead else None
        if q is not None and q > 0:
            out[i] += conv(q)
    return out[0], out[1]


def _message(resource: str, requested: int, used: int, capacity: int) -> str:
    reason = "OutOfcpu" if resource == "cpu" else "OutOfmemory"
    return (
        f"the kubelet will reject the pod at admission: phase Failed, reason {reason} (\"Node didn't have "
        f'enough resource: {resource}, requested: {requested}, used: {used}, capacity: {capacity}")'
    )


def rule_node_fit(ctx: Context) -> None:
    """One pod's requests against the node's whole capacity.

    Codes ``out-of-cpu``, ``out-of-memory`` (errors). Capacity is an upper bound for what the
    kubelet can allocate (allocatable = capacity - reserved), so this never cries wolf.
    """
    cpu_cap, mem_cap = node_capacity(ctx.options)
    cpu, mem = pod_requests(ctx.spec)
    for resource, requested, cap, code in (
        ("cpu", cpu, cpu_cap, "out-of-cpu"),
        ("memory", mem, mem_cap, "out-of-memory"),
    ):
        if cap is not None and requested > cap:
            ctx.add(
                code,
                "error",
                _request_field(ctx.spec, resource),
                _message(resource, requested, 0, cap),
                f"lower the {resource} requests (the node has {_show(resource, cap)} in total)",
            )


def _show(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value}m CPU"
    return f"{value / 2**30:.1f}Gi memory"


def _request_field(spec: dict, resource: str) -> str | None:
    for key in ("containers", "initContainers"):
        for i, c in enumerate(as_list(spec.get(key))):
            res = as_dict(as_dict(c).get("resources"))
            for kind in ("requests", "limits"):
                if resource in as_dict(res.get(kind)):
                    return f"spec.{key}[{i}].resources.{kind}.{resource}"
    return "spec"


def directory_fit(pods: dict, options: Options) -> list[Finding]:
    """All pods of a directory together: the kubelet admits them one by one (file order here).

    Codes ``out-of-cpu`` / ``out-of-memory`` at the first file whose pod no longer fits after the
    pods before it; pods that alone exceed the node are already reported per file. Only the
    file the kubelet runs for each namespace/name (the lexically last) counts.
    """
    cpu_cap, mem_cap = node_capacity(options)
    winners = sorted((files[-1] for files in pods.values()), key=lambda f: f[0])
    used = [0, 0]
    out: list[Finding] = []
    for display, doc, positions in winners:
        spec = as_dict(doc.get("spec"))
        req = pod_requests(spec)
        for i, (resource, cap, code) in enumerate(
            (("cpu", cpu_cap, "out-of-cpu"), ("memory", mem_cap, "out-of-memory"))
        ):
            if cap is None or req[i] > cap:
                continue
            if used[i] + req[i] > cap:
                out.append(
                    make(
                        code,
                        "error",
                        display,
                        positions,
                        _request_field(spec, resource),
                        _message(resource, req[i], used[i], cap) + " once the pods of the files before it are running",
                        "lower requests across the directory",
                    )
                )
        used = [used[0] + req[0], used[1] + req[1]]
    return out
