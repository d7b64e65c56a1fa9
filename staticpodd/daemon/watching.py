"""Keeping the inotify watch on the manifest directory, and noticing when it is not writable.

:class:`WatchKeeper` is one part of the daemon, given its collaborators (getters of the current
watcher and layout, the problem board, the journal's log, a stderr line, and how to make the
daemon exit): it (re)creates the watch when the directory appears, is replaced or was missing
(DIRECTORY_REWATCHED, DIRECTORY_PROBLEM), and checks whether the watched directory is read-only
for the daemon (under the unit's sandbox: exit 75 for a restart that binds it).
"""

from __future__ import annotations

from collections.abc import Callable

from ..journal import ERR, WARNING, Event
from ..layout import Layout
from ..node.watch import Watcher
from .problems import Problems


class WatchKeeper:
    """The inotify watch's state changes and the manifest directory's writability.

    ``watcher`` and ``layout``: getters of the daemon's current ones (a reload replaces them);
    ``problems``: the board (``watch`` and ``read-only`` are set and cleared here); ``log``: a
    journal entry (``log(event, message, priority=..., **fields)``); ``say``: a stderr line;
    ``exit``: makes the daemon exit with this status after the current pass.
    """

    def __init__(self, *, watcher: Callable[[], Watcher | None], layout: Callable[[], Layout], problems: Problems,
                 log: Callable[..., None], say: Callable[[str], None], exit: Callable[[int], None]) -> None:
        self._watcher = watcher
        self._layout = layout
        self._problems = problems
        self._log = log
        self._say = say
        self._exit = exit

    @property
    def watcher(self) -> Watcher | None:
        """The daemon's current watcher (None before start-up built it)."""
        return self._watcher()

    @property
    def layout(self) -> Layout:
        """The daemon's current layout."""
        return self._layout()

    def check(self, *, initial: bool = False) -> bool:
        """(Re)create the inotify watch if needed; True when a full rescan should follow."""
        assert self.watcher is not None
        what = self.watcher.ensure()
        if what is None:
            if not (initial and not self.watcher.watching and self.watcher.identity is None):
                return False
            what = "missing"  # missing at start: say so once, then poll for it
        ident = self.watcher.identity
        if what == "started":
            self._problems.clear("watch")
            if initial:
                self._check_writable(initial=True)
                return False
            what = "created"  # it was missing at start and has appeared
        if what == "missing":
            self._problems.set("watch", {
                "code": "manifest-dir-missing",
                "severity": "error",
                "path": str(self.layout.manifest_dir),
                "message": "the manifest directory is missing: the kubelet removes every static pod",
            })
            self._log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} is missing; the kubelet removes every "
                "file-sourced pod; waiting for it to come back",
                priority=ERR,
                finding="manifest-dir-missing",
            )
            return True
        if what == "failed":
            self._problems.set("watch", {
                "code": "watch-failed",
                "severity": "error",
                "path": str(self.layout.manifest_dir),
                "message": self.watcher.error or "cannot watch the manifest directory",
            })
            self._log(
                Event.DIRECTORY_PROBLEM,
                self.watcher.error or "cannot watch the manifest directory",
                priority=ERR,
                finding="watch-failed",
            )
            return True
        self._problems.clear("watch")
        if not initial:
            self._log(
                Event.DIRECTORY_REWATCHED,
                f"manifest directory {self.layout.manifest_dir} was {what}; watching it again and rescanning",
                priority=WARNING,
                change=what,
                dev=ident[0] if ident else None,
                inode=ident[1] if ident else None,
            )
        self._check_writable(initial=initial, change=what)
        return True

    def _check_writable(self, *, initial: bool, change: str | None = None) -> None:
        """Is the (now watched) manifest directory writable for us, as far as the mount goes?

        Under the unit's sandbox (``ProtectSystem=strict``), a directory that did not exist at
        start or was deleted and recreated since is read-only to the daemon (no bind mount for
        it: :mod:`staticpodd.node.sandbox`). Then every quarantine, restore and deadline unpark would
        fail with EROFS while systemd sees an active service . So when it
        *appears* read-only under a service manager, the daemon says so (DIRECTORY_PROBLEM,
        priority err) and exits :data:`~staticpodd.node.sandbox.EXIT_SANDBOX` (75): Restart=on-failure
        starts it again in a sandbox that binds the directory. A directory read-only from the
        start (a read-only file system, or a staticPodPath the unit does not grant) is reported
        as the problem ``manifest-dir-read-only`` instead: exiting would only loop.
        """
        from ..node.sandbox import EXIT_SANDBOX, read_only_mount, under_service_manager

        if not read_only_mount(self.layout.manifest_dir):
            self._problems.clear("read-only")
            return
        if not initial and under_service_manager():
            self._log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} was {change or 'created'} after staticpodd "
                "started and is read-only in its sandbox (the unit binds it writable only at start); exiting "
                f"{EXIT_SANDBOX} so that systemd restarts staticpodd with the directory bound",
                priority=ERR,
                finding="manifest-dir-read-only",
                change=change,
                exit_status=EXIT_SANDBOX,
            )
            self._say(f"manifest directory {self.layout.manifest_dir} is read-only in this sandbox: exiting "
                      f"{EXIT_SANDBOX} for a restart")
            self._exit(EXIT_SANDBOX)
            return
        if "read-only" not in self._problems:
            self._log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} is read-only for staticpodd: no restore, "
                "quarantine or deadline unpark can happen (a read-only mount, or a staticPodPath the unit's "
                "ReadWritePaths= does not grant: see `systemctl edit staticpodd`)",
                priority=ERR,
                finding="manifest-dir-read-only",
            )
        self._problems.set("read-only", {
            "code": "manifest-dir-read-only",
            "severity": "error",
            "path": str(self.layout.manifest_dir),
            "message": "the manifest directory is read-only for staticpodd: restores, quarantines and "
            "deadline unparks fail",
        })
