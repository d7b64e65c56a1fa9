"""What the alerting counters count, read from the version store's rows.

The ``staticpodd_*_total`` metrics are counts of rows in ``versions`` and ``events``, so they
survive a restart and include what ``staticpodctl`` did. Retention (:mod:`staticpodd.store.retention`)
deletes such rows; a counter must never go down (Prometheus reads a decrease as a reset), so
before a prune deletes rows it adds their tally to offsets kept in the store's ``meta`` table
(keys ``tally:<counter>``, and ``tally-last:<timestamp>`` for the newest time pruned), and
:func:`store_tally` adds the offsets back. Pure SQL over an open ``sqlite3`` connection; no
imports from the rest of the package.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

#: counter suffix -> (table, SQL condition) whose matching rows it counts (summed over rows)
COUNTED: tuple[tuple[str, str, str], ...] = (
    ("external_changes", "versions", "action = 'external' AND coalesce(reason, '') != 'first seen (adopted)'"),
    ("external_changes", "events", "actor = 'external' AND kind != 'adopted'"),
    ("restores", "versions", "action = 'restore'"),
    ("quarantines", "events", "kind = 'quarantined'"),
    ("refused_applies", "events", "kind = 'refused-invalid'"),
    ("failed_unparks", "events", "kind = 'unpark-failed'"),
)
COUNTERS = tuple(dict.fromkeys(name for name, _, _ in COUNTED))
#: timestamp name -> the counters whose newest row it is
TIMESTAMPS = {"last_external_change": "external_changes", "last_restore": "restores"}


def tally(db: sqlite3.Connection, *, versions: tuple[str, Sequence[Any]] = ("1", ()),
          events: tuple[str, Sequence[Any]] = ("1", ())) -> tuple[dict[str, int], dict[str, float | None]]:
    """Counts and newest ``created_at`` (unix seconds) of the counted rows within a scope.

    ``versions`` / ``events``: an extra SQL condition with its parameters, limiting the rows
    looked at (default: all). Returns ``({counter: count}, {timestamp name: float | None})``.
    Raises sqlite3.Error.
    """
    counts = dict.fromkeys(COUNTERS, 0)
    newest: dict[str, float | None] = dict.fromkeys(COUNTERS, None)
    scopes = {"versions": versions, "events": events}
    for name, table, cond in COUNTED:
        where, params = scopes[table]
        n, t = db.execute(f"SELECT count(*), max(created_at) FROM {table} WHERE ({cond}) AND ({where})",
                          tuple(params)).fetchone()
        counts[name] += int(n)
        if t is not None and (newest[name] is None or float(t) > newest[name]):  # type: ignore[operator]
            newest[name] = float(t)
    return counts, {ts: newest[c] for ts, c in TIMESTAMPS.items()}


def offsets(db: sqlite3.Connection) -> tuple[dict[str, int], dict[str, float | None]]:
    """The tallies of rows already pruned (``meta`` keys ``tally:*``, ``tally-last:*``)."""
    counts = dict.fromkeys(COUNTERS, 0)
    last: dict[str, float | None] = dict.fromkeys(TIMESTAMPS, None)
    try:
        rows = db.execute("SELECT key, value FROM meta WHERE key LIKE 'tally%'").fetchall()
    except sqlite3.OperationalError:  # a store from before the meta table: nothing pruned
        return counts, last
    for key, value in rows:
        kind, _, name = key.partition(":")
        if kind == "tally" and name in counts:
            counts[name] = int(value)
        elif kind == "tally-last" and name in last:
            last[name] = float(value)
    return counts, last


def carry_over(db: sqlite3.Connection, counts: dict[str, int], newest: dict[str, float | None]) -> None:
    """Add a tally of rows about to be deleted to the offsets (inside the caller's transaction,
    so the offsets and the deletion commit together). Raises sqlite3.Error."""
    old_counts, old_last = offsets(db)
    for name, n in counts.items():
        if n:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                       (f"tally:{name}", str(old_counts[name] + n)))
    for name, t in newest.items():
        if t is not None and (old_last[name] is None or t > old_last[name]):  # type: ignore[operator]
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (f"tally-last:{name}", repr(t)))


def store_tally(db: sqlite3.Connection) -> tuple[dict[str, int], dict[str, float | None]]:
    """Every counter and timestamp: the rows in the store plus what pruning carried over.
    Raises sqlite3.Error."""
    counts, newest = tally(db)
    more, last = offsets(db)
    for name in counts:
        counts[name] += more[name]
    for name, t in last.items():
        if t is not None and (newest[name] is None or t > newest[name]):  # type: ignore[operator]
            newest[name] = t
    return counts, newest
