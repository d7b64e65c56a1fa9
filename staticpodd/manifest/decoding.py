"""The kubelet's first stage: which decoder reads the bytes, and :func:`decode` itself.

apimachinery ``util/yaml.ToJSON``: a file whose first non-space character is ``{`` goes to the
strict JSON decoder (:mod:`staticpodd.manifest.jsondecode`), anything else through sigs.k8s.io/yaml
(:mod:`staticpodd.manifest.yamldecode`). docs/kubelet-contract.md "How a file is decoded"; upstream
``pkg/kubelet/config/common.go`` ``tryDecodeSinglePod``. Pure; no I/O.

The decoder's other modules: :mod:`staticpodd.manifest.positions` (field paths, ``file:line:column``),
:mod:`staticpodd.manifest.decoded` (DecodeProblem, Decoded, Manifest, size limits),
:mod:`staticpodd.manifest.yamlresolve` (go-yaml v2's scalar resolver). The identity check that turns a
decoded document into a pod (one ``apiVersion: v1``, ``kind: Pod`` with a name) is the validator's
first layer, :mod:`staticpodd.validate.identity` (with ``parse_manifest``); nothing here imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from staticpodd.manifest.decoded import DEFAULT_MAX_BYTES, KUBELET_MAX_BYTES, Decoded, DecodeProblem, too_large
from staticpodd.manifest.yamldecode import decode_yaml

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import TypeVar

    _T = TypeVar("_T")

# unicode.IsSpace (Go): what apimachinery's hasJSONPrefix trims before looking for '{'
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)


def json_prefixed(data: bytes) -> bool:
    """True when the kubelet reads ``data`` as JSON: its first non-space character is ``{``.

    apimachinery ``util/yaml.ToJSON``: ``hasJSONPrefix`` trims leading ``unicode.IsSpace`` runes
    (decoded as UTF-8; an invalid byte stops the trim) and looks for ``{``; such bytes go to the
    strict JSON decoder *as is*, anything else through sigs.k8s.io/yaml. docs/kubelet-contract.md "How a file
    is decoded"; pkg/kubelet/config/common.go tryDecodeSinglePod.
    """
    i = 0
    n = len(data)
    while i < n:
        b = data[i]
        if b == 0x7B:  # '{'
            return True
        if b < 0x80:
            if chr(b) not in _GO_SPACE:
                return False
            i += 1
            continue
        width = 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 0
        try:
            ch = data[i : i + width].decode("utf-8") if width else ""
        except UnicodeDecodeError:
            return False
        if ch not in _GO_SPACE:
            return False
        i += width
    return False


def decode(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Decoded:
    """Decode bytes as the kubelet does (apimachinery ``util/yaml.ToJSON``): the first layer.

    A file whose first non-space byte is ``{`` is strict JSON (:func:`json_prefixed`,
    :mod:`staticpodd.manifest.jsondecode`); anything else goes through sigs.k8s.io/yaml ``YAMLToJSON``
    (go-yaml v2, first document only). Source: docs/kubelet-contract.md "How a file is decoded".

    Raises :class:`DecodeProblem` for what the kubelet refuses: size over 10 MiB (``too-large``),
    bytes that are not UTF-8/UTF-16 (``not-utf8``), syntax (``yaml-syntax``, ``yaml-tab``,
    ``json-syntax``), excessive aliasing, NaN/Inf values (``yaml-unsupported-value``). What only
    staticpodd refuses is returned in :attr:`Decoded.notes` and decoding goes on with what the
    kubelet would run: duplicate keys (``yaml-duplicate-key``, the last value wins), later
    documents (``multiple-documents``), a size over ``max_bytes`` (``too-large``).
    """
    if len(data) > KUBELET_MAX_BYTES:
        raise too_large(len(data), max_bytes)
    notes: list[DecodeProblem] = []
    if len(data) > max_bytes:
        notes.append(too_large(len(data), max_bytes))
    if json_prefixed(data):
        from staticpodd.manifest.jsondecode import decode_json

        doc, positions, json_notes = decode_json(data)
        return Decoded(doc, positions, 0, tuple(notes + json_notes), "json", "utf-8")
    try:
        return decode_yaml(data, list(notes))
    except RecursionError:  # deep nesting that go-yaml v2 reads (it allows 10000 levels)
        return on_a_deep_stack(decode_yaml, data, notes)



#: go-yaml v2 (and so the kubelet) reads flow and block nesting up to 10000 levels; PyYAML's
#: composer and our node builder recurse, a few Python frames a level, so the default limit of
#: 1000 frames stops near 500 levels. A file that deep is decoded again on a thread of its own
#: with room for 10000 levels.
DEEP_FRAMES = 100_000
DEEP_STACK_BYTES = 512 << 20  # virtual: only the pages a deep file touches are ever committed


def on_a_deep_stack(fn: Callable[..., _T], *args: object) -> _T:
    """Run ``fn(*args)`` on a new thread with a ``DEEP_STACK_BYTES`` stack and a recursion limit of
    at least ``DEEP_FRAMES`` (both restored afterwards), returning its result or raising what it
    raised. For the rare file nested past ~500 levels; the common path never comes here."""
    import threading  # only a file this deep needs a thread

    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    old_limit = sys.getrecursionlimit()
    old_stack = threading.stack_size()
    sys.setrecursionlimit(max(old_limit, DEEP_FRAMES))
    try:
        threading.stack_size(DEEP_STACK_BYTES)
        try:
            worker = threading.Thread(target=run, name="staticpodd-deep-decode", daemon=True)
            worker.start()
        finally:
            threading.stack_size(old_stack)
        worker.join()
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


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
