"""Layer 4, containers: what the kubelet refuses in ``spec.containers`` and ``spec.initContainers``.

Names, images, enums, ports (and host ports), volume mounts, env, resources and probes, as
pkg/apis/core/validation/validation.go checks them in ``ValidatePodCreate`` (docs/kubelet-contract.md "What the
kubelet refuses"). Every error here means: the file is refused, and a pod it was running is
removed at the next 20 s relist. Pod-level rules are in :mod:`.podrules`, which re-exports
:func:`rule_containers`.
"""

from __future__ import annotations

import re

from staticpodd.validate.context import Context, as_dict, as_list
from staticpodd.validate.identity import dns1123_label_errors
from staticpodd.validate.quantity import parse_quantity
from staticpodd.validate.ruletools import REFUSED, _int, _suggest

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_CONTAINER_ENUMS = {
    "imagePullPolicy": ("Always", "IfNotPresent", "Never"),
    "terminationMessagePolicy": ("File", "FallbackToLogsOnError"),
}


def rule_containers(ctx: Context) -> None:
    """Containers: names (DNS label, unique), image, enums, ports, mounts, env, resources, probes.

    Codes ``container-invalid``, ``port-invalid``, ``volume-mount-invalid``, ``env-invalid``,
    ``resources-invalid``, ``probe-invalid``. Source: validation.go validateContainers /
    validateInitContainers / validateContainerCommon / validateContainerPorts / ValidateVolumeMounts /
    ValidateEnv / ValidateResourceRequirements / validateProbe / validateLivenessProbe.

    Long because: it is one pass over every container in the order validation.go checks a
    container (name, image, enums, ports, mounts, env, resources, probes), sharing the names and
    host ports seen so far; kept whole it can be read beside the upstream source line by line.
    """
    spec = ctx.spec
    host_network = spec.get("hostNetwork") is True
    volume_names = {n for v in as_list(spec.get("volumes")) if isinstance(n := as_dict(v).get("name"), str)}
    seen_names: dict[str, str] = {}
    host_ports: dict[tuple[Any, Any, Any], str] = {}
    for base, c in ctx.containers():
        is_init = base.startswith("spec.initContainers")
        name = c.get("name")
        if isinstance(name, str) and name:
            why = dns1123_label_errors(name)
            if why:
                ctx.add(
                    "container-invalid",
                    "error",
                    f"{base}.name",
                    f"{base}.name: Invalid value {name!r}: {why}; {REFUSED}",
                    "use e.g. kube-apiserver",
                )
            elif name in seen_names:
                ctx.add(
                    "container-invalid",
                    "error",
                    f"{base}.name",
                    f"{base}.name: Duplicate value {name!r} (also {seen_names[name]}); {REFUSED}",
                    "give every container and init container its own name",
                )
            else:
                seen_names[name] = base
        elif name == "":
            ctx.add("container-invalid", "error", f"{base}.name", f"{base}.name: Required value; {REFUSED}", None)
        image = c.get("image")
        if image is None or (isinstance(image, str) and not image.strip()):
            ctx.add(
                "container-invalid",
                "error",
                f"{base}.image" if "image" in c else base,
                f"{base}.image: Required value; {REFUSED}",
                "set the image (with a pinned tag or digest)",
            )
        elif isinstance(image, str) and image != image.strip():
            ctx.add(
                "container-invalid",
                "error",
                f"{base}.image",
                f"{base}.image: Invalid value: must not have leading or trailing whitespace; {REFUSED}",
                None,
            )
        for key, allowed in _CONTAINER_ENUMS.items():
            v = c.get(key)
            if isinstance(v, str) and v and v not in allowed:
                ctx.add(
                    "container-invalid",
                    "error",
                    f"{base}.{key}",
                    f"{base}.{key}: Unsupported value: {v!r}; {REFUSED}",
                    _suggest(v, allowed),
                )
        rp = c.get("restartPolicy")
        if isinstance(rp, str) and rp:
            if not is_init:
                ctx.add(
                    "container-invalid",
                    "error",
                    f"{base}.restartPolicy",
                    f"{base}.restartPolicy: Forbidden: may not be set for non-init containers (without the "
                    f"alpha gate ContainerRestartRules); {REFUSED}",
                    "only init containers (sidecars) take restartPolicy: Always",
                )
            elif rp != "Always":
                ctx.add(
                    "container-invalid",
                    "error",
                    f"{base}.restartPolicy",
                    f'{base}.restartPolicy: Unsupported value {rp!r}: supported values: "Always"; {REFUSED}',
                    None,
                )
        _ports(ctx, base, c, host_network, host_ports)
        _mounts(ctx, base, c, volume_names)
        _env(ctx, base, c)
        _resources(ctx, base, c)
        sidecar = is_init and rp == "Always"
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if c.get(probe) is None:
                continue
            if is_init and not sidecar:
                ctx.add(
                    "probe-invalid",
                    "error",
                    f"{base}.{probe}",
                    f"{base}.{probe}: Forbidden: may not be set for init containers without restartPolicy "
                    f"Always; {REFUSED}",
                    "remove the probe",
                )
                continue
            _probe(ctx, f"{base}.{probe}", as_dict(c.get(probe)), probe)


