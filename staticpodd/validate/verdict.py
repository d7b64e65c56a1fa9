"""The verdict on one file at both levels: does the kubelet run it, and does staticpodd install it?

Two levels, not one: what the kubelet refuses (it drops the pod: parse errors, not a
v1 Pod, no name, API references from v1.34 ...) and what only staticpodd refuses (its own
strictness: duplicate keys, more than one document ...) are told apart everywhere. ``apply`` and
``validate`` refuse both (exit codes unchanged), but only a finding the kubelet refuses may drive
``on_invalid: restore`` or a message saying "the kubelet drops its pod".

Works on :class:`~staticpodd.validate.findings.Finding` objects and on their ``to_dict()`` form
(the daemon and the journal pass dicts), so it needs nothing but this module.
"""

from __future__ import annotations

from collections.abc import Iterable

from staticpodd.validate.findings import KUBELET_ACCEPTS, KUBELET_FAILS_ADMISSION, KUBELET_REFUSES

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final


def _get(f: Any, key: str) -> Any:
    return f.get(key) if isinstance(f, dict) else getattr(f, key, None)


def kubelet_of(finding: Any) -> str:
    """The kubelet level of one finding (object or dict): ``"refuses"``, ``"fails-admission"`` or
    ``"accepts"``. A dict without ``"kubelet"`` (an older producer) is judged by its code."""
    if _get(finding, "severity") != "error":
        return KUBELET_ACCEPTS
    level = _get(finding, "kubelet")
    if level in (KUBELET_REFUSES, KUBELET_FAILS_ADMISSION, KUBELET_ACCEPTS):
        return str(level)
    from staticpodd.validate.codes import kubelet_level

    return kubelet_level(str(_get(finding, "code") or ""))


def kubelet_refused(findings: Iterable[Any]) -> list[Any]:
    """The findings because of which the kubelet will not run the pod (refused file or failed
    admission), in order. Empty when the kubelet runs the file as written."""
    return [f for f in findings if kubelet_of(f) != KUBELET_ACCEPTS]


def kubelet_refuses(findings: Iterable[Any]) -> bool:
    """True when the kubelet will not run this file's pod (docs/kubelet-contract.md "What the kubelet refuses").

    The daemon's ``on_invalid: restore`` gate: only such a file may be restored over, and only
    for it may a message say "the kubelet drops its pod".
    """
    return bool(kubelet_refused(findings))


def strictness_only(findings: Iterable[Any]) -> list[Any]:
    """The errors only staticpodd makes (the kubelet would run the file despite them)."""
    return [f for f in findings if _get(f, "severity") == "error" and kubelet_of(f) == KUBELET_ACCEPTS]


class Verdict(FrozenRecord):
    """Both levels for one file.

    ``kubelet``: ``"refuses"`` (the file is refused: the pod is dropped), ``"fails-admission"``
    (read, the pod fails admission and never runs) or ``"accepts"`` (it runs). When several
    findings disagree the worst wins (refuses > fails-admission > accepts).
    ``staticpodd``: ``"refuses"`` (an error: apply/validate fail) or ``"accepts"``.
    ``reasons``: codes of the findings behind ``kubelet`` (empty when it accepts);
    ``strictness``: codes of the errors the kubelet would not make.
    """

    kubelet: Final[str]
    staticpodd: Final[str]
    reasons: Final[tuple[str, ...]]
    strictness: Final[tuple[str, ...]]

    def __init__(self, kubelet: str, staticpodd: str, reasons: tuple[str, ...] = (), strictness: tuple[str,
                 ...] = ()) -> None:
        self.kubelet = kubelet
        self.staticpodd = staticpodd
        self.reasons = reasons
        self.strictness = strictness

    @property
    def kubelet_runs(self) -> bool:
        """True when the kubelet would run this file's pod."""
        return self.kubelet == KUBELET_ACCEPTS

    def to_dict(self) -> dict[str, Any]:
        """``{"kubelet", "staticpodd", "kubelet_runs", "reasons", "strictness"}`` for ``--json``."""
        return {
            "kubelet": self.kubelet,
            "staticpodd": self.staticpodd,
            "kubelet_runs": self.kubelet_runs,
            "reasons": list(self.reasons),
            "strictness": list(self.strictness),
        }

    def sentence(self) -> str:
        """One line for people: what the kubelet does, and whether staticpodd agrees."""
        if self.kubelet == KUBELET_REFUSES:
            return "the kubelet refuses it (it drops the pod)"
        if self.kubelet == KUBELET_FAILS_ADMISSION:
            return "the kubelet reads it but the pod fails admission (it never runs)"
        if self.staticpodd == "refuses":
            return (
                "the kubelet would run it; staticpodd refuses it by its own rules ("
                + ", ".join(self.strictness)
                + ")"
            )
        return "the kubelet runs it"


def verdict(findings: Iterable[Any]) -> Verdict:
    """The :class:`Verdict` for the findings of one file (objects or dicts)."""
    items = list(findings)
    refused = kubelet_refused(items)
    levels = {kubelet_of(f) for f in refused}
    kubelet = (
        KUBELET_REFUSES
        if KUBELET_REFUSES in levels
        else KUBELET_FAILS_ADMISSION
        if KUBELET_FAILS_ADMISSION in levels
        else KUBELET_ACCEPTS
    )
    errors = [f for f in items if _get(f, "severity") == "error"]
    return Verdict(
        kubelet=kubelet,
        staticpodd="refuses" if errors else "accepts",
        reasons=tuple(dict.fromkeys(str(_get(f, "code")) for f in refused)),
        strictness=tuple(dict.fromkeys(str(_get(f, "code")) for f in strictness_only(items))),
    )
