"""go-yaml v2's scalar resolution: what a plain (or explicitly tagged) YAML scalar means.

sigs.k8s.io/yaml decodes with gopkg.in/yaml.v2, whose resolver (resolve.go) reads YAML 1.1:
``yes``/``no``/``on``/``off``/``y``/``n`` are booleans, ``0777`` is octal, ``0x1F`` hex,
``1_000`` an int, timestamps stay strings. This module holds those rules (the tag names, the
word table, the number grammars) and how a float becomes a JSON map key; the composing and
building around them is :mod:`staticpodd.manifest.yamldecode`.
"""

from __future__ import annotations

import math
import re

from staticpodd.manifest.decoded import DecodeProblem

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

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
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


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
            if n is not None and _INT64_MIN <= n <= _UINT64_MAX:
                return _INT, n
        if _YAML_STYLE_FLOAT.match(plain):
            f = float(plain)
            if math.isinf(f):
                # strconv.ParseFloat fails with ErrRange: go-yaml v2 keeps the string
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


# the most significant digits a uint64 has in each base: a literal with more is out of range
_UINT64_DIGITS = {16: 16, 8: 22, 2: 64, 10: 20}


def _go_parse_int(plain: str) -> int | None:
    """The value of a ``_GO_INT`` literal, or None when it has more significant digits than any
    uint64 (``strconv.ParseInt``/``ParseUint`` fail with ErrRange: the scalar is not an int).

    The digits are counted before converting: a 5,000-digit decimal would otherwise raise
    ValueError in ``int()`` (Python's int-string conversion limit, sys.get_int_max_str_digits),
    and converting a 10 MiB one is quadratic.
    """
    sign = -1 if plain[0] == "-" else 1
    body = plain[1:] if plain[0] in "+-" else plain
    low = body.lower()
    if low.startswith(("0x", "0o", "0b")):
        base, digits = {"x": 16, "o": 8, "b": 2}[low[1]], body[2:]
    elif len(body) > 1 and body[0] == "0":
        base, digits = 8, body
    else:
        base, digits = 10, body
    if len(digits.lstrip("0")) > _UINT64_DIGITS[base]:
        return None
    return sign * int(digits, base)


def _explicit(tag: str, value: str, node: Any) -> Any:
    """A scalar with an explicit tag, as go-yaml v2 resolves it."""
    if tag == _BINARY:
        return _binary(value, node)
    if tag not in _RESOLVABLE:
        return value  # unknown/custom tags: kept as the string
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


def _binary(value: str, node: Any) -> str:
    """A ``!!binary`` scalar as go-yaml v2 gives it to sigs.k8s.io/yaml (decode.go ``scalar``):
    the base64 decoded by Go's ``base64.StdEncoding`` (``\r`` and ``\n`` skipped, padding
    required, any other byte refused: "!!binary value contains invalid base64 data"), as a string;
    bytes that are not UTF-8 become U+FFFD, as Go's JSON encoder writes them. Raises DecodeProblem."""
    import base64
    import binascii

    text = value.replace("\r", "").replace("\n", "")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, binascii.Error):
        raise _problem("yaml-syntax", "!!binary value contains invalid base64 data", node) from None
    return raw.decode("utf-8", errors="replace")


def _problem(code: str, message: str, node: Any, hint: str | None = None, field: str | None = None) -> DecodeProblem:
    m = node.start_mark
    return DecodeProblem(code, message, line=m.line + 1, column=m.column + 1, hint=hint, field=field)


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
