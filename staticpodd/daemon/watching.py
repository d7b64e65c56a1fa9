"""Keeping the inotify watch on the manifest directory, and noticing when it is not writable.

:class:`WatchMixin` (re)creates the watch when the directory appears, is replaced or was missing
(DIRECTORY_REWATCHED, DIRECTORY_PROBLEM), and checks whether the watched directory is read-only
for the daemon (under the unit's sandbox: exit 75 for a restart that binds it).
"""

from __future__ import annotations

from ..journal import ERR, WARNING, Event
from .base import DaemonBase


class WatchMixin(DaemonBase):
    """The inotify watch's state changes and the manifest directory's writability."""

    def _check_watch(self, *, initial: bool = False) -> bool:
        """(Re)create the inotify watch if needed; True when a full rescan should follow."""
        assert self.watcher is not None
        what = self.watcher.ensure()
        if what is None:
            if not (initial and not self.watcher.watching and self.watcher.identity is None):
                return False
            what = "missing"  # missing at start: say so once, then poll for it
        ident = self.watcher.identity
        if what == "started":
            self.problems.clear("watch")
            if initial:
                self._check_writable(initial=True)
                return False
            what = "created"  # it was missing at start and has appeared
        if what == "missing":
            self.problems.set("watch", {
                "code": "manifest-dir-missing",
                "severity": "error",
                "path": str(self.layout.manifest_dir),
                "message": "the manifest directory is missing: the kubelet removes every static pod",
            })
            self.log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} is missing; the kubelet removes every "
                "file-sourced pod; waiting for it to come back",
                priority=ERR,
                finding="manifest-dir-missing",
            )
            return True
        if what == "failed":
            self.problems.set("watch", {
                "code": "watch-failed",
                "severity": "error",
                "path": str(self.layout.manifest_dir),
                "message": self.watcher.error or "cannot watch the manifest directory",
            })
            self.log(
                Event.DIRECTORY_PROBLEM,
                self.watcher.error or "cannot watch the manifest directory",
                priority=ERR,
                finding="watch-failed",
            )
            return True
        self.problems.clear("watch")
        if not initial:
            self.log(
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
            self.problems.clear("read-only")
            return
        if not initial and under_service_manager():
            self.log(
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
            self.exit_status = EXIT_SANDBOX
            return
        if "read-only" not in self.problems:
            self.log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} is read-only for staticpodd: no restore, "
                "quarantine or deadline unpark can happen (a read-only mount, or a staticPodPath the unit's "
                "ReadWritePaths= does not grant: see `systemctl edit staticpodd`)",
                priority=ERR,
                finding="manifest-dir-read-only",
            )
        self.problems.set("read-only", {
            "code": "manifest-dir-read-only",
            "severity": "error",
            "path": str(self.layout.manifest_dir),
            "message": "the manifest directory is read-only for staticpodd: restores, quarantines and "
            "deadline unparks fail",
        })
