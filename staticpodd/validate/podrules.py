"""Layer 4: what the kubelet refuses in a static pod.

After decoding, the kubelet defaults the pod (it sets ``spec.nodeName``), runs
``ValidatePodCreate`` and, from v1.34, refuses references to API objects
(pkg/kubelet/config/common.go ``tryDecodeSinglePod``; KUBELET.md "What the kubelet refuses").
Every error here means: the file is refused, and a pod it was running is removed at the next
20 s relist. The checks below are the subset of pkg/apis/core/validation/validation.go that
hand-written manifests actually trip; each function names the upstream function it mirrors.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from staticpodd.validate.context import Context, as_dict, as_list
from staticpodd.validate.identity import DNS1123_LABEL, dns1123_label_errors
from staticpodd.validate.quantity import parse_quantity

REFUSED = "the kubelet refuses the pod"
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_VOLUME_SOURCES = (
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
)
_HOSTPATH_TYPES = ("", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice")
_ENUMS = {
    "restartPolicy": ("Always", "OnFailure", "Never"),
    "dnsPolicy": ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"),
    "preemptionPolicy": ("PreemptLowerPriority", "Never"),
}
_CONTAINER_ENUMS = {
    "imagePullPolicy": ("Always", "IfNotPresent", "Never"),
    "terminationMessagePolicy": ("File", "FallbackToLogsOnError"),
}


def _int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def qualified_name_error(key: str) -> str | None:
    """Why ``key`` is not a qualified name (``[prefix/]name``), or None. validation.IsQualifiedName."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if slash and (
        len(prefix) > 253
        or not re.match(
            r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*"
            r"[a-z0-9])?)*$",
            prefix,
        )
    ):
        return "prefix part must be a lowercase DNS-1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        )
    return None


def rule_metadata(ctx: Context) -> None:
    """Labels and annotations: keys are qualified names, label values at most 63 valid characters.

    Code ``metadata-invalid``. Source: apimachinery ValidateLabels / ValidateAnnotations
    (called from ValidateObjectMeta in ValidatePodCreate).
    """
    meta = as_dict(ctx.doc.get("metadata"))
    for kind in ("labels", "annotations"):
        for key, value in as_dict(meta.get(kind)).items():
            fp = f'metadata.{kind}["{key}"]'
            why = qualified_name_error(key)
            if why:
                ctx.add(
                    "metadata-invalid",
                    "error",
                    fp,
                    f"{kind[:-1]} key {key!r} is invalid: {why}; {REFUSED}",
                    "use keys like app.kubernetes.io/name or component",
                )
            if kind == "labels" and isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                ctx.add(
                    "metadata-invalid",
                    "error",
                    fp,
                    f"label value {value!r} is invalid (at most 63 alphanumeric characters, '-', '_' or '.', "
                    f"starting and ending alphanumeric); {REFUSED}",
                    "shorten or simplify the value",
                )


def rule_static_pod_fields(ctx: Context) -> None:
    """Fields a static pod may not have: ephemeralContainers; schedulingGates with the node name set.

    Codes ``ephemeral-containers``, ``scheduling-gates``. Source: validation.go ValidatePodCreate
    ("cannot be set on create"); ValidatePodSpec (schedulingGates forbidden once nodeName is set;
    the kubelet's applyDefaults sets nodeName) -- KUBELET.md "What the kubelet refuses".
    """
    spec = ctx.spec
    if as_list(spec.get("ephemeralContainers")):
        ctx.add(
            "ephemeral-containers",
            "error",
            "spec.ephemeralContainers",
            f"spec.ephemeralContainers: Forbidden: cannot be set on create; {REFUSED}",
            "remove ephemeralContainers (use kubectl debug on the mirror pod instead)",
        )
    if as_list(spec.get("schedulingGates")):
        ctx.add(
            "scheduling-gates",
            "error",
            "spec.schedulingGates",
            "spec.schedulingGates: Forbidden: cannot be set when the node name is already set, and the "
            f"kubelet sets it for static pods; {REFUSED}",
            "remove schedulingGates: static pods are never scheduled",
        )


