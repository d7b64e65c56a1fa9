"""Step 1 of the kubelet's decoding for YAML: bytes -> the JSON-compatible document, with positions.

``sigs.k8s.io/yaml.YAMLToJSON``: go-yaml v2 decodes the *first* YAML document into
``interface{}`` with YAML 1.1 scalar resolution (:mod:`staticpodd.manifest.yamlresolve`), then every map
key is turned into a JSON string (``true``, ``1``, ...), and the result is marshalled as JSON
(docs/kubelet-contract.md "How a file is decoded"). This module reproduces that on top of libyaml (PyYAML's C
parser: go-yaml v2 is a port of libyaml, so the syntax verdicts agree) with go-yaml v2's alias
limits, its reading of byte order marks and its syntax messages, and records where each field
came from. :func:`staticpodd.manifest.decoding.decode` chooses between it and :mod:`staticpodd.manifest.jsondecode`.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import yaml

from staticpodd.manifest.decoded import Decoded, DecodeProblem
from staticpodd.manifest.positions import join_path
from staticpodd.manifest.yamlresolve import (
    _INT64_MAX,
    _MAP,
    _PLAIN,
    _SEQ,
    _STR,
    _explicit,
    _go_float_key,
    _problem,
    resolve_plain,
)

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

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
    follows (docs/kubelet-contract.md "How a file is decoded": a multi-document file runs its first document).
    """
    try:
        return _compose_with(_CComposer if _CComposer is not None else _PyComposer, text)
    except yaml.composer.ComposerError as exc:
        if "found duplicate anchor" not in str(exc) or _CComposer is None:
            raise
    except yaml.MarkedYAMLError as exc:
        if "exceeded maximum nesting depth" in str(exc):
            raise _too_deep_for_us(exc) from None
        raise
    return _compose_with(_PyComposer, text)


def _too_deep_for_us(exc: yaml.MarkedYAMLError) -> DecodeProblem:
    """libyaml stops at 1000 nested levels; go-yaml v2 reads up to 10000 (``max_flow_level``,
    ``max_indents``) and encoding/json up to 10000 (checked with the kubelet's own decode step,
    tests/validate/y2j: flow nesting of 9999 runs). PyYAML's pure-Python scanner could go deeper
    but is quadratic in the depth (40 s for 9999 levels), so such a file is refused as
    staticpodd's own limit, ``kubelet="accepts"``: the daemon never restores over it as a file
    the kubelet refuses, and the gate still keeps it out."""
    mark = exc.problem_mark
    return DecodeProblem(
        "yaml-syntax",
        "nested more than 1000 levels deep: staticpodd cannot check it (the kubelet reads up to "
        "10000 levels and runs it if it is otherwise valid); refused by staticpodd",
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
        hint="flatten the document",
        kubelet="accepts",
    )


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
        "!", which ``resolve`` does not know, so the value stays the string as written (as
        go-yaml v2 does: resolve.go resolvableTag). A plain scalar never starts with ``!``.
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
        # The kubelet accepts it (docs/kubelet-contract.md "How a file is decoded"): with keys of one YAML type the
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


_UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")


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


def decode_yaml(data: bytes, notes: list[DecodeProblem]) -> Decoded:
    """The YAML half of :func:`staticpodd.manifest.decoding.decode` for ``data`` that is not JSON-prefixed;
    ``notes``: the size notes found so far (kept first). Raises :class:`DecodeProblem` for what the
    kubelet refuses (see ``decode``)."""
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
