"""Layer 2: kind and identity -- exactly one ``apiVersion: v1``, ``kind: Pod`` with a good name.

Source: docs/kubelet-contract.md "How a file is decoded"; upstream pkg/kubelet/config/common.go
(``tryDecodeSinglePod``, ``applyDefaults``: the pod is renamed ``<name>-<node name>`` and then
validated with pkg/apis/core/validation/validation.go ``ValidatePodCreate``).
"""

from __future__ import annotations

import hashlib
import re

from staticpodd.errors import InvalidManifest
from staticpodd.manifest.decoded import DEFAULT_MAX_BYTES, DecodeProblem, Manifest
from staticpodd.manifest.positions import locate
from staticpodd.validate.findings import Finding, make

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_SUBDOMAIN_MAX = 253
DNS1123_LABEL_MAX = 63

_WORKLOADS = {
    "Deployment",
    "DaemonSet",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "PodTemplate",
}


def _not_a_pod_hint(kind: str, api_version: Any) -> str:
    if kind.lower() == "pod":
        return "kind is case-sensitive: write 'kind: Pod'"
    if kind == "PodList" or kind == "List":
        return "put each Pod in its own file (the kubelet reads a PodList only from its HTTP source)"
    if kind in _WORKLOADS:
        return (
            f"a static pod is a bare Pod: move the {kind}'s pod template (spec.template) into "
            "'apiVersion: v1' / 'kind: Pod' with its own metadata.name"
        )
    if kind == "Kustomization" or (isinstance(api_version, str) and "kustomize" in api_version):
        return "kustomize input does not belong in the manifest directory; move it elsewhere"
    return (
        f"a {kind} is an API object: create it with kubectl; move this file out of the manifest "
        "directory (the kubelet tries it as a pod every 20 s)"
    )


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "plain string"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def dns1123_subdomain_errors(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain (validation.go IsDNS1123Subdomain), or None."""
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
    if not DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
            "'.', and must start and end with an alphanumeric character"
        )
    return None


def dns1123_label_errors(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label (validation.go IsDNS1123Label), or None."""
    if len(value) > DNS1123_LABEL_MAX:
        return f"must be no more than {DNS1123_LABEL_MAX} characters"
    if not DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
            "must start and end with an alphanumeric character"
        )
    return None


#: The identity codes meaning "the kubelet cannot decode this as a pod" (tryDecodeSinglePod):
#: validation stops at them. Name *validity* (``name-invalid`` …) and the rest of
#: ValidatePodCreate come later.
DECODE_CODES = frozenset({
    "empty", "not-an-object", "kind-missing", "not-a-pod", "api-version-missing", "wrong-api-version",
    "name-missing",
})


def identity_findings(doc: Any, positions: dict, path: str, node_name: str | None = None) -> list[Finding]:
    """Error Findings when ``doc`` is not one v1 Pod with a valid name (empty list when it is).

    Codes: ``empty`` (null document: "Object 'Kind' is missing in 'null'"), ``not-an-object``,
    ``kind-missing``, ``api-version-missing``, ``not-a-pod``, ``wrong-api-version``,
    ``name-missing``, ``name-invalid``, ``name-too-long`` (``<name>-<node name>`` over 253
    characters, only when ``node_name`` is given), ``namespace-invalid``.
    Source: pkg/kubelet/config/common.go tryDecodeSinglePod/applyDefaults;
    apimachinery ValidateObjectMeta (name: DNS-1123 subdomain; namespace: DNS-1123 label).

    The checks run in the kubelet's order: the document must be an object, then a v1 Pod, then
    have a name; the first of those that fails is the only finding. A name and namespace that
    decode are then checked for validity, each on its own.
    """
    problem = _object_problem(doc, positions, path) or _kind_problem(doc, positions, path)
    if problem is None:
        problem = _metadata_problem(doc.get("metadata"), positions, path)
    if problem is not None:
        return [problem]
    meta = doc.get("metadata") or {}
    return _name_findings(meta["name"], node_name, positions, path) + _namespace_findings(meta, positions, path)


