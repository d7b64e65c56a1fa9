"""Quiet periodic rescans: a timer-driven full rescan of a node where nothing moved does nothing.

The periodic rescan (``rescan_interval``) is the safety net under inotify (docs/kubelet-contract.md
consequence 8: events can be lost). When the last full pass found nothing to do and since then
no directory entry's stat (name, mode, owner, size, mtime, ctime, inode: :mod:`staticpodd.node.dirprint`,
of the manifest directory and of ``.staticpodd/parked/``) changed, nobody committed to the
store (ours: ``total_changes``; anyone's: ``PRAGMA data_version``), no recorded intent's process
died, and the configuration is the same, the pass would read the same bytes and reach the same
verdicts, findings and plan: :meth:`QuietMixin._quiet_unchanged` says so and the loop skips it
(idle CPU at 1,000 manifests). Any write, rename, chmod or chown changes a ctime, so
a missed event still brings the full pass at the next interval.

Git's "racy" rule applies: a fingerprint taken while some entry's ctime is within
:data:`staticpodd.engine.fsfacts._RACY_NS` of now is not trusted (a second write in the same
timestamp tick would not change it), and such a pass is never recorded as quiet.
"""

from __future__ import annotations

import time
from typing import Any

from .base import DaemonBase

#: Same bound as the scan's stat signatures (staticpodd.engine.fsfacts._RACY_NS), nanoseconds.
RACY_NS = 2_000_000_000


def _newest_ns(fp: tuple[Any, ...]) -> int:
    """The newest mtime/ctime (ns) in a :func:`staticpodd.node.dirprint.fingerprint` value."""
    newest = int(fp[4])  # the directory's own mtime
    for item in fp[5]:
        if len(item) >= 7 and item[1] is not None:
            newest = max(newest, int(item[5]), int(item[6]))
            if len(item) > 16:  # a symlink: its target's times too
                newest = max(newest, int(item[14]), int(item[15]))
    return newest


class QuietMixin(DaemonBase):
    """Decides whether a periodic full rescan can be skipped (see the module docstring)."""

    #: (hashed directory fingerprints taken before the last quiet full pass, store key after it)
    _quiet_pass: tuple[Any, Any] | None = None

    def _dir_key(self) -> str | None:
        """The fingerprints (no digests) of the manifest directory and ``parked/``, hashed (a
        fingerprint of a large node is some 200 KB of tuples, kept between passes); None when the
        manifest directory cannot be listed or an entry changed too recently to be trusted."""
        from ..node.dirprint import fingerprint
        from .findings import hashed

        live = fingerprint(self.layout.manifest_dir, {})
        if live is None:
            return None
        parked = fingerprint(self.layout.parked_dir, {})
        limit = time.time_ns() - RACY_NS
        if _newest_ns(live) > limit or (parked is not None and _newest_ns(parked) > limit):
            return None
        return hashed((live, parked))

    def _store_key(self) -> Any:
        """What of the store and the process table a full pass depends on, besides the files:
        commits (ours and others'), the recorded intents and whether their processes live, the
        names the engine cannot track, and the configuration generation. None on any error."""
        from ..engine.fsfacts import pid_alive

        try:
            store = self.engine.store
            db = store._db
            return (db.total_changes, db.execute("PRAGMA data_version").fetchone()[0],
                    tuple((i.id, pid_alive(i.pid)) for i in store.intents()), tuple(sorted(self.engine.untrackable)),
                    self.config_generation, id(self.config))
        except Exception:  # noqa: BLE001 - no key: the pass runs
            return None

    def _quiet_blocked(self) -> bool:
        """Whether anything pending makes the next full pass necessary whatever the files say:
        retries, held restores or quarantines, names inside their debounce, a park deadline
        that has come, a lock or reconcile problem being retried."""
        return bool(
            self.retries.pending()
            or self.writer_holds.held
            or self.writer_holds.busy_names()
            or (self.next_park_deadline is not None and time.time() >= self.next_park_deadline)
            or "lock" in self.problems
            or "reconcile" in self.problems
        )

    def _quiet_unchanged(self) -> bool:
        """True when this periodic full pass can be skipped: the last full pass was quiet and
        nothing it depends on changed since (see the module docstring)."""
        if self._quiet_pass is None or self._quiet_blocked():
            return False
        return self._quiet_pass == (self._dir_key(), self._store_key())
