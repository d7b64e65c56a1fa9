"""Strict JSON as the kubelet reads a manifest whose first non-space byte is ``{``.

apimachinery ``util/yaml.ToJSON`` hands such bytes *as is* to the JSON serializer
(``runtime.Decode``: ``json.Unmarshal`` for apiVersion/kind, then sigs.k8s.io/json into the
typed Pod), so none of YAML's leniency applies: a trailing comma, a ``#`` comment, an unquoted
key or a single-quoted string is a syntax error ("couldn't get version/kind; json parse error:
invalid character ..."), and a number written with a fraction or exponent (``3e1``, ``30.0``)
cannot fill an integer field. docs/kubelet-contract.md "How a file is decoded" (seen on a real kubelet
v1.34.2).

This module reproduces Go's ``encoding/json`` scanner: the same grammar, the same error texts
(scanner.go ``quoteChar`` and its "looking for beginning of value" family), duplicate keys
accepted with the last value winning, ``\\u`` escapes of lone surrogates and invalid UTF-8 bytes
inside strings replaced by U+FFFD (decode.go ``unquote``). It also records where each field is,
like the YAML path, so that findings name ``file:line:column``. Pure; no I/O.
"""

from __future__ import annotations

import bisect
import re

from staticpodd.manifest.decoded import DecodeProblem
from staticpodd.manifest.positions import join_path

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_PLAIN_CHARS = re.compile(r'[^"\\\x00-\x1f\udc80-\udcff]*')
_INT_PART = re.compile(r"-?(?:0|[1-9][0-9]*)")
_DIGITS = re.compile(r"[0-9]+")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_MAX_DEPTH = 10000  # encoding/json scanner.go maxNestingDepth


# Longer integer literals become JSONNumber: int() refuses more digits than
# sys.get_int_max_str_digits() (4300 by default) with ValueError, and is quadratic below that.
_MAX_INT_DIGITS = 1000


class JSONNumber(float):
    """A JSON number written with a fraction or an exponent (``3e1``, ``30.0``, ``1e400``).

    It is a float (``30.0``, or ``inf`` when out of range), and ``literal`` keeps the text: the
    kubelet's decoder refuses it for an integer field (``json: cannot unmarshal number 3e1 into
    Go struct field ... of type int32``), where YAML would have turned ``3e1`` into 30.
    """

    literal: str

    def __new__(cls, literal: str) -> JSONNumber:
        self = super().__new__(cls, float(literal))
        self.literal = literal
        return self


def _quote_char(c: str) -> str:
    """encoding/json scanner.go quoteChar for the byte that starts ``c``."""
    if 0xDC80 <= ord(c) <= 0xDCFF:  # an invalid UTF-8 byte (surrogateescape)
        b = ord(c) - 0xDC00
    else:
        b = c.encode("utf-8")[0]
    if b == ord("'"):
        return "'\\''"
    if b == ord('"'):
        return "'\"'"
    ch = chr(b)
    if ch == "\n":
        return "'\\n'"
    if ch == "\r":
        return "'\\r'"
    if ch == "\t":
        return "'\\t'"
    if ch == "\b":
        return "'\\b'"
    if ch == "\f":
        return "'\\f'"
    if ch == "\v":
        return "'\\v'"
    if ch == "\a":
        return "'\\a'"
    if b < 0x20 or b == 0x7F:
        return f"'\\x{b:02x}'"
    return f"'{ch}'"


