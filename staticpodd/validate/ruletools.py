"""Small helpers every layer-4 rule module uses (:mod:`.podrules`, :mod:`.containerrules`).

``REFUSED``: the phrase each of their error messages ends with; ``_int``: a JSON integer that is
not a boolean; ``_suggest``: the hint for a value outside an enum. Moved out of podrules.py so
that the container rules can live in their own module.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, TypeGuard


REFUSED = "the kubelet refuses the pod"


def _int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _suggest(value: str, allowed: tuple[str, ...]) -> str:
    for a in allowed:
        if a.lower() == value.lower():
            return f"values are case-sensitive: {a}"
    return f"use one of {', '.join(allowed)}"
