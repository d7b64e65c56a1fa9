"""What the daemon looks at again later: the retry queue, one part of the daemon.

A pass that met a lock timeout or an unexpected error, a restore or quarantine held back by a
writer, a write that landed after it was judged, a restore refused until its back-off is over:
each puts file names (or a whole pass) here with the time they are due, and the main loop takes
them when they are (:meth:`RetryQueue.take_due`) and wakes up for them (:meth:`RetryQueue.wake_at`).
An action the engine refused waits its :class:`Backoff`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable


class RetryQueue:
    """File names to look at again, and whether a full pass is due again, at one due time
    (``time.monotonic()`` seconds) for all of them."""

    def __init__(self) -> None:
        #: the file names to look at again
        self.names: set[str] = set()
        #: a full pass is to be run again (it failed: a lock timeout, an unexpected error)
        self.full = False
        #: when the names are due (monotonic seconds); None: at the next pass
        self.at: float | None = None

    def later(self, names: Iterable[str], *, at: float, full: bool = False) -> None:
        """Look at ``names`` again (and, with ``full``, run a full pass again) at ``at``, which
        becomes the due time of every name waiting."""
        if full:
            self.full = True
        self.names.update(names)
        self.at = at

    def no_later_than(self, name: str, due: float) -> None:
        """Look at ``name`` again, at ``due`` at the latest (an earlier due time stays)."""
        self.names.add(name)
        self.at = due if self.at is None else min(self.at, due)

    def take_due(self, now: float) -> set[str]:
        """The names due at ``now`` (monotonic seconds), taken off the queue; none before then."""
        if self.names and (self.at is None or now >= self.at):
            out, self.names = self.names, set()
            return out
        return set()

    def take_all(self) -> set[str]:
        """Every name waiting, due or not, taken off the queue (the last pass before a stop)."""
        out, self.names = self.names, set()
        return out

    def wake_at(self) -> float | None:
        """When the main loop must wake up for the names waiting; None when none are."""
        return self.at if self.names and self.at is not None else None

    def pending(self) -> bool:
        """Whether anything is waiting: a name, or a full pass."""
        return self.full or bool(self.names)


class Backoff:
    """Actions the engine refused, tried again after a growing delay: :data:`~.base.BACKOFF_FIRST`
    seconds after the first failure, doubled after each failed retry, at most
    :data:`~.base.BACKOFF_MAX` (a full disk frees up, a duplicate or a port clash goes away), never
    only when the daemon restarts. Keys: ``restore:<file_name>``, ``unpark:<component>``.

    ``first`` and ``most``: the first delay and the longest, in seconds.
    """

    def __init__(self, *, first: float, most: float) -> None:
        self._first = first
        self._most = most
        # key -> (failures so far, epoch of the next try)
        self._due: dict[str, tuple[int, float]] = {}
        #: file_name -> (digest, live names) when its restore failed: not retried on the same bytes
        #: in the same directory before its back-off is over (a reload tries them again at once)
        self.failed_restores: dict[str, tuple[str, frozenset[str]]] = {}

    def failed(self, key: str) -> tuple[int, float]:
        """Count one more failure of the action ``key`` and set when it is tried next. Returns
        (failures, delay in seconds)."""
        tries = self._due.get(key, (0, 0.0))[0] + 1
        delay = min(self._most, self._first * 2 ** (tries - 1))
        self._due[key] = (tries, time.time() + delay)
        return tries, delay

    def due(self, key: str, default: float) -> float:
        """The epoch at which the action ``key`` may be tried again; ``default`` when it never failed."""
        found = self._due.get(key)
        return default if found is None else found[1]

    def forget(self, key: str) -> None:
        """The action ``key`` succeeded, or no longer applies: no back-off left."""
        self._due.pop(key, None)

    def forget_restore(self, file_name: str) -> None:
        """The restore of ``file_name`` succeeded or is no longer wanted: forget its failure."""
        self.failed_restores.pop(file_name, None)
        self._due.pop(f"restore:{file_name}", None)

    def due_now(self) -> None:
        """Everything may be tried again at once (a reload), counts kept; failed restores are
        forgotten."""
        self.failed_restores.clear()
        self._due = {k: (n, 0.0) for k, (n, _at) in self._due.items()}