_HINTS = {
    ",": "remove the trailing comma",
    "#": "JSON has no comments: remove it",
    "'": "JSON strings take double quotes",
}


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.positions: dict[str, tuple[int, int]] = {}
        self.notes: list[DecodeProblem] = []
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions and errors
    def where(self, i: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.line_starts, i) - 1
        return k + 1, i - self.line_starts[k] + 1

    def fail(self, i: int, context: str) -> DecodeProblem:
        if i >= self.n:
            what = "unexpected end of JSON input"
            line, col = self.where(self.n)
            hint = "the JSON is cut short: a closing '}' or ']' is missing"
        else:
            c = self.s[i]
            what = f"invalid character {_quote_char(c)} {context}"
            line, col = self.where(i)
            hint = None
            prev = self.s[:i].rstrip(" \t\r\n")
            if c in "}]" and prev.endswith(","):
                hint = _HINTS[","]
                line, col = self.where(len(prev) - 1)
            elif c in _HINTS and c != ",":
                hint = _HINTS[c]
            elif context == "after top-level value":
                hint = "remove what follows the closing '}'"
            elif context == "looking for beginning of object key string":
                hint = "JSON keys take double quotes"
            elif "after" in context:
                hint = "a ',' is missing before this, or a value is written twice"
        return DecodeProblem(
            "json-syntax",
            f"couldn't get version/kind; json parse error: {what}: the file starts with '{{', so the kubelet "
            "reads it as strict JSON, refuses it and drops its pod at the next relist",
            line=line,
            column=col,
            hint=(hint + "; " if hint else "")
            + "or, if YAML was meant, put a '# comment' line first so the kubelet reads it as YAML",
            kubelet="refuses",
        )

    def too_deep(self, i: int) -> DecodeProblem:
        line, col = self.where(i)
        return DecodeProblem(
            "json-syntax",
            "json parse error: exceeded max depth (10000): the kubelet refuses the file",
            line=line,
            column=col,
            kubelet="refuses",
        )

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()  # type: ignore[union-attr]

    # -- grammar
    def value(self, i: int, path: str, depth: int) -> tuple[Any, int]:
        if i >= self.n:
            raise self.fail(i, "")
        c = self.s[i]
        if c == "{":
            return self.obj(i, path, depth + 1)
        if c == "[":
            return self.arr(i, path, depth + 1)
        if c == '"':
            return self.string(i)
        if c == "-" or "0" <= c <= "9":
            return self.number(i)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if c == word[0]:
                for k in range(1, len(word)):
                    if i + k >= self.n:
                        raise self.fail(self.n, "")
                    if self.s[i + k] != word[k]:
                        raise self.fail(i + k, f"in literal {word} (expecting {_quote_char(word[k])})")
                return val, i + len(word)
        raise self.fail(i, "looking for beginning of value")

    def obj(self, i: int, path: str, depth: int) -> tuple[dict, int]:
        if depth > _MAX_DEPTH:
            raise self.too_deep(i)
        out: dict[str, Any] = {}
        seen: dict[str, int] = {}
        i = self.ws(i + 1)
        if i < self.n and self.s[i] == "}":
            return out, i + 1
        while True:
            if i >= self.n or self.s[i] != '"':
                raise self.fail(i, "looking for beginning of object key string")
            kstart = i
            key, i = self.string(i)
            i = self.ws(i)
            if i >= self.n or self.s[i] != ":":
                raise self.fail(i, "after object key")
            i = self.ws(i + 1)
            sub = join_path(path, key)
            if key in seen:
                line, col = self.where(kstart)
                self.notes.append(
                    DecodeProblem(
                        "yaml-duplicate-key",
                        f'key "{key}" already given at line {seen[key]}: the kubelet accepts the file and uses '
                        "this later value; staticpodd refuses it because nobody can tell which value was meant",
                        line=line,
                        column=col,
                        hint="remove one of the two",
                        field=sub,
                        kubelet="accepts",
                    )
                )
            seen[key] = self.where(kstart)[0]
            vstart = i
            if i < self.n and self.s[i] in "{[":
                self.positions[sub] = self.where(kstart)
            else:
                self.positions[sub] = self.where(vstart)
            out[key], i = self.value(i, sub, depth)
            i = self.ws(i)
            if i < self.n and self.s[i] == ",":
                i = self.ws(i + 1)
                continue
            if i < self.n and self.s[i] == "}":
                return out, i + 1
            raise self.fail(i, "after object key:value pair")

    def arr(self, i: int, path: str, depth: int) -> tuple[list, int]:
        if depth > _MAX_DEPTH:
            raise self.too_deep(i)
        out: list[Any] = []
        i = self.ws(i + 1)
        if i < self.n and self.s[i] == "]":
            return out, i + 1
        while True:
            sub = f"{path}[{len(out)}]"
            self.positions.setdefault(sub, self.where(i))
            item, i = self.value(i, sub, depth)
            out.append(item)
            i = self.ws(i)
            if i < self.n and self.s[i] == ",":
                i = self.ws(i + 1)
                continue
            if i < self.n and self.s[i] == "]":
                return out, i + 1
            raise self.fail(i, "after array element")

    def string(self, i: int) -> tuple[str, int]:
        parts: list[str] = []
        i += 1
        s = self.s
        while True:
            m = _PLAIN_CHARS.match(s, i)
            assert m is not None
            parts.append(m.group())
            i = m.end()
            if i >= self.n:
                raise self.fail(i, "")
            c = s[i]
            if c == '"':
                return "".join(parts), i + 1
            if c == "\\":
                if i + 1 >= self.n:
                    raise self.fail(self.n, "")
                e = s[i + 1]
                if e in _ESCAPES:
                    parts.append(_ESCAPES[e])
                    i += 2
                    continue
                if e != "u":
                    raise self.fail(i + 1, "in string escape code")
                cp, i = self._u4(i + 2)
                if 0xD800 <= cp < 0xE000:
                    # utf16.DecodeRune with the next \uXXXX, else U+FFFD (decode.go unquote)
                    if 0xD800 <= cp < 0xDC00 and s.startswith("\\u", i) and _HEX4.match(s, i + 2):
                        low = int(s[i + 2 : i + 6], 16)
                        if 0xDC00 <= low < 0xE000:
                            parts.append(chr(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)))
                            i += 6
                            continue
                    parts.append("\ufffd")
                    continue
                parts.append(chr(cp))
                continue
            if 0xDC80 <= ord(c) <= 0xDCFF:  # invalid UTF-8 byte: Go replaces it with U+FFFD
                line, col = self.where(i)
                if not any(n.code == "not-utf8" for n in self.notes):
                    self.notes.append(
                        DecodeProblem(
                            "not-utf8",
                            f"byte 0x{ord(c) - 0xDC00:02x} in a string is not valid UTF-8: the kubelet's JSON "
                            "decoder replaces it with U+FFFD and runs the pod; staticpodd refuses the file",
                            line=line,
                            column=col,
                            hint="save the file as UTF-8",
                            kubelet="accepts",
                        )
                    )
                parts.append("\ufffd")
                i += 1
                continue
            raise self.fail(i, "in string literal")  # a control character

    def _u4(self, i: int) -> tuple[int, int]:
        for k in range(4):
            if i + k >= self.n:
                raise self.fail(self.n, "")
            if self.s[i + k] not in "0123456789abcdefABCDEF":
                raise self.fail(i + k, "in \\u hexadecimal character escape")
        return int(self.s[i : i + 4], 16), i + 4

    def number(self, i: int) -> tuple[Any, int]:
        s = self.s
        m = _INT_PART.match(s, i)
        if m is None:  # a lone '-'
            raise self.fail(i + 1, "in numeric literal")
        j = m.end()
        is_float = False
        if j < self.n and s[j] == ".":
            d = _DIGITS.match(s, j + 1)
            if d is None:
                raise self.fail(j + 1, "after decimal point in numeric literal")
            j = d.end()
            is_float = True
        if j < self.n and s[j] in "eE":
            k = j + 1
            if k < self.n and s[k] in "+-":
                k += 1
            d = _DIGITS.match(s, k)
            if d is None:
                raise self.fail(k, "in exponent of numeric literal")
            j = d.end()
            is_float = True
        text = s[i:j]
        if is_float or j - i > _MAX_INT_DIGITS:
            # an integer too long for int() (Python's int-string conversion limit) is out of every
            # Go integer type's range: kept as a JSONNumber (its literal; +-inf as a float)
            return JSONNumber(text), j
        return int(text), j


