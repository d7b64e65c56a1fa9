"""Layer 4: what the kubelet refuses in a static pod.

After decoding, the kubelet defaults the pod (it sets ``spec.nodeName``), runs
``ValidatePodCreate`` and, from v1.34, refuses references to API objects
(pkg/kubelet/config/common.go ``tryDecodeSinglePod``; docs/kubelet-contract.md "What the kubelet refuses").
Every error here means: the file is refused, and a pod it was running is removed at the next
20 s relist. The checks below are the subset of pkg/apis/core/validation/validation.go that
hand-written manifests actually trip; each function names the upstream function it mirrors.
The container rules are in :mod:`.containerrules` (``rule_containers`` is re-exported here).
"""

from __future__ import annotations

import re

from staticpodd.validate.containerrules import rule_containers
from staticpodd.validate.context import Context, as_dict, as_list
from staticpodd.validate.identity import DNS1123_LABEL
from staticpodd.validate.ruletools import REFUSED, _int, _suggest

__all__ = [
    "REFUSED",
    "api_object_reference",
    "qualified_name_error",
    "rule_api_references",
    "rule_containers",
    "rule_metadata",
    "rule_pod_spec",
    "rule_static_pod_fields",
    "rule_volumes",
]

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
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
    the kubelet's applyDefaults sets nodeName) -- docs/kubelet-contract.md "What the kubelet refuses".
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
    pkg/api/pod/util.go HasAPIObjectReference; docs/kubelet-contract.md "What the kubelet refuses".
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
    if ctx.doc.get("spec") is not None and not isinstance(ctx.doc.get("spec"), dict):
        return  # schema layer reports the type (null is no type error: Go leaves the zero PodSpec)
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
