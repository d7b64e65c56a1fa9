"""The pod as the user wrote it, from the pod as the API server returns it (no client import).

``kubectl get pod -o yaml`` shows much the user never wrote: the server's bookkeeping, the
defaults it filled in, and what admission plugins injected. Writing that back with ``spec.nodeName``
set is what the manual step does, and it goes wrong in known ways (``spec.priority`` set by the
Priority admission plugin is refused when sent back with a class name that now computes another
value; a kube-api-access volume pins a token projection the ServiceAccount plugin would have
written afresh). :func:`strip_pod` applies one rule, stated here:

1. **Removed always** (the server owns them): ``status``; ``metadata.uid``, ``resourceVersion``,
   ``creationTimestamp``, ``deletionTimestamp``, ``deletionGracePeriodSeconds``, ``generation``,
   ``selfLink``, ``managedFields``; ``spec.nodeName`` (the caller sets the one it wants);
   ``spec.priority`` (the Priority admission plugin computes it from ``priorityClassName`` and
   refuses a value that differs: plugin/pkg/admission/priority).
2. **Removed when they have the shape an admission plugin injects** and no record says the user
   wrote them: the ServiceAccount plugin's ``kube-api-access-*`` projected volume (a
   ``serviceAccountToken`` source) and its mounts at ``/var/run/secrets/kubernetes.io/serviceaccount``
   (plugin/pkg/admission/serviceaccount); ``spec.serviceAccount`` (the deprecated alias the
   server copies from ``serviceAccountName``) and ``serviceAccountName: default``; the
   DefaultTolerationSeconds plugin's ``node.kubernetes.io/not-ready`` and ``/unreachable``
   NoExecute tolerations (Exists, 300 s; the list is atomic in managedFields, so only the
   last-applied document keeps one of them); ``preemptionPolicy: PreemptLowerPriority``.
3. **Removed when equal to the API server's default** and no record says the user wrote them
   (pkg/apis/core/v1/defaults.go): ``dnsPolicy: ClusterFirst``, ``restartPolicy: Always``,
   ``schedulerName: default-scheduler``, ``securityContext: {}``,
   ``terminationGracePeriodSeconds: 30``, ``enableServiceLinks: true``; per container
   ``terminationMessagePath: /dev/termination-log``, ``terminationMessagePolicy: File``,
   ``resources: {}``, ``imagePullPolicy`` (Always for a ``:latest`` or untagged image, else
   IfNotPresent), ports' ``protocol: TCP``; probes' ``timeoutSeconds: 1``, ``periodSeconds: 10``,
   ``successThreshold: 1``, ``failureThreshold: 3`` and ``httpGet.scheme: HTTP``; volumes'
   ``configMap``/``secret`` ``defaultMode: 420``.
4. **Everything else is kept**: a value no default or plugin explains came from the user (or a
   mutating webhook the cluster runs again on create).

"No record says the user wrote it" means: the field is neither in the
``kubectl.kubernetes.io/last-applied-configuration`` annotation (client-side ``kubectl apply``
keeps the user's own document there) nor owned by a ``managedFields`` entry whose ``operation`` is
``Apply`` (server-side apply records exactly the fields of the applied configuration). Entries of
operation ``Update`` (``kubectl run``, ``kubectl create``) cannot tell: the server computes them after
defaulting, so they own the defaults too. Removing a field of rules 2 and 3 loses nothing either
way: on create the API server and its admission plugins set the same value again.
"""

from __future__ import annotations

import copy
import json

TYPE_CHECKING = False  # typing is for mypy: importing it costs start-up
if TYPE_CHECKING:
    from typing import Any

#: The annotation client-side ``kubectl apply`` keeps the applied document in.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                   "generation", "selfLink", "managedFields")

#: pkg/apis/core/v1/defaults.go SetDefaults_PodSpec (and the Pod's own): field -> default value.
SPEC_DEFAULTS: dict[str, Any] = {
    "dnsPolicy": "ClusterFirst",
    "restartPolicy": "Always",
    "schedulerName": "default-scheduler",
    "securityContext": {},
    "terminationGracePeriodSeconds": 30,
    "enableServiceLinks": True,
}
CONTAINER_DEFAULTS: dict[str, Any] = {
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
    "resources": {},
}
PROBE_DEFAULTS: dict[str, Any] = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                  "failureThreshold": 3}
SA_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def default_pull_policy(image: Any) -> str:
    """The imagePullPolicy the API server fills in: ``Always`` when the image has no tag or the
    tag ``latest`` (and no digest), else ``IfNotPresent`` (SetDefaults_Container)."""
    text = str(image or "")
    if "@" in text:
        return "IfNotPresent"
    last = text.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


