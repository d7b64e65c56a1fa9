"""Parse manifest bytes the way the kubelet does; pure functions over bytes.

The kubelet turns a file into a pod in two steps (KUBELET.md "How a file is decoded";
upstream ``pkg/kubelet/config/common.go`` ``tryDecodeSinglePod``):

1. ``sigs.k8s.io/yaml.YAMLToJSON``: go-yaml v2 decodes the *first* YAML document into
   ``interface{}`` with YAML 1.1 scalar resolution (``yes``/``no``/``on``/``off``/``y``/``n``
   are booleans, ``0777`` is octal, ``0x1F`` hex, ``1_000`` an int), then every map key is
   turned into a JSON string (``true``, ``1``, ...), and the result is marshalled as JSON.
2. The JSON is decoded into a core/v1 Pod (case-sensitive; unknown fields dropped).

This module reproduces step 1 on top of libyaml (PyYAML's C parser: go-yaml v2 is a port of
libyaml, so the syntax verdicts agree) with go-yaml v2's scalar resolver and alias limits,
and records where each field came from so findings can name ``file:line:column``. It is
stricter than the kubelet in three places the issue asks for: duplicate mapping keys, a
second non-empty document, and non-UTF-8 bytes are errors.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml

from staticpodd.errors import InvalidManifest

DEFAULT_MAX_BYTES = 1 << 20
"""Our default size cap (bytes). The kubelet's own cap is 10 MB (``maxConfigLength``)."""

KUBELET_MAX_BYTES = 10 * 1024 * 1024

_PLAIN = "!staticpodd/plain"
_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_BINARY = "tag:yaml.org,2002:binary"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"
_RESOLVABLE = {_PLAIN, _STR, _BOOL, _INT, _FLOAT, _TIMESTAMP, _NULL}

