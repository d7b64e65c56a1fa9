"""What the daemon looks at again later: the retry queue, one part of the daemon.

A pass that met a lock timeout or an unexpected error, a restore or quarantine held back by a
writer, a write that landed after it was judged, a restore refused until its back-off is over:
each puts file names (or a whole pass) here with the time they are due, and the main loop takes
them when they are (:meth:`RetryQueue.take_due`) and wakes up for them (:meth:`RetryQueue.wake_at`).
"""

from __future__ import annotations

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
