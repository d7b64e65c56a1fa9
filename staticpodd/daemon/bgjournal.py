"""The daemon's journal writer: :class:`BackgroundJournal`.

A :class:`~staticpodd.journal.Journal` whose ``log`` hands each entry to one writer thread through
a bounded queue, so that a journald that is not keeping up never blocks the main loop (watching,
watchdog pings, restores). Used by :class:`staticpodd.daemon.Daemon`; the CLI logs directly.
"""

from __future__ import annotations

import sys
from typing import Any

from ..journal import INFO, Event, Journal


class BackgroundJournal(Journal):
    """A :class:`Journal` whose ``log`` never blocks the main loop.

    ``sd_journal_send`` blocks while journald's socket queue is full (a busy journald, or
    ``net.unix.max_dgram_qlen`` left at the kernel's 10): the daemon must keep watching, pinging
    the watchdog and restoring files meanwhile. Entries go through a bounded FIFO queue to one
    writer thread, in order; when ``maxsize`` entries are waiting, new ones are counted as
    dropped and a single stderr line says so. :meth:`close` flushes (bounded wait).
    """

    def __init__(self, identifier: str, root: str, *, maxsize: int = 10000) -> None:
        super().__init__(identifier, root)
        import queue
        import threading

        self._queue: Any = queue.Queue(maxsize)
        self._full = queue.Full
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="staticpodd-journal", daemon=True)
        self._thread.start()

    def log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        """Queue one entry (see :meth:`Journal.log`); never blocks, never raises."""
        try:
            self._queue.put_nowait((event, message, priority, fields))
        except self._full:
            self.dropped += 1
            if self.dropped == 1:
                try:
                    print("staticpodd: journald is not keeping up; dropping log entries", file=sys.stderr)
                except OSError:
                    pass

    def idle(self) -> bool:
        """True when no entry is waiting to be sent (the last one taken may still be on its way)."""
        return bool(self._queue.empty())

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            event, message, priority, fields = item
            try:
                Journal.log(self, event, message, priority=priority, **fields)
            except Exception as exc:  # noqa: BLE001 - one bad entry must not end all logging
                try:
                    print(f"staticpodd: could not log {event.name}: {exc!r}", file=sys.stderr)
                except OSError:
                    pass

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout`` seconds), then stop the writer."""
        try:
            self._queue.put(None, timeout=timeout)
        except self._full:
            return
        self._thread.join(timeout)