def api_object_reference(spec: dict) -> tuple[str, str] | None:
    """(field path, plural resource) of the first reference to an API object, or None.

    Mirrors pkg/api/pod/util.go ``HasAPIObjectReference`` (order and resource names), which
    uses VisitPodSecretNames / VisitPodConfigmapNames.
    """
    if spec.get("serviceAccountName"):
        return "spec.serviceAccountName", "serviceaccounts"
    secrets: list[str] = []
    configmaps: list[str] = []
    for i, ref in enumerate(as_list(spec.get("imagePullSecrets"))):
        if as_dict(ref).get("name"):
            secrets.append(f"spec.imagePullSecrets[{i}]")
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(as_list(spec.get(key))):
            c = as_dict(c)
            base = f"spec.{key}[{i}]"
            for j, ef in enumerate(as_list(c.get("envFrom"))):
                ef = as_dict(ef)
                if ef.get("secretRef") is not None:
                    secrets.append(f"{base}.envFrom[{j}].secretRef")
                if ef.get("configMapRef") is not None:
                    configmaps.append(f"{base}.envFrom[{j}].configMapRef")
            for j, env in enumerate(as_list(c.get("env"))):
                vf = as_dict(as_dict(env).get("valueFrom"))
                if vf.get("secretKeyRef") is not None:
                    secrets.append(f"{base}.env[{j}].valueFrom.secretKeyRef")
                if vf.get("configMapKeyRef") is not None:
                    configmaps.append(f"{base}.env[{j}].valueFrom.configMapKeyRef")
    volumes = [as_dict(v) for v in as_list(spec.get("volumes"))]
    for i, v in enumerate(volumes):
        vp = f"spec.volumes[{i}]"
        if v.get("secret") is not None or v.get("azureFile") is not None:
            secrets.append(vp)
        for src in ("cephfs", "cinder", "flexVolume", "iscsi", "rbd", "scaleIO", "storageos"):
            s = as_dict(v.get(src))
            if as_dict(s.get("secretRef")).get("name"):
                secrets.append(f"{vp}.{src}.secretRef")
        if as_dict(as_dict(v.get("csi")).get("nodePublishSecretRef")).get("name"):
            secrets.append(f"{vp}.csi.nodePublishSecretRef")
        if v.get("configMap") is not None:
            configmaps.append(vp)
        for j, s in enumerate(as_list(as_dict(v.get("projected")).get("sources"))):
            s = as_dict(s)
            if s.get("secret") is not None:
                secrets.append(f"{vp}.projected.sources[{j}].secret")
            if s.get("configMap") is not None:
                configmaps.append(f"{vp}.projected.sources[{j}].configMap")
    if secrets:
        return secrets[0], "secrets"
    if configmaps:
        return configmaps[0], "configmaps"
    if as_list(spec.get("resourceClaims")):
        return "spec.resourceClaims", "resourceclaims"
    for i, v in enumerate(volumes):
        vp = f"spec.volumes[{i}]"
        if v.get("configMap") is not None:
            return vp, "configmaps (via configmap volumes)"
        if v.get("secret") is not None:
            return vp, "secrets (via secret volumes)"
        if v.get("csi") is not None:
            return f"{vp}.csi", "csidrivers (via CSI volumes)"
        if v.get("glusterfs") is not None:
            return f"{vp}.glusterfs", "endpoints (via glusterFS volumes)"
        if v.get("persistentVolumeClaim") is not None:
            return f"{vp}.persistentVolumeClaim", "persistentvolumeclaims"
        if v.get("ephemeral") is not None:
            return f"{vp}.ephemeral", "persistentvolumeclaims (via ephemeral volumes)"
        if v.get("azureFile") is not None:
            return f"{vp}.azureFile", "secrets (via azureFile volumes)"
        for j, s in enumerate(as_list(as_dict(v.get("projected")).get("sources"))):
            s = as_dict(s)
            sp = f"{vp}.projected.sources[{j}]"
            if s.get("configMap") is not None:
                return sp, "configmaps (via projected volumes)"
            if s.get("secret") is not None:
                return sp, "secrets (via projected volumes)"
            if s.get("serviceAccountToken") is not None:
                return sp, "serviceaccounts (via projected volumes)"
            if s.get("clusterTrustBundle") is not None:
                return sp, "clustertrustbundles"
            if s.get("podCertificate") is not None:
                return sp, "podcertificates"
    return None