def _object_problem(doc: Any, positions: dict, path: str) -> Finding | None:
    """``empty`` or ``not-an-object`` when ``doc`` is not a mapping at all."""
    if doc is None:
        return make(
            "empty",
            "error",
            path,
            positions,
            None,
            "file is empty: the kubelet fails with \"Object 'Kind' is missing in 'null'\" and removes "
            "the pod it was running from this file",
            "write the full Pod manifest; restore the last good version",
        )
    if not isinstance(doc, dict):
        return make(
            "not-an-object",
            "error",
            path,
            positions,
            None,
            f"the file decodes to a {_json_type(doc)}, not a Pod object (is it a script or some other "
            "file?); the kubelet cannot decode it as a pod",
            "a manifest is one mapping with apiVersion: v1 and kind: Pod",
        )
    return None


def _kind_problem(doc: dict, positions: dict, path: str) -> Finding | None:
    """``kind-missing``, ``not-a-pod``, ``api-version-missing`` or ``wrong-api-version``, or None for a v1 Pod."""
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if kind is None or kind == "":
        return make(
            "kind-missing",
            "error",
            path,
            positions,
            None,
            "Object 'Kind' is missing: the kubelet cannot decode this file as a pod",
            "add 'kind: Pod' and 'apiVersion: v1'",
        )
    if not isinstance(kind, str):
        return make(
            "not-a-pod",
            "error",
            path,
            positions,
            "kind",
            f"kind must be a string, got {kind!r}; the kubelet cannot decode this file",
            "kind: Pod",
        )
    if kind != "Pod":
        return make(
            "not-a-pod",
            "error",
            path,
            positions,
            "kind",
            f"this is a {kind}, not a Pod: the kubelet's file source refuses it "
            '("couldn\'t parse as pod") and retries every 20 s',
            _not_a_pod_hint(kind, api_version),
        )
    if api_version is None or api_version == "":
        return make(
            "api-version-missing",
            "error",
            path,
            positions,
            "kind",
            "Object 'apiVersion' is missing: the kubelet cannot decode this file",
            "add 'apiVersion: v1'",
        )
    if api_version != "v1":
        return make(
            "wrong-api-version",
            "error",
            path,
            positions,
            "apiVersion",
            f"no kind Pod is registered for version {api_version!r}: the kubelet refuses this file",
            "use 'apiVersion: v1'",
        )
    return None


def _metadata_problem(meta: Any, positions: dict, path: str) -> Finding | None:
    """``name-missing`` or ``name-invalid`` when metadata.name cannot be decoded as a string."""
    if meta is not None and not isinstance(meta, dict):
        return make(
            "name-missing",
            "error",
            path,
            positions,
            "metadata",
            "metadata must be a mapping; the kubelet cannot decode this file",
            "metadata: {name: ...}",
        )
    name = (meta or {}).get("name")
    if name is None or name == "":
        finding = make(
            "name-missing",
            "error",
            path,
            positions,
            "metadata.name",
            'metadata.name is missing: the kubelet refuses the pod ("name is needed for the pod")',
            "add metadata.name (usually the component's name, e.g. kube-scheduler)",
        )
        if finding.line is None:  # no metadata at all: point at the top-level kind, where it belongs
            line, column = locate(positions or {}, "kind")
            finding = finding.replace(line=line or 1, column=column or 1)
        return finding
    if not isinstance(name, str):
        return make(
            "name-invalid",
            "error",
            path,
            positions,
            "metadata.name",
            f"metadata.name must be a string, got {name!r}; the kubelet cannot decode this file",
            "quote the name",
        )
    return None