def _deepest(text: str, limit: int = _MAX_DEPTH) -> int | None:
    """Index of the first ``[``/``{`` (outside strings) nested deeper than ``limit``, Go's
    encoding/json ``maxNestingDepth``, or None; iterative, for what recursion cannot reach."""
    depth, in_str, esc = 0, False, False
    for i, c in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > limit:
                return i
        elif c in "]}":
            depth -= 1
    return None


def decode_json(data: bytes) -> tuple[Any, dict, list[DecodeProblem]]:
    """Decode ``data`` (its first non-space byte is ``{``) as the kubelet's JSON decoder does.

    Returns ``(document, positions, notes)``: the document as Python values (numbers with a
    fraction or exponent are :class:`JSONNumber`), field path -> (line, column) (1-based,
    in characters), and what the kubelet accepts but staticpodd refuses (duplicate keys, invalid
    UTF-8 inside strings). Raises :class:`~staticpodd.manifest.decoded.DecodeProblem` ``json-syntax``
    (the kubelet refuses the file) with Go's error text and the position of the offending
    character. Source: apimachinery util/yaml ToJSON, runtime/serializer/json (Interpret:
    "couldn't get version/kind; json parse error"); encoding/json scanner.go.
    """
    text = data.decode("utf-8", errors="surrogateescape")
    p = _Parser(text)
    i = p.ws(0)
    try:
        doc, i = p.value(i, "", 0)
    except RecursionError:
        deepest = _deepest(text)
        if deepest is not None:  # past Go's limit: the kubelet refuses it too
            raise p.too_deep(deepest) from None
        raise DecodeProblem(
            "json-syntax",
            "the JSON is nested too deeply for staticpodd to check; refused",
            kubelet="accepts",
        ) from None
    i = p.ws(i)
    if i < p.n:
        raise p.fail(i, "after top-level value")
    p.positions.pop("", None)
    return doc, p.positions, p.notes