def rule_api_references(ctx: Context) -> None:
    """References to API objects: refused from v1.34, mirror pod refused before.

    Code ``api-object-reference``: an error when targeting v1.34+ (feature gate
    PreventStaticPodAPIReferences, on by default; message "static pods may not reference
    <resource>"), a warning for older kubelets (the pod runs but NodeRestriction refuses its mirror
    pod, k/k #103587) -- except ClusterTrustBundle projections and resourceClaims, which older
    kubelets refuse too. Source: pkg/kubelet/config/common.go tryDecodeSinglePod;
    pkg/api/pod/util.go HasAPIObjectReference; KUBELET.md "What the kubelet refuses".
    """
    found = api_object_reference(ctx.spec)
    if found is None:
        return
    field_path, resource = found
    hint = (
        "static pods start before the API server: use hostPath volumes and plain env values; "
        "remove serviceAccountName/imagePullSecrets (pull credentials belong in the runtime config)"
    )
    if ctx.options.minor() >= 34:
        ctx.add(
            "api-object-reference",
            "error",
            field_path,
            f"static pods may not reference {resource}: the kubelet (v1.34+) refuses the pod",
            hint,
        )
    elif resource in ("clustertrustbundles", "resourceclaims"):
        ctx.add(
            "api-object-reference", "error", field_path, f"static pods may not reference {resource}: {REFUSED}", hint
        )
    else:
        ctx.add(
            "api-object-reference",
            "warning",
            field_path,
            f"references {resource}: a v{ctx.options.kubernetes_version} kubelet runs the pod but the API "
            "server refuses its mirror pod (invisible in kubectl); kubelets from v1.34 refuse the pod",
            hint,
        )


def rule_pod_spec(ctx: Context) -> None:
    """Pod-level fields: enums, at least one container, deadlines, dnsPolicy None needs dnsConfig.

    Code ``pod-spec-invalid``. Source: validation.go ValidatePodSpec (validateRestartPolicy,
    validateDNSPolicy, validatePodDNSConfig, ActiveDeadlineSeconds, TerminationGracePeriodSeconds).
    """
    spec = ctx.spec
    if "spec" in ctx.doc and not isinstance(ctx.doc.get("spec"), dict):
        return  # schema layer reports the type
    if not as_list(spec.get("containers")):
        ctx.add(
            "pod-spec-invalid",
            "error",
            "spec.containers" if "containers" in spec else "spec",
            f"spec.containers: Required value: a pod needs at least one container; {REFUSED}",
            "add a containers list",
        )
    for key, allowed in _ENUMS.items():
        v = spec.get(key)
        if isinstance(v, str) and v and v not in allowed:
            ctx.add(
                "pod-spec-invalid",
                "error",
                f"spec.{key}",
                f"spec.{key}: Unsupported value: {v!r} (supported: {', '.join(allowed)}); {REFUSED}",
                _suggest(v, allowed),
            )
    if spec.get("dnsPolicy") == "None" and not isinstance(spec.get("dnsConfig"), dict):
        ctx.add(
            "pod-spec-invalid",
            "error",
            "spec.dnsPolicy",
            f"spec.dnsConfig: Required value: must provide dnsConfig when dnsPolicy is None; {REFUSED}",
            "add dnsConfig.nameservers or use dnsPolicy: Default",
        )
    ads = spec.get("activeDeadlineSeconds")
    if _int(ads) and ads <= 0:
        ctx.add(
            "pod-spec-invalid",
            "error",
            "spec.activeDeadlineSeconds",
            f"spec.activeDeadlineSeconds: must be greater than 0; {REFUSED}",
            "remove it or set it > 0",
        )
    for key in ("terminationGracePeriodSeconds",):
        v = spec.get(key)
        if _int(v) and v < 0:
            ctx.add(
                "pod-spec-invalid",
                "error",
                f"spec.{key}",
                f"spec.{key}: must be greater than or equal to 0; {REFUSED}",
                None,
            )
    if spec.get("hostNetwork") is True and spec.get("dnsPolicy") == "ClusterFirst":
        ctx.add(
            "dns-policy-host-network",
            "info",
            "spec.dnsPolicy",
            "hostNetwork pod with dnsPolicy ClusterFirst: the kubelet falls back to the node's resolv.conf "
            "(Default); use ClusterFirstWithHostNet if cluster DNS was meant",
            None,
        )


