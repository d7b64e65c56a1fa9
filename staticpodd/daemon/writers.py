"""Writer holds: a restore or quarantine never acts on a file someone is still writing.

:class:`WriterHolds`, one part of the daemon, keeps the live files' stats as they were before
the last scan (:attr:`~WriterHolds.scan_stats`), says why an action on one file must wait
(:meth:`~WriterHolds.hold_reason`: changed since the scan, open for writing in /proc, or changed
and not yet closed per inotify), with the stall bound (:data:`staticpodd.node.watch.WRITE_STALL`)
after which a hung writer no longer holds it back, and which files are held now
(:attr:`~WriterHolds.held`).
"""

from __future__ import annotations

import os
import time

from ..journal import NOTICE, WARNING, Event
from ..node.watch import WRITE_STALL, Writer, open_writers
from ..node.writelease import open_for_writing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..layout import Layout
    from ..node.watch import Hints


class WriterHolds:
    """Stat snapshots, open writers and the names still inside their debounce.

    Given what it reads as the daemon has it now (a reload replaces both): ``layout()``, the
    manifest directory's layout; ``hints()``, the inotify hints (None without a watch); and
    ``log(event, message, priority=..., **fields)``, the daemon's journal entry.
    """

    def __init__(self, *, layout: Callable[[], Layout], hints: Callable[[], Hints | None],
                 log: Callable[..., None]) -> None:
        self._layout = layout
        self._hints = hints
        self._log = log
        #: file_name -> (size, mtime_ns, st_ino) of the live files just before the last scan: a
        #: restore or quarantine acts only on a file that has not changed since (see hold_reason)
        self.scan_stats: dict[str, tuple[int, int, int]] = {}
        #: file_name -> pids whose open-for-writing descriptor holds back its restore/quarantine
        #: (logged once per set of pids, an empty set when only inotify knows of the writer;
        #: re-checked on close-write and every HOLD_RECHECK)
        self.held: dict[str, frozenset[int]] = {}
        #: file names whose writer stalled (WRITE_STALL without a change): logged once each
        self.stalled: set[str] = set()
        #: whether /proc/PID/fd of some process was denied to us (no CAP_SYS_PTRACE): logged once
        self._proc_limited = False
        self._relist_cache: tuple[float, float] | None = None

    def snapshot(self) -> None:
        """Take :attr:`scan_stats` now (:meth:`live_stats`), right before a scan."""
        self.scan_stats = self.live_stats()

    def live_stats(self) -> dict[str, tuple[int, int, int]]:
        """``(size, mtime_ns, st_ino)`` of every regular file (symlinks followed) in the manifest
        directory, by name; entries that vanish meanwhile (a race with a writer) are left out."""
        out: dict[str, tuple[int, int, int]] = {}
        try:
            entries = list(os.scandir(self._layout().manifest_dir))
        except OSError:
            return out
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                st = e.stat()
            except OSError:
                continue
            out[e.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return out

    def relist(self) -> float:
        """The kubelet's relist period in seconds (``fileCheckFrequency`` from
        ``<root>/var/lib/kubelet/config.yaml``, 20 s when unset), for the messages that say when
        the kubelet acts. Read at most every 10 s (cheap: one small file)."""
        now = time.monotonic()
        cached = self._relist_cache
        if cached is None or now - cached[0] > 10.0:
            from ..proof.kubeletconfig import node_file_check_frequency

            cached = (now, node_file_check_frequency(self._layout().root))
            self._relist_cache = cached
        return cached[1]

    def sizes(self) -> dict[str, int]:
        """Live file sizes in bytes from the last stat snapshot (see :meth:`live_stats`)."""
        return {name: st[0] for name, st in self.scan_stats.items()}

    def hold_reason(self, file_name: str, verb: str = "restore") -> tuple[str, list[Writer]] | None:
        """Why a ``verb`` (restore or quarantine) of live ``file_name`` must wait, or None to go.

        ``("changed", [])``: its stat (size, mtime_ns, inode) differs from the one taken before
        the scan, so the bytes judged are not the bytes on disk (someone is writing; the new
        event or the re-check brings it back). ``("writer", writers)``: a slow, non-atomic write
        is in progress: a process still holds it open for writing (``writers``, from
        :func:`staticpodd.node.watch.open_writers`; that ``/proc`` scan runs only when the kernel does
        not say that nobody has the file open for writing, :func:`staticpodd.node.writelease.
        open_for_writing`), or inotify saw it change and not yet closed
        (:class:`staticpodd.node.watch.OpenWrites`; ``writers`` is then empty: without CAP_SYS_PTRACE
        /proc does not show other processes' descriptors; not when the kernel says nobody has it
        open for writing: the close event is only late). Renaming a version over it then would
        leave the writer writing into an unlinked inode, and its complete bytes would never reach
        the disk nor the history. A writer that has not changed the file for
        :data:`staticpodd.node.watch.WRITE_STALL` seconds is taken as stalled (logged once): the
        ``verb`` goes ahead, so a hung writer never blocks the policy forever.
        """
        path = self._layout().manifest_dir / file_name
        try:
            st = os.stat(path)
        except OSError:
            return None  # gone: the engine's own checks report it
        if self.scan_stats.get(file_name) != (st.st_size, st.st_mtime_ns, st.st_ino):
            return "changed", []
        writers: list[Writer] = []
        kernel = open_for_writing(path, st)
        if kernel is not False:  # some process may write it: /proc names it
            denied: set[int] = set()
            writers = open_writers(path, denied=denied)
            self.note_proc_denied(denied)
        # the kernel's "nobody has it open for writing" beats inotify's memory of a change whose
        # close event is not in yet (a write just before a stop: held, and then never restored)
        hints = self._hints()
        since = hints.writes.since(file_name) if hints is not None and kernel is not False else None
        if not writers and since is None:
            self.stalled.discard(file_name)
            return None
        age = since if since is not None else max(0.0, time.time() - st.st_mtime)
        if age < WRITE_STALL:
            self.stalled.discard(file_name)
            return "writer", writers
        if file_name not in self.stalled:
            self.stalled.add(file_name)
            who = ", ".join(f"pid {w.pid} ({w.comm})" for w in writers) or "its writer (seen by inotify)"
            self._log(
                Event.INVALID_LIVE if verb == "restore" else Event.STRAY_FOUND,
                f"{file_name}: {who} has not changed it for {age:.0f} s and has not closed it: taking "
                f"the write as stalled (limit {WRITE_STALL:g} s); the {verb} goes ahead",
                priority=WARNING,
                file_name=file_name,
                held_by_pid=",".join(str(w.pid) for w in writers),
                held_by_comm=",".join(w.comm for w in writers),
                policy_action="stalled-writer",
            )
        return None

    def note_proc_denied(self, denied: set[int]) -> None:
        """Log once that /proc/PID/fd of some processes is closed to us (``denied``: their
        pids), so open-for-writing descriptors are seen through inotify only."""
        if not denied or self._proc_limited:
            return
        self._proc_limited = True
        sample = ",".join(str(p) for p in sorted(denied)[:10])
        self._log(
            Event.WRITER_INSPECTION_LIMITED,
            f"writer inspection via /proc is limited: /proc/PID/fd of {len(denied)} process(es) "
            f"(pid {sample}{', ...' if len(denied) > 10 else ''}) is not readable without CAP_SYS_PTRACE; "
            "files being written are recognised by inotify (changed and not yet closed) instead, "
            "which misses only a writer that opened the file before staticpodd started and has "
            "not written since",
            priority=NOTICE,
            finding="writer-inspection-limited",
            denied_pids=sample,
        )

    def busy_names(self) -> set[str]:
        """The live files changed and still inside their debounce (judged after their quiet time)."""
        hints = self._hints()
        return hints.pending_names() if hints is not None else set()
