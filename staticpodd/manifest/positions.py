"""Field paths and source positions: how a finding names ``spec.containers[0].image`` and its
``file:line:column``.

A decoder (YAML or JSON) records, for every field it builds, the 1-based (line, column) where it
was written, keyed by a field path built with :func:`join_path`; a rule that finds something
wrong with a field looks its place up with :func:`locate`. No imports from the rest of
staticpodd: both the decoders and ``staticpodd.validate`` stand on this module.
"""

from __future__ import annotations

import re

_NAME_KEY = re.compile(r"[^\W\d][\w-]*\Z")


def locate(positions: dict, field_path: str | None) -> tuple[int | None, int | None]:
    """(line, column) for ``field_path`` from a positions map, walking up to the nearest parent."""
    p = field_path
    while p:
        if p in positions:
            return positions[p]
        cut = max(p.rfind("."), p.rfind("["))
        if cut <= 0:
            break
        p = p[:cut]
    if p and p in positions:
        return positions[p]
    return (None, None)


def join_path(parent: str, key: str) -> str:
    """Field path of ``key`` under ``parent``: ``a.b``, or ``a["x.y/z"]`` for keys that are not names."""
    if _NAME_KEY.match(key):
        return f"{parent}.{key}" if parent else key
    return f'{parent}["{key}"]'
