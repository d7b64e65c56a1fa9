"""Text for a terminal: control characters from file names or manifests shown escaped."""

from __future__ import annotations

_CONTROL = {c: f"\\x{c:02x}" for c in range(32) if c not in (9, 10)}
_CONTROL[127] = "\\x7f"


def safe(text: str) -> str:
    """``text`` with control characters (ESC, CR, NUL …; not tab or newline) escaped as ``\\xNN``,
    so a hostile file name cannot rewrite the operator's screen. JSON output needs no such care."""
    return text.translate(_CONTROL)


def printable_name(value: str) -> str:
    """``value`` made valid UTF-8: bytes of a non-UTF-8 file name (surrogate-escaped by
    ``os.listdir``) are shown as ``\\xNN``, so it can be printed, logged or put in JSON."""
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that did not come from a byte
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(obj: object) -> object:
    """``obj`` (dicts, lists, str …) with every str made valid UTF-8 by :func:`printable_name`,
    so ``json.dumps`` never writes lone-surrogate escapes (``"\\udcff"``) that strict JSON
    parsers reject. Returns the same object when nothing needed changing."""
    if isinstance(obj, str):
        return printable_name(obj)
    if isinstance(obj, dict):
        return {json_safe(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
