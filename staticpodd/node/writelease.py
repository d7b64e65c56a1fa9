"""Is a file open for writing anywhere? The kernel's own count, asked with one read lease.

Before a restore or a quarantine renames over a live file, the daemon makes sure nobody is still
writing it (:meth:`staticpodd.daemon.writers.WriterHolds.hold_reason`). Scanning every
process's descriptors in ``/proc`` (:func:`staticpodd.node.watch.open_writers`) answers *who*, but
costs 2-3 ms on an idle machine, more on a busy one, and it is paid before every restore while
the kubelet may read the refused bytes (docs/kubelet-contract.md "What a broken file does to a running pod").

The kernel keeps the answer in the inode: how many open files may write it. ``fcntl(F_SETLEASE,
F_RDLCK)`` refuses a read lease with EAGAIN exactly when that count is above zero, whoever holds
them, even a process whose ``/proc/PID/fd`` is closed to us (fcntl(2), "Leases"); taken, the lease
is dropped at once. :func:`open_for_writing` asks that question, so the ``/proc`` scan is left to
the case where it has something to find (to name the writer in the journal).

What taking a lease does to others, for the microseconds it is held: a process that opens the
file for writing meanwhile waits until it is dropped (``O_NONBLOCK`` opens fail with
EWOULDBLOCK), and the kernel signals the holder. That signal is set to SIGURG, which a process
ignores unless it asks for it (its default action), instead of SIGIO, whose default ends the
process. Readers, the kubelet among them, are never held up.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import stat

#: fcntl commands (Linux values, for a Python built without them)
_F_SETLEASE = getattr(fcntl, "F_SETLEASE", 1024)
_F_SETSIG = getattr(fcntl, "F_SETSIG", 10)


def open_for_writing(path: str | os.PathLike[str], expect: os.stat_result | None = None) -> bool | None:
    """Whether any process holds the regular file ``path`` open for writing (``O_WRONLY`` or
    ``O_RDWR``), as the kernel counts it: True or False, or None when it cannot be asked (not a
    regular file, gone, not the inode of ``expect`` (a ``stat`` of it), or no lease to be had: a
    file we do not own without CAP_LEASE, a filesystem without leases such as NFS,
    ``fs.leases-enable=0``). Symlinks are followed. Never raises.

    True is the kernel's word, also for writers ``/proc`` does not show us; False means that
    ``/proc`` would show none either (each writer found there is one the kernel counts).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if expect is not None and (st.st_dev, st.st_ino) != (expect.st_dev, expect.st_ino):
            return None
        try:
            fcntl.fcntl(fd, _F_SETSIG, signal.SIGURG)
            fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
        except OSError as exc:
            return True if exc.errno == errno.EAGAIN else None
        try:
            fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
        except OSError:
            pass  # closing the descriptor drops it as well
        return False
    finally:
        os.close(fd)
