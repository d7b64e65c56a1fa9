"""The one lock every writer takes: an ``flock`` on ``/run/staticpodd/lock``.

staticpodctl invocations and the daemon serialise on it (DESIGN.md "Shape of the code"). A
waiter polls with a bounded timeout and says who holds the lock: the holder writes its pid and
command line into the lock file after taking it.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from .errors import LockTimeout

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
        if self._depth:
            self._depth += 1
            return
        self.path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        start = time.monotonic()
        deadline = start + timeout
        told = False
        delay = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if now >= deadline:
                    os.close(fd)
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
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {self.description}\n".encode(), 0)
        self._fd = fd
        self._depth = 1

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


def default_notify() -> TextIO | None:
    """stderr when it is a terminal, else None (no chatter in scripts and config management)."""
    return sys.stderr if sys.stderr.isatty() else None
