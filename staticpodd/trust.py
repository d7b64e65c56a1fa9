"""Who may have written a file or directory that staticpodd reads back with authority.

A file staticpodd acts on (the configuration, its cache, hooks, parked copies, staging files, the
version store, the state directories) must be one only root, or the user running staticpodd,
could have written: owned by uid 0 or by us, and writable by neither its group nor others. A
directory must pass the same test, or anyone could swap the files inside it (a parked copy
swapped for a privileged pod is started by root's ``unpark``).

What is ours is created with explicit modes, whatever the umask, and tightened when an older
release or a hand left it looser; what is not ours is refused. Imports nothing of staticpodd
but the errors, so every verb can use it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import FsError

__all__ = ["TRUSTED_HINT", "loose_for", "private_dir", "trust_problem", "trusted_uids"]

TRUSTED_HINT = "it must be owned by root (or the user running staticpodd) and writable only by its owner"


def trusted_uids() -> tuple[int, ...]:
    """The owners whose files are trusted: root, and the effective user running this process."""
    return (0, os.geteuid())


def trust_problem(st: os.stat_result, what: str) -> str | None:
    """Why ``st`` cannot be trusted (another owner, or group/other may write), or None.

    ``what``: how to name it in the sentence (``"configuration file /etc/staticpodd/x"``).
    """
    if st.st_uid not in trusted_uids():
        return f"{what} is owned by uid {st.st_uid}, not by root or uid {os.geteuid()}"
    if st.st_mode & stat.S_IWOTH:
        return f"{what} is writable by every user (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_mode & stat.S_IWGRP:
        return f"{what} is writable by its group (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def loose_for(st: os.stat_result, mode: int) -> bool:
    """Whether ``st`` grants any permission bit that ``mode`` does not."""
    return bool(stat.S_IMODE(st.st_mode) & ~mode)


def private_dir(path: Path, mode: int, *, what: str) -> bool:
    """Make sure ``path`` is a directory of ours with at most ``mode`` (e.g. 0o700), creating it
    (and missing parents, with the same mode) when absent.

    An existing directory of ours that grants more than ``mode`` is tightened to ``mode``; one
    that is a symlink, not a directory, or owned by another user is refused. Returns True when
    it tightened something. Raises FsError naming the path, its owner and mode.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.makedirs(path, mode=mode, exist_ok=True)
            os.chmod(path, mode)  # mkdir's mode is masked by the umask; chmod is not
        except OSError as exc:
            raise FsError(f"cannot create the {what}: {exc.strerror}", path=str(path)) from exc
        return False
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
        raise FsError(f"the {what} is {kind}: refusing to use it", path=str(path),
                      hint=f"move it aside; staticpodd creates the {what} itself ({TRUSTED_HINT})")
    if st.st_uid not in trusted_uids():
        raise FsError(f"the {what} is owned by uid {st.st_uid}: refusing to use it (another user could swap "
                      "the files inside it)", path=str(path),
                      hint=f"check who made it; then chown root:root and chmod {mode:04o} it ({TRUSTED_HINT})")
    if loose_for(st, mode):
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
        except OSError as exc:
            raise FsError(f"the {what} has mode {stat.S_IMODE(st.st_mode):04o} and cannot be tightened: "
                          f"{exc.strerror}", path=str(path)) from exc
        return True
    return False