def _ports(ctx: Context, base: str, c: dict, host_network: bool, host_ports: dict) -> None:
    names: set[str] = set()
    for j, p in enumerate(as_list(c.get("ports"))):
        p = as_dict(p)
        pp = f"{base}.ports[{j}]"
        cp = p.get("containerPort")
        if _int(cp) and not 1 <= cp <= 65535:
            ctx.add(
                "port-invalid",
                "error",
                f"{pp}.containerPort",
                f"{pp}.containerPort: Invalid value: {cp}: must be between 1 and 65535, inclusive; {REFUSED}",
                None,
            )
        hp = p.get("hostPort")
        if _int(hp) and not 0 <= hp <= 65535:
            ctx.add(
                "port-invalid",
                "error",
                f"{pp}.hostPort",
                f"{pp}.hostPort: Invalid value: {hp}: must be between 0 and 65535, inclusive; {REFUSED}",
                None,
            )
        elif _int(hp) and hp and host_network and _int(cp) and hp != cp:
            ctx.add(
                "port-invalid",
                "error",
                f"{pp}.hostPort",
                f"{pp}.hostPort: Invalid value: {hp}: must match containerPort when hostNetwork is true; {REFUSED}",
                f"set hostPort: {cp} or drop it",
            )
        proto = p.get("protocol")
        if isinstance(proto, str) and proto and proto not in ("TCP", "UDP", "SCTP"):
            ctx.add(
                "port-invalid",
                "error",
                f"{pp}.protocol",
                f"{pp}.protocol: Unsupported value: {proto!r}; {REFUSED}",
                _suggest(proto, ("TCP", "UDP", "SCTP")),
            )
        name = p.get("name")
        if isinstance(name, str) and name:
            if not _IANA_SVC_NAME.match(name) or "--" in name or not re.search("[a-z]", name):
                ctx.add(
                    "port-invalid",
                    "error",
                    f"{pp}.name",
                    f"{pp}.name: Invalid value {name!r}: must be an IANA service name (at most 15 lower-case "
                    f"letters, digits and '-', with a letter, no '--'); {REFUSED}",
                    None,
                )
            elif name in names:
                ctx.add("port-invalid", "error", f"{pp}.name", f"{pp}.name: Duplicate value {name!r}; {REFUSED}", None)
            names.add(name)
        eff = hp if _int(hp) and hp else (cp if host_network and _int(cp) else None)
        if eff:
            key = (proto or "TCP", eff, p.get("hostIP") or "")
            if key in host_ports:
                ctx.add(
                    "port-invalid",
                    "error",
                    pp,
                    f'{pp}.hostPort: Duplicate value "{eff}/{key[0]}" (also {host_ports[key]}); {REFUSED}',
                    "each host port can be claimed once per pod",
                )
            else:
                host_ports[key] = pp