def _name_findings(name: str, node_name: str | None, positions: dict, path: str) -> list[Finding]:
    """``name-invalid`` (not a DNS-1123 subdomain) or ``name-too-long`` (with the node's name)."""
    why = dns1123_subdomain_errors(name)
    if why:
        return [
            make(
                "name-invalid",
                "error",
                path,
                positions,
                "metadata.name",
                f"metadata.name {name!r} is invalid: {why}; the kubelet refuses the pod",
                "use lower-case letters, digits, '-' and '.'",
            )
        ]
    if node_name is None:
        return []
    full = f"{name}-{node_name}"
    why = dns1123_subdomain_errors(full)
    if not why:
        return []
    return [
        make(
            "name-too-long",
            "error",
            path,
            positions,
            "metadata.name",
            f"the kubelet names the pod {full[:40]}... ({len(full)} characters: metadata.name "
            f"plus '-{node_name}'), which {why}; the pod is refused",
            f"shorten metadata.name to at most {DNS1123_SUBDOMAIN_MAX - len(node_name) - 1} characters",
        )
    ]


def _namespace_findings(meta: dict, positions: dict, path: str) -> list[Finding]:
    """``namespace-invalid`` when metadata.namespace is set and not a DNS-1123 label."""
    ns = meta.get("namespace")
    if ns is None or ns == "":
        return []
    if not isinstance(ns, str):
        return [
            make(
                "namespace-invalid",
                "error",
                path,
                positions,
                "metadata.namespace",
                f"metadata.namespace must be a string, got {ns!r}",
                "quote it",
            )
        ]
    why = dns1123_label_errors(ns)
    if not why:
        return []
    return [
        make(
            "namespace-invalid",
            "error",
            path,
            positions,
            "metadata.namespace",
            f"metadata.namespace {ns!r} is invalid: {why}; the kubelet refuses the pod",
            "use a valid namespace such as kube-system",
        )
    ]


def problem_finding(problem: DecodeProblem, path: str) -> Finding:
    """The error :class:`Finding` for a :class:`~staticpodd.manifest.decoded.DecodeProblem` in ``path``."""
    return Finding(
        code=problem.code,
        severity="error",
        path=path,
        line=problem.line,
        column=problem.column,
        field=problem.field,
        message=problem.message,
        hint=problem.hint,
        kubelet=problem.kubelet,
    )


def parse_manifest(data: bytes, path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Manifest:
    """Parse ``data`` (the bytes of the file at ``path``) into a :class:`Manifest`.

    Reads like the kubelet (:func:`staticpodd.manifest.decoding.decode`) and checks it is one ``apiVersion: v1``,
    ``kind: Pod`` with a ``metadata.name``; staticpodd's strictness (:attr:`Decoded.notes`:
    duplicate keys, later documents, size) is refused too. ``path`` is only used in messages.
    Raises :class:`staticpodd.errors.InvalidManifest` whose ``findings`` hold the reasons,
    with ``path``/``line``/``column``/``field`` of the first.
    """
    from staticpodd.manifest.decoding import decode

    try:
        decoded = decode(data, max_bytes=max_bytes)
    except DecodeProblem as problem:
        finding = problem_finding(problem, path)
        raise InvalidManifest(
            problem.message,
            findings=[finding],
            path=path,
            line=problem.line,
            column=problem.column,
            field=problem.field,
            hint=problem.hint,
        ) from None
    errors = [problem_finding(n, path) for n in decoded.notes]
    errors += identity_findings(decoded.doc, decoded.positions, path)
    if errors:
        first = errors[0]
        raise InvalidManifest(
            first.message,
            findings=errors,
            path=path,
            line=first.line,
            column=first.column,
            field=first.field,
            hint=first.hint,
        )
    doc = decoded.doc
    meta = doc["metadata"]
    return Manifest(
        doc=doc,
        name=meta["name"],
        namespace=meta.get("namespace") or "default",
        digest=hashlib.sha256(data).hexdigest(),
        positions=decoded.positions,
    )
