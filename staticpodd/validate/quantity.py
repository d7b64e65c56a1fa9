"""Kubernetes resource quantities (``100m``, ``1.5Gi``, ``2e3``) as exact fractions.

Source: k8s.io/apimachinery/pkg/api/resource/quantity.go (``ParseQuantity``): a signed
decimal number followed by a binary-SI suffix (Ki Mi Gi Ti Pi Ei), a decimal-SI suffix
(n u m "" k M G T P E) or a decimal exponent (``e3``/``E3``). JSON numbers are accepted too.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([a-zA-Z]*|[eE][-+]?[0-9]+)$")
_SUFFIX = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}


def parse_quantity(value: Any) -> Fraction | None:
    """The exact value of a quantity string or JSON number, or None when it does not parse.

    ``"100m"`` -> 1/10, ``"1Gi"`` -> 1073741824, ``"2e3"`` -> 2000, ``4`` -> 4.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        # the number as written, not its binary float: sigs.k8s.io/yaml hands the JSON text "0.1"
        # to resource.Quantity, which parses it exactly (100m), where Fraction(0.1) is 0.1000…0555
        # and its ceiling in millicores 101m; repr() is Python's shortest text for the same float
        return Fraction(repr(value))
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.strip() if value.strip() == value else "\0")
    if not m:
        return None
    number, suffix = m.groups()
    try:
        base = Fraction(number)
    except (ValueError, ZeroDivisionError):
        return None
    if suffix in _SUFFIX:
        return base * _SUFFIX[suffix]
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        exp = int(suffix[1:])
        if abs(exp) > 400:
            return None
        return base * (Fraction(10) ** exp)
    return None


def cpu_millis(q: Fraction) -> int:
    """CPU quantity in millicores, rounded up as the scheduler does (``MilliValue``)."""
    return math.ceil(q * 1000)


def memory_bytes(q: Fraction) -> int:
    """Memory quantity in bytes, rounded up (``Value``)."""
    return math.ceil(q)