def _mounts(ctx: Context, base: str, c: dict, volume_names: set) -> None:
    paths: set[str] = set()
    for j, m in enumerate(as_list(c.get("volumeMounts"))):
        m = as_dict(m)
        mp = f"{base}.volumeMounts[{j}]"
        name = m.get("name")
        if name == "":
            ctx.add("volume-mount-invalid", "error", mp, f"{mp}.name: Required value; {REFUSED}", None)
        elif isinstance(name, str) and name not in volume_names:
            ctx.add(
                "volume-mount-invalid",
                "error",
                f"{mp}.name",
                f"{mp}.name: Not found: {name!r} is not a volume of this pod; {REFUSED}",
                "add it under spec.volumes or fix the name",
            )
        path = m.get("mountPath")
        if path == "":
            ctx.add("volume-mount-invalid", "error", mp, f"{mp}.mountPath: Required value; {REFUSED}", None)
        elif isinstance(path, str):
            if path in paths:
                ctx.add(
                    "volume-mount-invalid",
                    "error",
                    f"{mp}.mountPath",
                    f"{mp}.mountPath: Invalid value {path!r}: must be unique; {REFUSED}",
                    None,
                )
            paths.add(path)
        sub = m.get("subPath")
        if isinstance(sub, str) and (sub.startswith("/") or ".." in sub.split("/")):
            ctx.add(
                "volume-mount-invalid",
                "error",
                f"{mp}.subPath",
                f"{mp}.subPath: Invalid value {sub!r}: must be a relative path without '..'; {REFUSED}",
                None,
            )


