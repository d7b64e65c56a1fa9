"""Would the kubelet refuse these bytes? The question the daemon asks on a writer's close.

The daemon's ``on_invalid: restore`` normally looks at a changed file after its debounce
(0.3 s). A file the kubelet cannot parse keeps the old pod only until its next full relist
(docs/kubelet-contract.md "What a broken file does to a running pod"): every millisecond the bad bytes stay is
a chance for the relist to land in the window and kill the pod. So when a writer closes a live
file (inotify IN_CLOSE_WRITE), :func:`kubelet_refuses` decides whether the bytes are of the kind
the kubelet drops, and the daemon then looks at once instead of after the debounce. It only
decides *when* to look: whether to restore is still the gate's verdict in the normal reconcile.

It is the validator's own first stage, not a second opinion: :func:`staticpodd.manifest.decoding.decode`
(the kubelet's JSON/YAML rules, docs/kubelet-contract.md "How a file is decoded") and the identity checks that
``tryDecodeSinglePod`` makes (one ``apiVersion: v1``, ``kind: Pod`` with a ``metadata.name``;
:mod:`staticpodd.validate.identity`). An earlier cheap reimplementation (stdlib json, PyYAML)
drifted from the decoder on eight inputs (``.nan``, a null key, ``"\\/"``, billion laughs, the
10 MiB limit, invalid UTF-8 in JSON …); the decoder costs about 0.2 ms a file more, far inside the
50 ms restore budget. Not covered here (they come from the gate at the normal pace): the
kubelet's API validation (ValidatePodCreate, static pod API references).
"""

from __future__ import annotations

from staticpodd.manifest.decoded import KUBELET_MAX_BYTES, DecodeProblem
from staticpodd.validate.identity import DECODE_CODES

__all__ = ["kubelet_refuses"]


def kubelet_refuses(data: bytes) -> str | None:
    """Why the kubelet's file source would refuse ``data`` (one short phrase: the decoder's or the
    identity check's message), or None when it would decode it into a Pod. Never raises."""
    from staticpodd.manifest.decoding import decode
    from staticpodd.validate.identity import identity_findings

    try:
        decoded = decode(data, max_bytes=KUBELET_MAX_BYTES)
    except DecodeProblem as problem:  # raised: refused, by the kubelet unless it says it accepts
        return None if problem.kubelet == "accepts" else problem.message
    except (RecursionError, MemoryError) as exc:  # pragma: no cover - the decoder's own limits
        return f"cannot decode: {type(exc).__name__}"
    for finding in identity_findings(decoded.doc, decoded.positions, "-"):
        if finding.code in DECODE_CODES:
            return finding.message
    return None
