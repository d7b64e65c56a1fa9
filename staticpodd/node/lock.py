"""The one lock every writer takes: an ``flock`` on ``/run/staticpodd/lock``.

staticpodctl invocations and the daemon serialise on it (docs/development.md, "A map of the code"). A
waiter polls with a bounded timeout and says who holds the lock: the holder writes its pid and
command line into the lock file after taking it.
"""

from __future__ import annotations

import fcntl
import os
import stat
import sys
import time
from pathlib import Path

from ..errors import FsError, LockTimeout

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import TextIO

DEFAULT_TIMEOUT = 30.0


class FileLock:
    """Exclusive, re-entrant (per object) flock on ``path``.

    ``acquire(timeout)`` waits at most ``timeout`` seconds, telling ``notify`` (a stream, e.g.
    stderr on a terminal) once after a second who it is waiting for. Raises LockTimeout.
    """

    def __init__(self, path: Path, *, description: str) -> None:
        self.path = path
        self.description = description
        self._fd: int | None = None
        self._depth = 0

    def holder(self) -> str:
        """What the current holder wrote into the lock file (``pid N: command``), or ``unknown``."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return "unknown"
        return text or "unknown"

    def acquire(self, timeout: float = DEFAULT_TIMEOUT, notify: TextIO | None = None) -> None:
        """Take the lock, waiting at most ``timeout`` seconds.

        The lock file is opened so that only its owner (root on a node) can open it at all
        (:func:`open_private`): ``flock(2)`` works on a read-only descriptor, so a readable lock
        file would let any local user block every staticpodctl and the daemon.
        Writing the holder's pid into it is best effort (a full ``/run`` must not stop the lock
        from working: ENOSPC is ignored there), and the descriptor is closed on every error path,
        so a failure never leaves this process holding the flock.
        Raises LockTimeout, FsError (the lock file cannot be opened, or belongs to another user).
        """
        if self._depth:
            self._depth += 1
            return
        fd = open_private(self.path, what="lock file")
        try:
            self._wait(fd, timeout, notify)
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()}: {self.description}\n".encode(), 0)
            except OSError:
                pass  # ENOSPC/EROFS/EDQUOT: who holds it is a courtesy; the flock is what counts
        except BaseException:
            os.close(fd)  # also drops the flock if we had it
            raise
        self._fd = fd
        self._depth = 1

    def _wait(self, fd: int, timeout: float, notify: TextIO | None) -> None:
        start = time.monotonic()
        deadline = start + timeout
        told = False
        delay = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                now = time.monotonic()
                if now >= deadline:
                    raise LockTimeout(
                        f"another staticpodctl or staticpodd holds the lock ({self.holder()}); "
                        f"gave up after {timeout:g} s",
                        path=str(self.path),
                        hint="wait for it to finish, or raise --lock-timeout; never delete the lock file",
                    ) from None
                if notify is not None and not told and now - start >= 1.0:
                    print(f"staticpodctl: waiting for the lock held by {self.holder()} …", file=notify)
                    told = True
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def release(self) -> None:
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            return
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @property
    def held(self) -> bool:
        return self._depth > 0


def open_private(path: Path, *, what: str) -> int:
    """Open (creating) ``path`` read-write for a lock: the file 0600, its directory 0700 when we
    create it, both owned by us. A file left looser by an older release is tightened; one owned
    by another user is refused (they could hold the lock; on a node only root takes it).
    Returns the descriptor (O_CLOEXEC). Raises FsError naming the path.
    """
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise FsError(f"cannot open the {what}: {exc.strerror}", path=str(path),
                      hint="staticpodctl and staticpodd run as root; check the directory's owner and mode"
                      ) from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise FsError(
                f"the {what} belongs to uid {st.st_uid}, not to us (uid {os.geteuid()}): another user "
                "could hold it and block every staticpodctl and staticpodd",
                path=str(path), hint="remove it (it holds no data) and check who can write its directory")
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o600)  # an older release made it 0644: readable is enough to flock it
    except BaseException:
        os.close(fd)
        raise
    return fd


def default_notify() -> TextIO | None:
    """stderr when it is a terminal, else None (no chatter in scripts and config management)."""
    return sys.stderr if sys.stderr.isatty() else None