# go-yaml v2 resolve.go resolveMapList (YAML 1.1 booleans and nulls).
_RESOLVE_MAP: dict[str, tuple[str, Any]] = {}
for _value, _tag, _words in (
    (True, _BOOL, ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")),
    (False, _BOOL, ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")),
    (None, _NULL, ("", "~", "null", "Null", "NULL")),
    (math.nan, _FLOAT, (".nan", ".NaN", ".NAN")),
    (math.inf, _FLOAT, (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")),
    (-math.inf, _FLOAT, ("-.inf", "-.Inf", "-.INF")),
    ("<<", _MERGE, ("<<",)),
):
    for _w in _words:
        _RESOLVE_MAP[_w] = (_tag, _value)

_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_GO_FLOAT = re.compile(r"^[-+]?((\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|inf|infinity|nan)$", re.IGNORECASE)
_NAME_KEY = re.compile(r"[^\W\d][\w-]*\Z")
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


class DecodeProblem(Exception):
    """One reason the bytes are not a readable manifest (internal; becomes a Finding).

    ``code`` is the stable finding code; ``line``/``column`` are 1-based or None. ``kubelet``:
    what the kubelet does (``"refuses"``/``"accepts"``, see staticpodd.validate.findings), None
    for the code's usual level. Raised, it stops decoding (the kubelet refuses the bytes);
    collected in :attr:`Decoded.notes`, it is staticpodd's strictness and decoding went on.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
        field: str | None = None,
        kubelet: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint
        self.field = field
        self.kubelet = kubelet


@dataclass(frozen=True)
class Manifest:
    """One parsed manifest.

    ``doc``: the JSON-compatible document sigs.k8s.io/yaml would produce.
    ``name``/``namespace``: ``metadata.name`` and ``metadata.namespace`` (or ``"default"``),
    before the kubelet appends ``-<node name>``. ``digest``: sha256 hex of the bytes.
    ``positions``: field path (``spec.containers[0].image``) -> 1-based (line, column).
    """

    doc: dict
    name: str
    namespace: str
    digest: str
    positions: dict = field(default_factory=dict, compare=False, repr=False)

    def where(self, field_path: str | None) -> tuple[int | None, int | None]:
        """(line, column) of ``field_path`` or its nearest recorded parent; (None, None) if unknown."""
        return locate(self.positions, field_path)


def locate(positions: dict, field_path: str | None) -> tuple[int | None, int | None]:
    """(line, column) for ``field_path`` from a positions map, walking up to the nearest parent."""
    p = field_path
    while p:
        if p in positions:
            return positions[p]
        cut = max(p.rfind("."), p.rfind("["))
        if cut <= 0:
            break
        p = p[:cut]
    if p and p in positions:
        return positions[p]
    return (None, None)


def join_path(parent: str, key: str) -> str:
    """Field path of ``key`` under ``parent``: ``a.b``, or ``a["x.y/z"]`` for keys that are not names."""
    if _NAME_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    return f'{parent}["{key}"]'


# --------------------------------------------------------------------------- composing
# libyaml composes the node graph; our resolver only marks plain scalars so that the
# go-yaml v2 rules below decide what they mean.


def _resolve(self: Any, kind: Any, value: Any, implicit: Any) -> str:
    if kind is yaml.ScalarNode:
        if implicit[0]:
            return _PLAIN
        return _STR
    return _SEQ if kind is yaml.SequenceNode else _MAP


try:
    from yaml.cyaml import CParser as _CParser  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _CParser = None  # type: ignore[assignment, misc]

if _CParser is not None:

    class _CComposer(_CParser):  # type: ignore[misc, valid-type]
        resolve = _resolve

        def descend_resolver(self, *a: Any) -> None:
            pass

        def ascend_resolver(self, *a: Any) -> None:
            pass
else:  # pragma: no cover - PyYAML without libyaml
    _CComposer = None  # type: ignore[assignment, misc]


class _PyComposer(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer):
    """Pure-Python composer; like go-yaml v2 it lets a later anchor redefine an earlier one."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)

    resolve = _resolve

    def descend_resolver(self, *a: Any) -> None:
        pass

    def ascend_resolver(self, *a: Any) -> None:
        pass

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None and not isinstance(event, yaml.AliasEvent):
            self.anchors.pop(anchor, None)
        return super().compose_node(parent, index)


def _compose_first(text: str) -> tuple[Any, list[Any], yaml.YAMLError | None]:
    """Compose the first document as go-yaml v2 ``Unmarshal`` does (it reads nothing after it).

    Returns ``(first node or None, later nodes, error in a later document or None)``. Raises
    yaml.YAMLError for a syntax error in the first document only: the kubelet never parses what
    follows (KUBELET.md "How a file is decoded": a multi-document file runs its first document).
    """
    try:
        return _compose_with(_CComposer if _CComposer is not None else _PyComposer, text)
    except yaml.composer.ComposerError as exc:
        if "found duplicate anchor" not in str(exc) or _CComposer is None:
            raise
    return _compose_with(_PyComposer, text)


def _compose_with(cls: Any, text: str) -> tuple[Any, list[Any], yaml.YAMLError | None]:
    loader = cls(text)
    later: list[Any] = []
    later_error: yaml.YAMLError | None = None
    try:
        first = loader.get_node() if loader.check_node() else None
        try:
            while loader.check_node():
                later.append(loader.get_node())
        except yaml.YAMLError as exc:
            later_error = exc
    finally:
        loader.dispose()
    return first, later, later_error


# --------------------------------------------------------------------------- resolving


def resolve_plain(value: str) -> tuple[str, Any]:
    """go-yaml v2 ``resolve("", value)`` for a plain scalar -> (tag, Python value).

    Source: gopkg.in/yaml.v2 resolve.go (used by sigs.k8s.io/yaml). Timestamps stay strings
    (go-yaml keeps them as strings when decoding into ``interface{}``); so does a number out of
    float64's range such as ``1e400`` (``strconv.ParseFloat`` fails, the scalar is a string).
    """
    item = _RESOLVE_MAP.get(value)
    if item is not None:
        return item
    if not value:
        return _NULL, None
    c = value[0]
    if c == ".":
        if _GO_FLOAT.match(value) or _GO_HEXFLOAT.match(value):
            f = _go_parse_float(value)
            if math.isinf(f):
                return _STR, value  # out of float64's range: a string, as above
            return _FLOAT, f
        return _STR, value
    if c in "+-0123456789":
        plain = value.replace("_", "")
        if _GO_INT.match(plain):
            n = _go_parse_int(plain)
            if _INT64_MIN <= n <= _UINT64_MAX:
                return _INT, n
        if _YAML_STYLE_FLOAT.match(plain):
            f = float(plain)
            if math.isinf(f):
                # strconv.ParseFloat fails with ErrRange: go-yaml v2 keeps the string (issue 11 item 9)
                return _STR, value
            return _FLOAT, f
        if plain.startswith("0b") and re.fullmatch(r"[01]+", plain[2:] or "x"):
            n = int(plain[2:], 2)
            if n <= _INT64_MAX:
                return _INT, n
        elif plain.startswith("-0b") and re.fullmatch(r"[01]+", plain[3:] or "x"):
            n = -int(plain[3:], 2)
            if n >= _INT64_MIN:
                return _INT, n
    return _STR, value


_GO_HEXFLOAT = re.compile(r"^[-+]?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][-+]?[0-9]+$")


def _go_parse_float(v: str) -> float:
    if _GO_HEXFLOAT.match(v):
        return float.fromhex(v)
    return float(v)


def _go_parse_int(plain: str) -> int:
    sign = -1 if plain[0] == "-" else 1
    body = plain[1:] if plain[0] in "+-" else plain
    low = body.lower()
    if low.startswith("0x"):
        n = int(body[2:], 16)
    elif low.startswith("0o"):
        n = int(body[2:], 8)
    elif low.startswith("0b"):
        n = int(body[2:], 2)
    elif len(body) > 1 and body[0] == "0":
        n = int(body, 8)
    else:
        n = int(body)
    return sign * n


def _explicit(tag: str, value: str, node: Any) -> Any:
    """A scalar with an explicit tag, as go-yaml v2 resolves it."""
    if tag not in _RESOLVABLE:
        return value  # unknown/custom tags and !!binary: kept as the string
    if tag == _STR or tag == _TIMESTAMP:
        return value
    rtag, out = resolve_plain(value)
    if tag == _FLOAT and rtag == _INT:
        return float(out)
    if rtag != tag:
        raise _problem(
            "yaml-syntax",
            f"cannot decode {rtag.rsplit(':', 1)[-1]} `{value}` as a {tag.rsplit(':', 1)[-1]}",
            node,
        )
    return out


def _problem(code: str, message: str, node: Any, hint: str | None = None, field: str | None = None) -> DecodeProblem:
    m = node.start_mark
    return DecodeProblem(code, message, line=m.line + 1, column=m.column + 1, hint=hint, field=field)


# --------------------------------------------------------------------------- building


_ANCHOR = re.compile(r"&[^\s,\[\]{}]+\s+")
_SLASH_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\/")


class _Builder:
    """Turn a composed node graph into the JSON-compatible value YAMLToJSON would produce.

    ``text``: the decoded source, to see a non-specific tag ``!`` that libyaml resolves away.
    """

    def __init__(self, text: str = "", hid_boms: bool = False) -> None:
        self.text = text
        self.hid_boms = hid_boms  # later BOMs were swapped for _INNER_BOM (_hide_inner_boms)
        self.positions: dict[str, tuple[int, int]] = {}
        self.notes: list[DecodeProblem] = []
        self.decode_count = 0
        self.alias_count = 0
        self.alias_depth = 0
        self.seen: set[int] = set()
        self.active: set[int] = set()

    def _enter(self, node: Any) -> bool:
        """Count one decoded node like go-yaml v2; True when ``node`` is reached through an alias."""
        key = id(node)
        is_alias = key in self.seen
        if is_alias:
            self.decode_count += 1  # the alias node itself
            if self.alias_depth > 0:
                self.alias_count += 1
            self.alias_depth += 1
        else:
            self.seen.add(key)
        self._count(node)
        return is_alias

    def _count(self, node: Any) -> None:
        # go-yaml v2 decode.go unmarshal(): every node decoded under an alias counts as aliased;
        # "document contains excessive aliasing" guards against "billion laughs".
        self.decode_count += 1
        if self.alias_depth > 0:
            self.alias_count += 1
        if self.alias_count > 100 and self.decode_count > 1000:
            ratio = self.alias_count / self.decode_count
            if ratio > _allowed_alias_ratio(self.decode_count):
                raise _problem(
                    "yaml-excessive-aliasing",
                    "document contains excessive aliasing",
                    node,
                    hint="expand the anchors/aliases by hand; the kubelet's YAML decoder refuses this",
                )

    def build(self, node: Any, path: str) -> Any:
        is_alias = self._enter(node)
        try:
            return self._build(node, path)
        finally:
            if is_alias:
                self.alias_depth -= 1

    def _build(self, node: Any, path: str) -> Any:
        if isinstance(node, yaml.ScalarNode):
            m = node.start_mark
            if path not in self.positions:
                self.positions[path] = (m.line + 1, m.column + 1)
            return self.scalar(node)
        key = id(node)
        if key in self.active:
            raise _problem("yaml-syntax", "anchor value contains itself", node)
        self.active.add(key)
        try:
            if isinstance(node, yaml.SequenceNode):
                out_list = []
                for i, item in enumerate(node.value):
                    sub = f"{path}[{i}]"
                    m = item.start_mark
                    self.positions.setdefault(sub, (m.line + 1, m.column + 1))
                    out_list.append(self.build(item, sub))
                return out_list
            return self.mapping(node, path)
        finally:
            self.active.discard(key)

    def nonspecific(self, node: Any) -> bool:
        """True for a scalar written with the non-specific tag ``!`` (``! 5``).

        libyaml hands it to the resolver like an untagged plain scalar; go-yaml v2 keeps the tag
        "!", which ``resolve`` does not know, so the value stays the string as written (issue 11
        item 9; go-yaml v2 resolve.go resolvableTag). A plain scalar never starts with ``!``.
        """
        i = node.start_mark.index
        text = self.text
        if i >= len(text) or text[i] not in "!&":
            return False
        if text[i] == "&":
            m = _ANCHOR.match(text, i)
            if m is None:
                return False
            i = m.end()
        return text.startswith("!", i) and (i + 1 >= len(text) or text[i + 1] in " \t\r\n")

    def scalar(self, node: Any) -> Any:
        value = self._scalar(node)
        if self.hid_boms and isinstance(value, str):
            return value.replace(_INNER_BOM, _BOM)
        return value

    def _scalar(self, node: Any) -> Any:
        if node.style == '"' and "\\/" in self.text[node.start_mark.index : node.end_mark.index]:
            m = _SLASH_ESCAPE.search(self.text, node.start_mark.index, node.end_mark.index)
            if m is not None:
                # libyaml (YAML 1.2) knows the escape \/; go-yaml v2 (scannerc.go) does not
                line = self.text.count("\n", 0, m.end() - 2) + 1
                col = m.end() - 2 - (self.text.rfind("\n", 0, m.end() - 2) + 1) + 1
                raise DecodeProblem(
                    "yaml-syntax",
                    "found unknown escape character '\\/' in a double-quoted string; the kubelet cannot parse "
                    "this file and drops its pod at the next resync",
                    line=line,
                    column=col,
                    hint="write / without the backslash",
                )
        tag = node.tag
        if tag == _PLAIN and self.nonspecific(node):
            value = node.value
        elif tag == _PLAIN:
            value = resolve_plain(node.value)[1]
        else:
            value = _explicit(tag, node.value, node)
        if isinstance(value, float):
            if math.isnan(value) or math.isinf(value):
                raise _problem(
                    "yaml-unsupported-value",
                    f"json: unsupported value: {node.value} (YAMLToJSON cannot encode it)",
                    node,
                    hint="quote it if a string was meant",
                )
            if value == int(value) and abs(value) < 1e21:
                # encoding/json writes such a float64 as an integer with its shortest digits
                # (1.8446744073709552e19 -> 18446744073709552000); the kubelet then reads that.
                return int(Decimal(repr(value)))
        return value

    def key_string(self, node: Any) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise _problem("yaml-syntax", "a mapping key must be a scalar", node)
        value = self.scalar_key(node)
        if isinstance(value, str):
            return value.replace(_INNER_BOM, _BOM) if self.hid_boms else value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            if value > _INT64_MAX:
                raise _problem("yaml-syntax", f"unsupported map key of type uint64: {value}", node)
            return str(value)
        if isinstance(value, float):
            return _go_float_key(value)
        raise _problem(
            "yaml-syntax",
            f"unsupported map key {node.value!r} (null)",
            node,
            hint="quote the key",
        )

    def scalar_key(self, node: Any) -> Any:
        tag = node.tag
        if tag == _PLAIN and self.nonspecific(node):
            return node.value
        if tag == _PLAIN:
            return resolve_plain(node.value)[1]
        return _explicit(tag, node.value, node)

    def mapping(self, node: Any, path: str) -> dict:
        return self._mapping(node, path)[0]

    def _key_kind(self, knode: Any) -> str:
        if isinstance(knode, yaml.ScalarNode) and knode.tag == _PLAIN and self.nonspecific(knode):
            return "str"
        value = self.scalar_key(knode) if isinstance(knode, yaml.ScalarNode) else None
        return "bool" if isinstance(value, bool) else type(value).__name__

    def _duplicate(self, k: str, sub: str, knode: Any, first_line: int, same_kind: bool) -> None:
        # The kubelet accepts it (KUBELET.md "How a file is decoded"): with keys of one YAML type the
        # last value wins (go-yaml v2 decode.go mapping(): SetMapIndex in order); keys of two types
        # that become one JSON key (1 and '1') are two Go map keys that sigs.k8s.io/yaml converts in
        # random order, so the kubelet keeps one at random. Either way: staticpodd's strictness.
        what = (
            "the kubelet accepts the file and uses this later value"
            if same_kind
            else "it is the same JSON key written as another YAML type, and the kubelet keeps one of the two at random"
        )
        note = _problem(
            "yaml-duplicate-key",
            f'mapping key "{k}" already defined at line {first_line}: {what}; staticpodd refuses it because '
            "nobody can tell which value was meant",
            knode,
            hint="remove one of the two",
            field=sub,
        )
        note.kubelet = "accepts"
        self.notes.append(note)

    def _mapping(self, node: Any, path: str) -> tuple[dict, dict[str, tuple[str, int]]]:
        """(the JSON object, key -> (YAML type of its key, line)) for a mapping node."""
        out: dict[str, Any] = {}
        kinds: dict[str, tuple[str, int]] = {}
        explicit: dict[str, Any] = {}
        for knode, vnode in node.value:
            if isinstance(knode, yaml.ScalarNode) and knode.tag == _PLAIN and knode.value == "<<":
                self.merge(vnode, out, path, kinds)
                continue
            k = self.key_string(knode)
            sub = join_path(path, k)
            kind = self._key_kind(knode)
            line = knode.start_mark.line + 1
            if k in explicit:
                self._duplicate(k, sub, knode, explicit[k].start_mark.line + 1, kinds[k][0] == kind)
            elif k in kinds and kinds[k][0] != kind:  # merged in as another type (random in Go)
                self._duplicate(k, sub, knode, kinds[k][1], False)
            explicit[k] = knode
            kinds[k] = (kind, line)
            km = knode.start_mark
            if isinstance(vnode, yaml.ScalarNode):
                vm = vnode.start_mark
                self.positions[sub] = (vm.line + 1, vm.column + 1)
            else:
                self.positions[sub] = (km.line + 1, km.column + 1)
            out[k] = self.build(vnode, sub)
        return out, kinds

    def _merge_one(self, node: Any, out: dict, path: str, kinds: dict[str, tuple[str, int]]) -> None:
        is_alias = self._enter(node)
        try:
            sub, sub_kinds = self._mapping(node, path)
            for k, (kind, line) in sub_kinds.items():
                if k in kinds and kinds[k][0] != kind:
                    self._duplicate(k, join_path(path, k), node, kinds[k][1], False)
                kinds[k] = (kind, line)
            out.update(sub)
        finally:
            if is_alias:
                self.alias_depth -= 1

    def merge(self, vnode: Any, out: dict, path: str, kinds: dict[str, tuple[str, int]]) -> None:
        if isinstance(vnode, yaml.MappingNode):
            self._merge_one(vnode, out, path, kinds)
        elif isinstance(vnode, yaml.SequenceNode):
            for item in reversed(vnode.value):
                if not isinstance(item, yaml.MappingNode):
                    raise _problem("yaml-syntax", "map merge requires map or sequence of maps as the value", item)
                self._merge_one(item, out, path, kinds)
        else:
            raise _problem("yaml-syntax", "map merge requires map or sequence of maps as the value", vnode)


def _allowed_alias_ratio(decode_count: int) -> float:
    # go-yaml v2 decode.go allowedAliasRatio.
    if decode_count <= 400_000:
        return 0.99
    if decode_count >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * ((decode_count - 400_000) / 3_600_000)


def _go_float_key(value: float) -> str:
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if math.isnan(value):
        return ".nan"
    s = format(value, ".7g")
    if "e" in s:
        mant, exp = s.split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        sign = exp[0]
        digits = exp[1:].lstrip("0").rjust(2, "0")
        return f"{mant}e{sign}{digits}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


# --------------------------------------------------------------------------- public


@dataclass(frozen=True)
class Decoded:
    """Result of :func:`decode`: the document the kubelet would get, positions, and notes.

    ``doc``: any JSON type, or None for an empty file. ``positions``: field path -> (line,
    column). ``extra_documents``: later documents that are empty (a trailing ``---``).
    ``notes``: :class:`DecodeProblem` records the kubelet accepts but staticpodd refuses (its
    strictness: a duplicate key, a second document, a size over ``max_bytes``, non-UTF-8 bytes
    in JSON strings), each with ``kubelet="accepts"``. ``syntax``: ``"json"`` when the first
    non-space byte is ``{`` (strict JSON, as the kubelet reads it), else ``"yaml"``.
    ``encoding``: ``"utf-8"``, ``"utf-16-le"`` or ``"utf-16-be"`` (from a BOM).
    """

    doc: Any
    positions: dict
    extra_documents: int
    notes: tuple = ()
    syntax: str = "yaml"
    encoding: str = "utf-8"


def too_large(size: int, max_bytes: int) -> DecodeProblem:
    """The ``too-large`` problem for a file of ``size`` bytes (its real size: ``os.fstat``, not
    how much was read) over ``max_bytes``, saying truthfully whose limit it is.

    Over :data:`KUBELET_MAX_BYTES` (10 MiB, ``maxConfigLength`` in pkg/kubelet/config/file.go;
    KUBELET.md "Which files are pods") the kubelet itself refuses the file and drops its pod
    (``kubelet="refuses"``). Between staticpodd's ``max_manifest_bytes`` (default
    :data:`DEFAULT_MAX_BYTES`, 1 MiB) and 10 MiB only staticpodd refuses it (``kubelet="accepts"``):
    the kubelet reads it and runs it (a 2 MiB file runs: KUBELET.md), and the validator reads
    the rest of it, so any reason the kubelet has to refuse it is reported too.
    """
    if size > KUBELET_MAX_BYTES:
        return DecodeProblem(
            "too-large",
            f"file is {size} bytes, over the kubelet's own {KUBELET_MAX_BYTES}-byte (10 MiB) limit: "
            "the kubelet refuses it (\"the read limit is reached\") and drops its pod",
            hint="a static pod manifest is a few KB; move this file out of the manifest directory",
            kubelet="refuses",
        )
    return DecodeProblem(
        "too-large",
        f"file is {size} bytes, over staticpodd's {max_bytes}-byte limit (max_manifest_bytes); the kubelet "
        f"reads files up to {KUBELET_MAX_BYTES} bytes (10 MiB) and runs this one if it is otherwise valid",
        hint="a static pod manifest is a few KB; raise max_manifest_bytes in staticpodd.yaml only if this "
        "is really a manifest",
        kubelet="accepts",
    )


# unicode.IsSpace (Go): what apimachinery's hasJSONPrefix trims before looking for '{'
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)
_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")


def json_prefixed(data: bytes) -> bool:
    """True when the kubelet reads ``data`` as JSON: its first non-space character is ``{``.

    apimachinery ``util/yaml.ToJSON``: ``hasJSONPrefix`` trims leading ``unicode.IsSpace`` runes
    (decoded as UTF-8; an invalid byte stops the trim) and looks for ``{``; such bytes go to the
    strict JSON decoder *as is*, anything else through sigs.k8s.io/yaml. KUBELET.md "How a file
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


def _position(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset]
    return before.count(b"\n") + 1, len(before) - (before.rfind(b"\n") + 1) + 1


def _text_of(data: bytes) -> tuple[str, str]:
    """``(text, encoding)`` as go-yaml v2 reads the bytes (reader.go determine_encoding: a UTF-16
    BOM selects UTF-16, anything else is UTF-8). Raises DecodeProblem ``not-utf8`` (refused)."""
    if data.startswith(_UTF32_BOMS):
        raise DecodeProblem(
            "not-utf8",
            "the file is UTF-32 (it starts with a UTF-32 byte order mark): the kubelet's YAML decoder reads "
            "only UTF-8 and UTF-16, so it cannot parse this file and drops its pod",
            line=1,
            column=1,
            hint="save the file as UTF-8",
        )
    for bom, codec, name in ((b"\xff\xfe", "utf-16-le", "utf-16-le"), (b"\xfe\xff", "utf-16-be", "utf-16-be")):
        if data.startswith(bom):
            try:
                return "\ufeff" + data[2:].decode(codec), name
            except UnicodeDecodeError as exc:
                raise DecodeProblem(
                    "not-utf8",
                    f"the file starts with a {name.upper()} byte order mark but bytes at offset {exc.start + 2} "
                    "are not valid UTF-16: the kubelet cannot parse it and drops its pod",
                    hint="save the file as UTF-8",
                ) from None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        line, col = _position(data, exc.start)
        raise DecodeProblem(
            "not-utf8",
            f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not valid UTF-8: the kubelet's YAML "
            "decoder refuses the file and drops its pod",
            line=line,
            column=col,
            hint="save the file as UTF-8",
        ) from None


_BOM = "\ufeff"
_INNER_BOM = "\ufdd0"  # a noncharacter libyaml reads like any other plain character


def _hide_inner_boms(text: str) -> str:
    """go-yaml v2 skips a byte order mark only at the start of the stream; later ones are ordinary
    characters (``a: 1\n<BOM>b: 2`` has a key "<BOM>b"), where libyaml skips one at the start of
    any line. Found by the differential test (tests/validate/test_differential_go.py). Later BOMs
    are swapped for :data:`_INNER_BOM` while composing and swapped back in every string."""
    start = 0
    while start < len(text) and start < 2 and text[start] == _BOM:
        start += 1
    if _BOM not in text[start:] or _INNER_BOM in text:
        return text
    return text[:start] + text[start:].replace(_BOM, _INNER_BOM)


def decode(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Decoded:
    """Decode bytes as the kubelet does (apimachinery ``util/yaml.ToJSON``): the first layer.

    A file whose first non-space byte is ``{`` is strict JSON (:func:`json_prefixed`,
    :mod:`staticpodd.jsondecode`); anything else goes through sigs.k8s.io/yaml ``YAMLToJSON``
    (go-yaml v2, first document only). Source: KUBELET.md "How a file is decoded".

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
        from staticpodd.jsondecode import decode_json

        doc, positions, json_notes = decode_json(data)
        return Decoded(doc, positions, 0, tuple(notes + json_notes), "json", "utf-8")
    text, encoding = _text_of(data)
    hidden = _hide_inner_boms(text)
    hid_boms = hidden is not text
    text = hidden
    try:
        first, later, later_error = _compose_first(text)
    except yaml.MarkedYAMLError as exc:
        raise _syntax_problem(exc, text) from None
    except yaml.reader.ReaderError as exc:  # a control character (NUL, ESC …): PyYAML gives a position only
        pos = exc.position
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise DecodeProblem(
            "yaml-syntax",
            f"control character U+{char:04X} is not allowed in YAML; "
            "the kubelet cannot parse this file and drops its pod at the next resync",
            line=line,
            column=col,
            hint="remove the character (a binary or corrupted file?)",
        ) from None
    except yaml.YAMLError as exc:  # pragma: no cover - other unmarked errors
        raise DecodeProblem("yaml-syntax", str(exc)) from None
    if first is None:
        return Decoded(None, {}, 0, tuple(notes), "yaml", encoding)
    extra = 0
    for node in later:
        if isinstance(node, yaml.ScalarNode) and node.tag == _PLAIN and node.value == "":
            extra += 1
            continue
        note = _problem(
            "multiple-documents",
            "file holds more than one YAML document: the kubelet runs the first and ignores the rest; "
            "staticpodd refuses the file",
            node,
            hint="put each Pod in its own file; other kinds do not belong in the manifest directory",
        )
        note.kubelet = "accepts"
        notes.append(note)
        break
    else:
        if later_error is not None:
            mark = getattr(later_error, "problem_mark", None)
            note = DecodeProblem(
                "multiple-documents",
                "file holds more than one YAML document (a later one does not even parse): the kubelet runs "
                "the first and ignores the rest; staticpodd refuses the file",
                line=mark.line + 1 if mark is not None else None,
                column=mark.column + 1 if mark is not None else None,
                hint="put each Pod in its own file; remove what follows the first document",
                kubelet="accepts",
            )
            notes.append(note)
    builder = _Builder(text, hid_boms=hid_boms)
    doc = builder.build(first, "")
    builder.positions.pop("", None)
    return Decoded(doc, builder.positions, extra, tuple(notes + builder.notes), "yaml", encoding)


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str) -> DecodeProblem:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    col = mark.column + 1 if mark is not None else None
    problem = exc.problem or "syntax error"
    msg = problem
    if exc.context:
        msg = f"{exc.context}: {problem}" if "cannot start any token" not in problem else problem
    if mark is not None:
        lines = text.split("\n")
        cur = lines[mark.line] if mark.line < len(lines) else ""
        # libyaml points at the tab; go-yaml says the same thing.
        if "\t" in cur[: len(cur) - len(cur.lstrip(" \t"))] or (mark.column < len(cur) and cur[mark.column] == "\t"):
            tab_col = cur.index("\t") + 1
            return DecodeProblem(
                "yaml-tab",
                f"found character that cannot start any token (a TAB in indentation at column {tab_col}); "
                "the kubelet cannot parse this file and drops its pod at the next resync",
                line=line,
                column=tab_col,
                hint="indent with spaces only",
            )
    return DecodeProblem(
        "yaml-syntax",
        f"{msg}; the kubelet cannot parse this file and drops its pod at the next resync",
        line=line,
        column=col,
        hint="fix the syntax at this position (a missing comma, quote, colon or bad indentation)",
    )


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

    Source: KUBELET.md "How a file is decoded"; pkg/kubelet/config/common.go
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

    Cheap: decoding only, no schema. Namespace defaults to ``"default"`` (KUBELET.md
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