def _suggest(value: str, allowed: tuple[str, ...]) -> str:
    for a in allowed:
        if a.lower() == value.lower():
            return f"values are case-sensitive: {a}"
    return f"use one of {', '.join(allowed)}"


def rule_containers(ctx: Context) -> None:
    """Containers: names (DNS label, unique), image, enums, ports, mounts, env, resources, probes.

    Codes ``container-invalid``, ``port-invalid``, ``volume-mount-invalid``, ``env-invalid``,
    ``resources-invalid``, ``probe-invalid``. Source: validation.go validateContainers /
    validateInitContainers / validateContainerCommon / validateContainerPorts / ValidateVolumeMounts /
    ValidateEnv / ValidateResourceRequirements / validateProbe / validateLivenessProbe.
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


def rule_volumes(ctx: Context) -> None:
    """Volumes: names (DNS label, unique), at most one source, hostPath path and type.

    Code ``volume-invalid``. A volume with no source is defaulted to emptyDir (corpus 21 relies
    on it), so only more than one source is an error. Source: validation.go ValidateVolumes /
    validateVolumeSource / validateHostPathVolumeSource; pkg/apis/core/v1/defaults.go
    SetDefaults_Volume.
    """
    seen: set[str] = set()
    for i, v in enumerate(as_list(ctx.spec.get("volumes"))):
        if not isinstance(v, dict):
            continue
        vp = f"spec.volumes[{i}]"
        name = v.get("name")
        if name == "":
            ctx.add("volume-invalid", "error", vp, f"{vp}.name: Required value; {REFUSED}", None)
        elif isinstance(name, str):
            if not DNS1123_LABEL.match(name) or len(name) > 63:
                ctx.add(
                    "volume-invalid",
                    "error",
                    f"{vp}.name",
                    f"{vp}.name: Invalid value {name!r}: must be a DNS-1123 label; {REFUSED}",
                    None,
                )
            elif name in seen:
                ctx.add(
                    "volume-invalid", "error", f"{vp}.name", f"{vp}.name: Duplicate value {name!r}; {REFUSED}", None
                )
            seen.add(name)
        sources = [s for s in _VOLUME_SOURCES if v.get(s) is not None]
        if len(sources) > 1:
            ctx.add(
                "volume-invalid",
                "error",
                f"{vp}.{sources[1]}",
                f"{vp}.{sources[1]}: Forbidden: may not specify more than 1 volume type ({', '.join(sources)}); "
                f"{REFUSED}",
                "split it into one volume per source",
            )
        hp = v.get("hostPath")
        if isinstance(hp, dict):
            path = hp.get("path")
            if path == "":
                ctx.add(
                    "volume-invalid", "error", f"{vp}.hostPath", f"{vp}.hostPath.path: Required value; {REFUSED}", None
                )
            elif isinstance(path, str) and ".." in path.split("/"):
                ctx.add(
                    "volume-invalid",
                    "error",
                    f"{vp}.hostPath.path",
                    f"{vp}.hostPath.path: Invalid value {path!r}: must not contain '..'; {REFUSED}",
                    None,
                )
            t = hp.get("type")
            if isinstance(t, str) and t not in _HOSTPATH_TYPES:
                ctx.add(
                    "volume-invalid",
                    "error",
                    f"{vp}.hostPath.type",
                    f"{vp}.hostPath.type: Unsupported value {t!r}; {REFUSED}",
                    _suggest(t, _HOSTPATH_TYPES[1:]),
                )
