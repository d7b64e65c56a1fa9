"""PyYAML's safe loader with integers bounded: for the files staticpodd reads with PyYAML (its
configuration, the kubelet's configuration, a manifest's pod key) rather than with the
kubelet's own rules (:mod:`staticpodd.manifest.yamldecode`).

PyYAML builds an int with ``int(text)``, which raises ValueError (not a YAMLError) for more
than ``sys.get_int_max_str_digits()`` digits (4300 by default): one 5,000-digit number ended
every verb in a traceback. Here such an integer is a ``yaml.constructor.ConstructorError``, a
YAMLError with the line and column, which every caller already reports.
"""

from __future__ import annotations

import yaml

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: digits (signs, underscores and a base prefix aside) an integer may have: far above any value
#: staticpodd or the kubelet takes, far below what makes int() slow or refuse
MAX_INT_DIGITS = 100


def _bounded_int(loader: Any, node: Any) -> Any:
    digits = sum(c.isalnum() for c in str(node.value))
    if digits > MAX_INT_DIGITS + 2:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {digits} digits is too large (at most {MAX_INT_DIGITS})", node.start_mark,
        )
    return yaml.SafeLoader.construct_yaml_int(loader, node)


class SafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose integers have at most MAX_INT_DIGITS digits (ConstructorError)."""


SafeLoader.add_constructor("tag:yaml.org,2002:int", _bounded_int)

_C = getattr(yaml, "CSafeLoader", None)
if _C is not None:

    class CSafeLoader(_C):  # type: ignore[valid-type,misc]
        """libyaml's safe loader, integers bounded as in :class:`SafeLoader`."""

    CSafeLoader.add_constructor("tag:yaml.org,2002:int", _bounded_int)
    FastLoader: Any = CSafeLoader
else:  # pragma: no cover - PyYAML without libyaml
    FastLoader = SafeLoader


def safe_load(stream: Any) -> Any:
    """``yaml.safe_load`` with bounded integers. Raises yaml.YAMLError (ConstructorError for an
    integer of more than MAX_INT_DIGITS digits, with its position)."""
    return yaml.load(stream, Loader=SafeLoader)  # noqa: S506 - a SafeLoader subclass
