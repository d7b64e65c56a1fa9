"""The read verbs alone (status, history, show, diff): the core and the query family.

A read verb never changes the directory or the store's history, never takes the lock and never
runs recovery, so it has no use for the gate, drift adoption, swaps or parks; importing them cost
every ``staticpodctl status`` about a tenth of its start-up.
"""

from __future__ import annotations

from .core import EngineCore
from .query import QueryVerbs


class Reader(QueryVerbs, EngineCore):
    """:class:`~staticpodd.engine.Engine`'s read-only verbs over one layout, built the same way."""