class Written:
    """What the records say the user wrote: the last-applied document and the field sets of the
    managedFields entries of operation Apply. ``has(path)`` answers for a path of keys, where a
    container is named ``("containers", NAME)``."""

    def __init__(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        self.applied: dict[str, Any] | None = None
        raw = (meta.get("annotations") or {}).get(LAST_APPLIED)
        if isinstance(raw, str):
            try:
                doc = json.loads(raw)
            except ValueError:
                doc = None
            self.applied = doc if isinstance(doc, dict) else None
        self.sets = [e.get("fieldsV1") or {} for e in (meta.get("managedFields") or [])
                     if isinstance(e, dict) and e.get("operation") == "Apply"]

    def has(self, *path: str) -> bool:
        """Whether the user wrote ``spec.<path>`` (see the module's rule)."""
        if self.applied is not None and _in_doc(self.applied.get("spec"), path):
            return True
        return any(_in_fields(s.get("f:spec"), path) for s in self.sets)

    def applied_ports(self, kind: str, name: str) -> list[dict[str, Any]]:
        """The ``ports`` the last-applied document gives container ``name`` of ``kind`` (a port's
        key in managedFields always names its protocol, so only this document tells)."""
        spec = (self.applied or {}).get("spec")
        for c in (spec.get(kind) if isinstance(spec, dict) else None) or []:
            if isinstance(c, dict) and c.get("name") == name:
                return [p for p in c.get("ports") or [] if isinstance(p, dict)]
        return []


def _in_doc(node: Any, path: tuple[str, ...]) -> bool:
    for i, key in enumerate(path):
        if key in ("containers", "initContainers", "volumes") and i + 1 < len(path):
            items = node.get(key) if isinstance(node, dict) else None
            match = [x for x in items or [] if isinstance(x, dict) and x.get("name") == path[i + 1]]
            return bool(match) and _in_doc(match[0], path[i + 2:])
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _in_fields(node: Any, path: tuple[str, ...]) -> bool:
    for i, key in enumerate(path):
        if key in ("containers", "initContainers", "volumes") and i + 1 < len(path):
            items = node.get(f"f:{key}") if isinstance(node, dict) else None
            sub = (items or {}).get(f'k:{{"name":{json.dumps(path[i + 1])}}}') if isinstance(items, dict) else None
            return sub is not None and _in_fields(sub, path[i + 2:])
        if not isinstance(node, dict) or f"f:{key}" not in node:
            return False
        node = node[f"f:{key}"]
    return True


def _is_sa_volume(vol: Any) -> bool:
    if not isinstance(vol, dict) or not str(vol.get("name", "")).startswith("kube-api-access-"):
        return False
    sources = (vol.get("projected") or {}).get("sources") or []
    return any(isinstance(s, dict) and "serviceAccountToken" in s for s in sources)


def _is_default_toleration(t: Any) -> bool:
    return (isinstance(t, dict) and t.get("key") in DEFAULT_TOLERATION_KEYS and t.get("operator") == "Exists"
            and t.get("effect") == "NoExecute" and t.get("tolerationSeconds") == 300 and "value" not in t)


def strip_pod(pod: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The pod as the user wrote it (the module's rule), and the list of what was removed as
    dotted field paths (``spec.tolerations[node.kubernetes.io/not-ready]``, ``status`` ...).

    ``pod``: a Pod as the API server returns it (``kubectl get pod -o json``, or the client's
    ``sanitize_for_serialization``). The result has no ``spec.nodeName``; ``pod`` is not changed.
    Raises ValueError when ``pod`` is not a Pod mapping with ``metadata.name`` and ``spec``.

    Long because: it is the module's stripping rule in its three numbered parts (what the server
    sets, what admission plugins inject, the API server's defaults), every removal appending its
    path to the same list, and later parts use what earlier ones found (the service-account
    volumes); read in one piece it is the checklist of what the API server adds to a pod.
    """
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict) or not isinstance(pod.get("metadata"), dict):
        raise ValueError("not a Pod: it needs metadata and spec mappings")
    if pod.get("kind", "Pod") != "Pod" or not pod["metadata"].get("name"):
        raise ValueError("not a Pod with a metadata.name")
    written = Written(pod)
    out = copy.deepcopy(pod)
    removed: list[str] = []
    out["apiVersion"], out["kind"] = pod.get("apiVersion") or "v1", "Pod"
    if out.pop("status", None) is not None:
        removed.append("status")
    meta = out["metadata"]
    for key in SERVER_METADATA:
        if key in meta:
            del meta[key]
            removed.append(f"metadata.{key}")
    spec = out["spec"]
    for key in ("nodeName", "priority"):
        if key in spec:
            del spec[key]
            removed.append(f"spec.{key}")

    def drop(container: dict[str, Any], key: str, where: str, *path: str) -> None:
        if key in container and not written.has(*path, key):
            del container[key]
            removed.append(f"{where}.{key}")

    # 2. what admission plugins inject
    sa_volumes = {v["name"] for v in spec.get("volumes") or []
                  if _is_sa_volume(v) and not written.has("volumes", v["name"])}
    if sa_volumes:
        spec["volumes"] = [v for v in spec["volumes"] if not (isinstance(v, dict) and v.get("name") in sa_volumes)]
        removed.extend(f"spec.volumes[{n}]" for n in sorted(sa_volumes))
        if not spec["volumes"]:
            del spec["volumes"]
    if spec.get("serviceAccount") == spec.get("serviceAccountName") and "serviceAccount" in spec:
        drop(spec, "serviceAccount", "spec")
    if spec.get("serviceAccountName") == "default":
        drop(spec, "serviceAccountName", "spec")
    if spec.get("preemptionPolicy") == "PreemptLowerPriority":
        drop(spec, "preemptionPolicy", "spec")
    if isinstance(spec.get("tolerations"), list):
        # the list is atomic in managedFields: only the last-applied document can tell one item apart
        mine = (written.applied or {}).get("spec", {}).get("tolerations") if written.applied else None
        mine = mine if isinstance(mine, list) else []
        injected = [t for t in spec["tolerations"] if _is_default_toleration(t) and t not in mine]
        kept = [t for t in spec["tolerations"] if t not in injected]
        removed.extend(f"spec.tolerations[{t['key']}]" for t in injected)
        if kept:
            spec["tolerations"] = kept
        else:
            del spec["tolerations"]
    # 3. the API server's defaults
    for key, value in SPEC_DEFAULTS.items():
        if key in spec and spec[key] == value:
            drop(spec, key, "spec")
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(spec.get(kind) or []):
            if not isinstance(c, dict):
                continue
            name = str(c.get("name", i))
            where = f"spec.{kind}[{name}]"
            path = (kind, name)
            mounts = c.get("volumeMounts")
            if isinstance(mounts, list) and sa_volumes:
                keep = [m for m in mounts if not (isinstance(m, dict) and m.get("name") in sa_volumes
                                                  and m.get("mountPath") == SA_MOUNT_PATH)]
                if len(keep) != len(mounts):
                    removed.append(f"{where}.volumeMounts[{SA_MOUNT_PATH}]")
                    if keep:
                        c["volumeMounts"] = keep
                    else:
                        del c["volumeMounts"]
            for key, value in CONTAINER_DEFAULTS.items():
                if key in c and c[key] == value:
                    drop(c, key, where, *path)
            if c.get("imagePullPolicy") == default_pull_policy(c.get("image")):
                drop(c, "imagePullPolicy", where, *path)
            mine = written.applied_ports(kind, name)
            for port in c.get("ports") or []:
                if isinstance(port, dict) and port.get("protocol") == "TCP" and not any(
                        "protocol" in p for p in mine if p.get("containerPort") == port.get("containerPort")):
                    del port["protocol"]
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                p = c.get(probe)
                if not isinstance(p, dict) or written.has(*path, probe):
                    continue
                for key, value in PROBE_DEFAULTS.items():
                    if p.get(key) == value:
                        del p[key]
                if isinstance(p.get("httpGet"), dict) and p["httpGet"].get("scheme") == "HTTP":
                    del p["httpGet"]["scheme"]
    for v in spec.get("volumes") or []:
        for kind in ("configMap", "secret"):
            src = v.get(kind) if isinstance(v, dict) else None
            if (isinstance(src, dict) and src.get("defaultMode") == 420
                    and not written.has("volumes", str(v.get("name", "")), kind, "defaultMode")):
                del src["defaultMode"]
    return out, removed


def pinned(stripped: dict[str, Any], node: str) -> dict[str, Any]:
    """``stripped`` (from :func:`strip_pod`) with ``spec.nodeName`` set to ``node`` (a copy)."""
    out = copy.deepcopy(stripped)
    out["spec"]["nodeName"] = node
    return out
