"""Parse manifest bytes the way the kubelet does; pure functions over bytes.

The kubelet turns a file into a pod in two steps (docs/kubelet-contract.md "How a file is decoded";
upstream ``pkg/kubelet/config/common.go`` ``tryDecodeSinglePod``):

1. ``sigs.k8s.io/yaml.YAMLToJSON``: go-yaml v2 decodes the *first* YAML document into
   ``interface{}`` with YAML 1.1 scalar resolution (``yes``/``no``/``on``/``off``/``y``/``n``
   are booleans, ``0777`` is octal, ``0x1F`` hex, ``1_000`` an int), then every map key is
   turned into a JSON string (``true``, ``1``, ...), and the result is marshalled as JSON.
2. The JSON is decoded into a core/v1 Pod (case-sensitive; unknown fields dropped).

Step 1 is reproduced on top of libyaml (PyYAML's C parser: go-yaml v2 is a port of
libyaml, so the syntax verdicts agree) with go-yaml v2's scalar resolver and alias limits,
and records where each field came from so findings can name ``file:line:column``. It is
stricter than the kubelet in three places the issue asks for: duplicate mapping keys, a
second non-empty document, and non-UTF-8 bytes are errors.

Layout: :mod:`staticpodd.positions` (field paths, ``file:line:column``),
:mod:`staticpodd.decoded` (DecodeProblem, Decoded, Manifest, size limits),
:mod:`staticpodd.decoding` (:func:`decode`: JSON or YAML by the first byte),
:mod:`staticpodd.yamldecode` and :mod:`staticpodd.yamlresolve` (go-yaml v2),
:mod:`staticpodd.jsondecode` (Go's encoding/json). This module is the public face: it re-exports
their public names and adds :func:`parse_manifest` (decoding plus the identity check of
``staticpodd.validate.identity``) and :func:`pod_identity`. Nothing below it imports it.
"""

from __future__ import annotations

import hashlib

from staticpodd.decoded import DEFAULT_MAX_BYTES, KUBELET_MAX_BYTES, Decoded, DecodeProblem, Manifest, too_large
from staticpodd.decoding import decode, json_prefixed
from staticpodd.errors import InvalidManifest
from staticpodd.positions import join_path, locate
from staticpodd.yamlresolve import resolve_plain

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DEFAULT_MAX_BYTES",
    "KUBELET_MAX_BYTES",
    "DecodeProblem",
    "Decoded",
    "Manifest",
    "check_identity",
    "decode",
    "join_path",
    "json_prefixed",
    "locate",
    "parse_manifest",
    "pod_identity",
    "resolve_plain",
    "too_large",
]


def _finding_from(problem: DecodeProblem, path: str) -> Any:
    from staticpodd.validate.findings import Finding

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


def check_identity(doc: Any, positions: dict, path: str) -> list[Any]:
    """Layer 2 basics: one v1 Pod with a name. Returns error Findings (empty if fine).

    Source: docs/kubelet-contract.md "How a file is decoded"; pkg/kubelet/config/common.go
    (``tryDecodeSinglePod``: decode errors, "invalid pod", name required).
    """
    from staticpodd.validate.identity import identity_findings

    return identity_findings(doc, positions, path)


def parse_manifest(data: bytes, path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Manifest:
    """Parse ``data`` (the bytes of the file at ``path``) into a :class:`Manifest`.

    Reads like the kubelet (see :func:`decode`) and checks it is one ``apiVersion: v1``,
    ``kind: Pod`` with a ``metadata.name``; staticpodd's strictness (:attr:`Decoded.notes`:
    duplicate keys, later documents, size) is refused too. ``path`` is only used in messages.
    Raises :class:`staticpodd.errors.InvalidManifest` whose ``findings`` hold the reasons,
    with ``path``/``line``/``column``/``field`` of the first.
    """
    try:
        decoded = decode(data, max_bytes=max_bytes)
    except DecodeProblem as problem:
        finding = _finding_from(problem, path)
        raise InvalidManifest(
            problem.message,
            findings=[finding],
            path=path,
            line=problem.line,
            column=problem.column,
            field=problem.field,
            hint=problem.hint,
        ) from None
    errors = [_finding_from(n, path) for n in decoded.notes] + check_identity(decoded.doc, decoded.positions, path)
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


def pod_identity(data: bytes) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Pod in ``data``, or None when it is not a parseable v1 Pod.

    Cheap: decoding only, no schema. Namespace defaults to ``"default"`` (docs/kubelet-contract.md
    "How a file is decoded").
    """
    try:
        doc = decode(data, max_bytes=KUBELET_MAX_BYTES).doc
    except DecodeProblem:
        return None
    if not isinstance(doc, dict) or doc.get("kind") != "Pod" or doc.get("apiVersion") != "v1":
        return None
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    ns = meta.get("namespace")
    return (ns if isinstance(ns, str) and ns else "default", name)
