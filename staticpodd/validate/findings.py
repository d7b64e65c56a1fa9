"""The Finding record every validation rule returns, and the helper rules use to make one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from staticpodd.manifest import locate

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One thing the validator found in one file (or directory).

    ``code``: stable kebab-case identifier (part of the ``--json`` contract).
    ``severity``: ``"error"`` (the kubelet will refuse or misrun it), ``"warning"``, ``"info"``.
    ``path``: the file (or directory) as given. ``line``/``column``: 1-based or None.
    ``field``: field path such as ``spec.containers[0].livenessProbe.timeoutSeconds`` or None.
    ``message``: what the kubelet will do. ``hint``: what to do about it, or None.
    """

    code: str
    severity: str
    path: str
    line: int | None
    column: int | None
    field: str | None
    message: str
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The finding as a JSON object with every key present (None -> null)."""
        return {
            "code": self.code,
            "severity": self.severity,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "message": self.message,
            "hint": self.hint,
        }

    def format(self) -> str:
        """Compiler-style text: ``path:line:col: error[code]: message [field]`` plus a hint line."""
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        text = f"{loc}: {self.severity}[{self.code}]: {self.message}"
        if self.field:
            text += f" [{self.field}]"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


def make(
    code: str,
    severity: str,
    path: str,
    positions: dict | None,
    field: str | None,
    message: str,
    hint: str | None = None,
) -> Finding:
    """A Finding located through ``positions`` (field path -> (line, column))."""
    line, column = locate(positions or {}, field) if field else (None, None)
    return Finding(code, severity, path, line, column, field, message, hint)