def _env(ctx: Context, base: str, c: dict) -> None:
    for j, e in enumerate(as_list(c.get("env"))):
        e = as_dict(e)
        ep = f"{base}.env[{j}]"
        name = e.get("name")
        if name == "":
            ctx.add("env-invalid", "error", ep, f"{ep}.name: Required value; {REFUSED}", None)
        elif isinstance(name, str) and (
            "=" in name or any(not (32 <= ord(ch) <= 126) for ch in name)
            if ctx.options.minor() >= 32
            else not re.match(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$", name)
        ):
            ctx.add(
                "env-invalid",
                "error",
                f"{ep}.name",
                f"{ep}.name: Invalid value {name!r}: not a valid environment variable name; {REFUSED}",
                None,
            )
        vf = e.get("valueFrom")
        if isinstance(vf, dict):
            if e.get("value"):
                ctx.add(
                    "env-invalid",
                    "error",
                    f"{ep}.valueFrom",
                    f"{ep}.valueFrom: Invalid value: may not be specified when `value` is not empty; {REFUSED}",
                    "keep value or valueFrom",
                )
            n = sum(1 for v in vf.values() if v is not None)
            if n != 1:
                ctx.add(
                    "env-invalid",
                    "error",
                    f"{ep}.valueFrom",
                    f"{ep}.valueFrom: Invalid value: must specify exactly one source (found {n}); {REFUSED}",
                    None,
                )


def _resources(ctx: Context, base: str, c: dict) -> None:
    res = as_dict(c.get("resources"))
    parsed: dict[str, dict[str, Any]] = {}
    for kind in ("limits", "requests"):
        parsed[kind] = {}
        for rname, raw in as_dict(res.get(kind)).items():
            rp = f"{base}.resources.{kind}.{rname}" if "/" not in rname else f'{base}.resources.{kind}["{rname}"]'
            q = parse_quantity(raw)
            if q is None:
                if isinstance(raw, (str, int, float)) and not isinstance(raw, bool):
                    ctx.add(
                        "resources-invalid",
                        "error",
                        rp,
                        f"{raw!r} is not a quantity (quantities must match the regular expression "
                        f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'): the kubelet cannot decode the file",
                        "use e.g. 250m or 0.25 for CPU, 128Mi or 1Gi for memory (case-sensitive suffixes)",
                    )
                continue
            if q < 0:
                ctx.add(
                    "resources-invalid",
                    "error",
                    rp,
                    f"{rp}: Invalid value {raw!r}: must be greater than or equal to 0; {REFUSED}",
                    None,
                )
            elif rname == "memory" and q.denominator != 1 and q < 1:
                ctx.add(
                    "resources-invalid",
                    "warning",
                    rp,
                    f"memory {raw!r} is less than one byte: did you mean {raw}i or M?",
                    "memory suffixes: Mi, Gi (binary) or M, G; a lower-case 'm' means milli",
                )
            parsed[kind][rname] = (q, rp, raw)
    for rname, (req, rp, raw) in parsed["requests"].items():
        if rname in parsed["limits"]:
            lim, _lp, lraw = parsed["limits"][rname]
            if req > lim:
                ctx.add(
                    "resources-invalid",
                    "error",
                    rp,
                    f"{rp}: Invalid value {raw!r}: must be less than or equal to {rname} limit of {lraw}; {REFUSED}",
                    "raise the limit or lower the request",
                )


def _probe(ctx: Context, pp: str, probe: dict, kind: str) -> None:
    handlers = [h for h in _PROBE_HANDLERS if probe.get(h) is not None]
    if not handlers:
        ctx.add(
            "probe-invalid",
            "error",
            pp,
            f"{pp}: Required value: must specify a handler type; {REFUSED}",
            "add exactly one of exec, httpGet, tcpSocket, grpc",
        )
    elif len(handlers) > 1:
        ctx.add(
            "probe-invalid",
            "error",
            f"{pp}.{handlers[1]}",
            f"{pp}.{handlers[1]}: Forbidden: may not specify more than 1 handler type; {REFUSED}",
            f"keep only {handlers[0]}",
        )
    for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        v = probe.get(key)
        if _int(v) and v < 0:
            ctx.add(
                "probe-invalid",
                "error",
                f"{pp}.{key}",
                f"{pp}.{key}: Invalid value: {v}: must be greater than or equal to 0; {REFUSED}",
                None,
            )
    st = probe.get("successThreshold")
    if kind in ("livenessProbe", "startupProbe") and _int(st) and st not in (0, 1):
        ctx.add(
            "probe-invalid",
            "error",
            f"{pp}.successThreshold",
            f"{pp}.successThreshold: Invalid value: {st}: must be 1; {REFUSED}",
            "set successThreshold: 1",
        )
    tg = probe.get("terminationGracePeriodSeconds")
    if kind == "readinessProbe" and tg is not None:
        ctx.add(
            "probe-invalid",
            "error",
            f"{pp}.terminationGracePeriodSeconds",
            f"{pp}.terminationGracePeriodSeconds: Invalid value: must not be set for readinessProbes; {REFUSED}",
            None,
        )
    for h in ("httpGet", "tcpSocket"):
        port = as_dict(probe.get(h)).get("port")
        if h in handlers and port is not None:
            _probe_port(ctx, f"{pp}.{h}.port", port)
    grpc = as_dict(probe.get("grpc")).get("port")
    if _int(grpc) and not 1 <= grpc <= 65535:
        ctx.add(
            "probe-invalid",
            "error",
            f"{pp}.grpc.port",
            f"{pp}.grpc.port: Invalid value: {grpc}: must be between 1 and 65535, inclusive; {REFUSED}",
            None,
        )
    if "exec" in handlers and not as_list(as_dict(probe.get("exec")).get("command")):
        ctx.add(
            "probe-invalid",
            "error",
            f"{pp}.exec.command",
            f"{pp}.exec.command: Required value; {REFUSED}",
            "give the command as a list",
        )


def _probe_port(ctx: Context, fp: str, port: Any) -> None:
    if _int(port):
        if not 1 <= port <= 65535:
            ctx.add(
                "probe-invalid",
                "error",
                fp,
                f"{fp}: Invalid value: {port}: must be between 1 and 65535, inclusive; {REFUSED}",
                None,
            )
    elif isinstance(port, str):
        if port.isdigit():
            ctx.add(
                "probe-invalid",
                "error",
                fp,
                f"{fp}: Invalid value {port!r}: a quoted number is a port *name*, and port names must "
                f"contain a letter; {REFUSED}",
                f"remove the quotes: {port}",
            )
        elif not _IANA_SVC_NAME.match(port) or not re.search("[a-z]", port):
            ctx.add(
                "probe-invalid",
                "error",
                fp,
                f"{fp}: Invalid value {port!r}: must be a port number or an IANA service name; {REFUSED}",
                None,
            )
