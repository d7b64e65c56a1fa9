"""Would the kubelet refuse these bytes? A cheap first look, for acting on a writer's close.

The daemon's ``on_invalid: restore`` normally looks at a changed file after its debounce
(0.3 s). A file the kubelet cannot parse keeps the old pod only until its next full relist
(KUBELET.md "What a broken file does to a running pod"): every millisecond the bad bytes stay is
a chance for the relist to land in the window and kill the pod. So when a writer closes a live
file (inotify IN_CLOSE_WRITE), :func:`kubelet_refuses` decides in well under a millisecond
whether the bytes are of the kind the kubelet drops, and the daemon then looks at once instead
of after the debounce. It only decides *when* to look: whether to restore is still the gate's
verdict in the normal reconcile.

The kubelet's decoding (KUBELET.md "How a file is decoded"): the first non-space byte ``{``
means strict JSON (stdlib ``json`` refuses what Go's decoder refuses: trailing commas,
comments, unquoted keys); otherwise YAML 1.1 (PyYAML, like sigs.k8s.io/yaml over go-yaml v2;
duplicate keys accepted, last wins), first document only; then ``apiVersion: v1``,
``kind: Pod`` and ``metadata.name`` are required; an empty file is "Object 'Kind' is missing".
Not covered here (they come from the gate at the normal pace): the kubelet's API validation
(ValidatePodCreate, static pod API references).
"""

from __future__ import annotations

import json
from typing import Any

#: The kubelet's read limit (``maxConfigLength``, pkg/kubelet/config/file.go): 10 MB.
KUBELET_MAX_BYTES = 10 * 1000 * 1000


def _no_constants(name: str) -> Any:
    raise ValueError(f"invalid character {name[:1]!r} (NaN/Infinity are not JSON)")


def kubelet_refuses(data: bytes) -> str | None:
    """Why the kubelet's file source would refuse ``data`` (one short phrase), or None when it
    would decode it into a Pod. Never raises."""
    if len(data) > KUBELET_MAX_BYTES:
        return "over the kubelet's 10 MB read limit"
    text = data.lstrip()
    if not text:
        return "empty (Object 'Kind' is missing in 'null')"
    doc: Any
    if text[:1] == b"{":
        try:
            doc = json.loads(data, parse_constant=_no_constants)
        except RecursionError:  # Go's encoding/json stops at a nesting depth of 10000 too
            return "JSON parse error: exceeded max depth"
        except ValueError as exc:
            return f"JSON parse error: {exc}"
    else:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            docs = yaml.load_all(data, Loader=loader)  # noqa: S506 - a safe loader
            doc = next(iter(docs), None)
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            return f"YAML parse error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if not isinstance(doc, dict):
        return "not a mapping (Object 'Kind' is missing)"
    if doc.get("kind") != "Pod" or doc.get("apiVersion") != "v1":
        return f"not a v1 Pod (kind {doc.get('kind')!r}, apiVersion {doc.get('apiVersion')!r})"
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        return "no metadata.name (name is needed for the pod)"
    return None
