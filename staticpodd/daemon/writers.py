"""Writer holds: a restore or quarantine never acts on a file someone is still writing.

:class:`WriterHoldsMixin` snapshots the live files' stats before a scan, and says why an action
on one file must wait (:meth:`~WriterHoldsMixin._hold_reason`: changed since the scan, open for
writing in /proc, or changed and not yet closed per inotify), with the stall bound
(:data:`staticpodd.watch.WRITE_STALL`) after which a hung writer no longer holds it back.
"""

from __future__ import annotations

import os
import time

from ..journal import NOTICE, WARNING, Event
from ..watch import WRITE_STALL, Writer, open_writers
from ..writelease import open_for_writing
from .base import DaemonBase


class WriterHoldsMixin(DaemonBase):
    """Stat snapshots, open writers and the names still inside their debounce."""

    def _live_stats(self) -> dict[str, tuple[int, int, int]]:
        """``(size, mtime_ns, st_ino)`` of every regular file (symlinks followed) in the manifest
        directory, by name; entries that vanish meanwhile (a race with a writer) are left out."""
        out: dict[str, tuple[int, int, int]] = {}
        try:
            entries = list(os.scandir(self.layout.manifest_dir))
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

    def _relist(self) -> float:
        """The kubelet's relist period in seconds (``fileCheckFrequency`` from
        ``<root>/var/lib/kubelet/config.yaml``, 20 s when unset), for the messages that say when
        the kubelet acts. Read at most every 10 s (cheap: one small file)."""
        now = time.monotonic()
        cached = getattr(self, "_relist_cache", None)
        if cached is None or now - cached[0] > 10.0:
            from ..proof.kubeletconfig import node_file_check_frequency

            cached = (now, node_file_check_frequency(self.layout.root))
            self._relist_cache = cached
        return cached[1]

    def _sizes(self) -> dict[str, int]:
        """Live file sizes in bytes from the last stat snapshot (see :meth:`_live_stats`)."""
        return {name: st[0] for name, st in self._scan_stats.items()}

    def _hold_reason(self, file_name: str, verb: str = "restore") -> tuple[str, list[Writer]] | None:
        """Why a ``verb`` (restore or quarantine) of live ``file_name`` must wait, or None to go.

        ``("changed", [])``: its stat (size, mtime_ns, inode) differs from the one taken before
        the scan, so the bytes judged are not the bytes on disk (someone is writing; the new
        event or the re-check brings it back). ``("writer", writers)``: a slow, non-atomic write
        is in progress: a process still holds it open for writing (``writers``, from
        :func:`staticpodd.watch.open_writers`; that ``/proc`` scan runs only when the kernel does
        not say that nobody has the file open for writing, :func:`staticpodd.writelease.
        open_for_writing`), or inotify saw it change and not yet closed
        (:class:`staticpodd.watch.OpenWrites`; ``writers`` is then empty: without CAP_SYS_PTRACE
        /proc does not show other processes' descriptors; not when the kernel says nobody has it
        open for writing: the close event is only late). Renaming a version over it then would
        leave the writer writing into an unlinked inode, and its complete bytes would never reach
        the disk nor the history. A writer that has not changed the file for
        :data:`staticpodd.watch.WRITE_STALL` seconds is taken as stalled (logged once): the
        ``verb`` goes ahead, so a hung writer never blocks the policy forever.
        """
        path = self.layout.manifest_dir / file_name
        try:
            st = os.stat(path)
        except OSError:
            return None  # gone: the engine's own checks report it
        if self._scan_stats.get(file_name) != (st.st_size, st.st_mtime_ns, st.st_ino):
            return "changed", []
        writers: list[Writer] = []
        kernel = open_for_writing(path, st)
        if kernel is not False:  # some process may write it: /proc names it
            denied: set[int] = set()
            writers = open_writers(path, denied=denied)
            self._note_proc_denied(denied)
        # the kernel's "nobody has it open for writing" beats inotify's memory of a change whose
        # close event is not in yet (a write just before a stop: held, and then never restored)
        since = self.hints.writes.since(file_name) if self.hints is not None and kernel is not False else None
        if not writers and since is None:
            self._stalled.discard(file_name)
            return None
        age = since if since is not None else max(0.0, time.time() - st.st_mtime)
        if age < WRITE_STALL:
            self._stalled.discard(file_name)
            return "writer", writers
        if file_name not in self._stalled:
            self._stalled.add(file_name)
            who = ", ".join(f"pid {w.pid} ({w.comm})" for w in writers) or "its writer (seen by inotify)"
            self.log(
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

    def _note_proc_denied(self, denied: set[int]) -> None:
        """Log once that /proc/PID/fd of some processes is closed to us (``denied``: their
        pids), so open-for-writing descriptors are seen through inotify only."""
        if not denied or self._proc_limited:
            return
        self._proc_limited = True
        sample = ",".join(str(p) for p in sorted(denied)[:10])
        self.log(
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

    def _busy_names(self) -> set[str]:
        return self.hints.pending_names() if self.hints is not None else set()
