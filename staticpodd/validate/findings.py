"""The Finding record every validation rule returns, and the helper rules use to make one.

Two levels (the two levels, not one; docs/kubelet-contract.md "What the kubelet refuses"): every
finding says what *the kubelet itself* does with the file (:attr:`Finding.kubelet`), apart from
whether *staticpodd* refuses to install it (:attr:`Finding.severity` ``"error"``). The verdict
for a whole file is :func:`staticpodd.validate.verdict.verdict`.
"""

from __future__ import annotations

from staticpodd.manifest.positions import locate

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

SEVERITIES = ("error", "warning", "info")

KUBELET_REFUSES = "refuses"
"""The kubelet refuses the file: it cannot decode or validate it, and drops the pod it ran from it
(at the next relist; docs/kubelet-contract.md "What a broken file does to a running pod")."""
KUBELET_FAILS_ADMISSION = "fails-admission"
"""The kubelet reads the file but the pod fails admission on the node (phase Failed, never runs:
``UnexpectedAdmissionError`` for a static pod, host port taken). docs/kubelet-contract.md "What the kubelet refuses"."""
KUBELET_ACCEPTS = "accepts"
"""The kubelet runs the file as written: the finding is a warning, or staticpodd's own strictness."""
KUBELET_LEVELS = (KUBELET_REFUSES, KUBELET_FAILS_ADMISSION, KUBELET_ACCEPTS)


class Finding(FrozenRecord):
    """One thing the validator found in one file (or directory).

    ``code``: stable kebab-case identifier (part of the ``--json`` contract).
    ``severity``: ``"error"`` (staticpodd refuses to install it: apply/validate fail),
    ``"warning"``, ``"info"``.
    ``path``: the file (or directory) as given. ``line``/``column``: 1-based or None.
    ``field``: field path such as ``spec.containers[0].livenessProbe.timeoutSeconds`` or None.
    ``message``: what the kubelet will do. ``hint``: what to do about it, or None.
    ``kubelet``: what the kubelet itself does because of this finding, one of
    :data:`KUBELET_LEVELS`: ``"refuses"`` (drops the pod), ``"fails-admission"`` (reads it, the
    pod fails admission) or ``"accepts"`` (runs it: a warning, or an error that is only
    staticpodd's strictness, see :data:`staticpodd.validate.codes.STRICTNESS`). None (the
    default) is filled from the code's usual level (:data:`staticpodd.validate.codes.KUBELET`);
    warnings and infos are always ``"accepts"``.
    """

    code: Final[str]
    severity: Final[str]
    path: Final[str]
    line: Final[int | None]
    column: Final[int | None]
    field: Final[str | None]
    message: Final[str]
    hint: Final[str | None]
    kubelet: Final[str | None]

    def __init__(self, code: str, severity: str, path: str, line: int | None, column: int | None, field: str | None,
                 message: str, hint: str | None = None, kubelet: str | None = None) -> None:
        self.code = code
        self.severity = severity
        self.path = path
        self.line = line
        self.column = column
        self.field = field
        self.message = message
        self.hint = hint
        self.kubelet = kubelet
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.severity != "error":
            level = KUBELET_ACCEPTS
        elif self.kubelet is not None:
            level = self.kubelet
        else:
            from staticpodd.validate.codes import kubelet_level

            level = kubelet_level(self.code)
        if level not in KUBELET_LEVELS:
            raise ValueError(f"Finding.kubelet must be one of {KUBELET_LEVELS}, not {level!r}")
        object.__setattr__(self, "kubelet", level)

    @property
    def kubelet_refuses(self) -> bool:
        """True when the kubelet will not run the pod because of this finding (refused file or
        failed admission): the only findings that may drive ``on_invalid: restore``."""
        return self.kubelet != KUBELET_ACCEPTS

    @property
    def strictness(self) -> bool:
        """True for an error only staticpodd makes: the kubelet would run the file."""
        return self.severity == "error" and self.kubelet == KUBELET_ACCEPTS

    def to_dict(self) -> dict[str, Any]:
        """The finding as a JSON object with every key present (None -> null).

        ``"kubelet"`` is ``"refuses"`` / ``"fails-admission"`` / ``"accepts"`` (see the class).
        """
        return {
            "code": self.code,
            "severity": self.severity,
            "kubelet": self.kubelet,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "message": self.message,
            "hint": self.hint,
        }

    def level_tag(self) -> str:
        """The short text that tells the two levels apart, for errors only ("" otherwise):
        ``(the kubelet refuses it)``, ``(the pod fails admission)``, or
        ``(staticpodd's own rule: the kubelet would run it)``."""
        if self.severity != "error":
            return ""
        if self.kubelet == KUBELET_REFUSES:
            return " (the kubelet refuses it)"
        if self.kubelet == KUBELET_FAILS_ADMISSION:
            return " (the kubelet reads it, the pod fails admission)"
        return " (staticpodd's own rule: the kubelet would run it)"

    def format(self) -> str:
        """Compiler-style text: ``path:line:col: error[code] (level): message [field]`` plus a
        hint line; ``(level)`` is :meth:`level_tag` (errors only)."""
        loc = self.path
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        text = f"{loc}: {self.severity}[{self.code}]{self.level_tag()}: {self.message}"
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
    kubelet: str | None = None,
) -> Finding:
    """A Finding located through ``positions`` (field path -> (line, column))."""
    line, column = locate(positions or {}, field) if field else (None, None)
    return Finding(code, severity, path, line, column, field, message, hint, kubelet)
