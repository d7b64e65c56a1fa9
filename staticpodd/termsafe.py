"""Text for a terminal: control characters from file names or manifests shown escaped."""

from __future__ import annotations

_CONTROL = {c: f"\\x{c:02x}" for c in range(32) if c not in (9, 10)}
_CONTROL[127] = "\\x7f"


def safe(text: str) -> str:
    """``text`` with control characters (ESC, CR, NUL …; not tab or newline) escaped as ``\\xNN``,
    so a hostile file name cannot rewrite the operator's screen. JSON output needs no such care."""
    return text.translate(_CONTROL)
