"""Whether a file or directory may be read back with the caller's authority.

What staticpodd reads back and acts on as root (the configuration, its checked cache, hooks,
parked copies, staging files, the version store and the state directories) must not be
something another local user could have written: otherwise that user chooses what root runs
(a ``wait.crictl`` program) or starts (a parked pod). One rule for all of them: the owner is root
or the caller's effective uid, and neither the group nor others may write it. Directories are
checked the same way, and so are the parents up to the root of the layout that a user could
otherwise rename things in.

We also create these paths with explicit modes whatever the umask (:func:`ensure_dir`,
:func:`write_file`), and tighten a directory of ours that an older release or a hand left looser.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import Untrusted

TYPE_CHECKING = False  # typing is for mypy only: the fast verbs import this module
if TYPE_CHECKING:
    from typing import Any


_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def trusted_uids() -> tuple[int, ...]:
    """The owners whose files we act on: root and the caller's effective uid."""
    euid = os.geteuid()
    return (0,) if euid == 0 else (0, euid)


def problem_of(st: os.stat_result) -> str | None:
    """Why a file with this ``stat`` must not be trusted, or None when it may be."""
    return owner_mode_problem(st.st_uid, stat.S_IMODE(st.st_mode))


def owner_mode_problem(uid: int, mode: int) -> str | None:
    """Why a file owned by ``uid`` with permission bits ``mode`` must not be trusted, or None."""
    if uid not in trusted_uids():
        return f"owned by uid {uid} (mode {mode:04o}), not by root or uid {os.geteuid()}"
    if mode & _WRITABLE_BY_OTHERS:
        who = "group- and world-writable" if mode & stat.S_IWOTH and mode & stat.S_IWGRP else (
            "world-writable" if mode & stat.S_IWOTH else "group-writable")
        return f"{who} (owner uid {uid}, mode {mode:04o})"
    return None


def untrusted(path: Path, what: str, reason: str) -> Untrusted:
    """The error for ``path`` (``what`` it is, ``reason`` from :func:`problem_of`, or "not a
    regular file" / "not a directory ...": then chown and chmod would not help, and on a symlink
    would change its target, so the hint says to put the right kind of file there instead)."""
    if reason.startswith("not a "):
        kind = "directory" if reason.startswith("not a directory") else "regular file"
        return Untrusted(
            f"refusing the {what}: it is {reason}",
            path=str(path),
            hint=f"put a {kind} there, owned by root and not group/world-writable (see: ls -ld {path})",
        )
    return Untrusted(
        f"refusing the {what}: it is {reason}, so another user could have written it",
        path=str(path),
        hint=f"make it owned by root and not group/world-writable (chown root: {path}; chmod go-w {path})",
    )


def check_path(path: Path, what: str, *, parents_up_to: Path | None = None) -> os.stat_result:
    """Stat ``path`` (following a final symlink: what is checked is what will be read) and raise
    Untrusted when another user could have written it; with ``parents_up_to``, check every parent
    directory of ``path`` below (and including) that one too. Returns the stat. Raises
    FileNotFoundError when it does not exist."""
    st = os.stat(path)
    reason = problem_of(st)
    if reason:
        raise untrusted(path, what, reason)
    if parents_up_to is not None:
        stop = Path(os.path.abspath(parents_up_to))
        p = Path(os.path.abspath(path)).parent
        while True:
            pst = os.stat(p)
            preason = problem_of(pst)
            if preason and not (pst.st_mode & stat.S_ISVTX and pst.st_uid in trusted_uids()):
                raise untrusted(p, f"directory holding the {what}", preason)
            if p == stop or p.parent == p or stop not in p.parents:
                break
            p = p.parent
    return st


def check_fd(fd: int, path: Path, what: str) -> os.stat_result:
    """As :func:`check_path`, for an open descriptor (no race between the check and the read)."""
    st = os.fstat(fd)
    reason = problem_of(st)
    if reason:
        raise untrusted(path, what, reason)
    return st


def read_trusted(path: Path, what: str, *, limit: int = 1 << 20, follow: bool = False) -> bytes:
    """The bytes of ``path`` (at most ``limit``), opened without following a symlink (unless
    ``follow``: then the target is what is checked), after checking on the open descriptor that
    only root or the caller could have written them. Raises FileNotFoundError, OSError, or
    Untrusted."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = check_fd(fd, path, what)
        if not stat.S_ISREG(st.st_mode):
            raise untrusted(path, what, "not a regular file")
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def ensure_dir(path: Path, mode: int, what: str) -> None:
    """Make ``path`` a directory of ours with exactly ``mode``, whatever the umask: create it
    (missing parents as ``mkdir -p`` would), tighten it when we own it and it is looser, refuse
    it (Untrusted) when another user owns it or it is a symlink. Raises OSError when it cannot be
    created."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not path.parent.exists():  # /var/lib, /run in a fresh --root: as mkdir -p makes them
            os.makedirs(path.parent, 0o755, exist_ok=True)
        try:
            os.mkdir(path, mode)
            os.chmod(path, mode)  # exactly, whatever the umask took away
        except FileExistsError:
            pass
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise untrusted(path, what, "not a directory (a symlink or a file)")
    if st.st_uid not in trusted_uids():
        raise untrusted(path, what, problem_of(st) or f"owned by uid {st.st_uid}")
    if stat.S_IMODE(st.st_mode) != mode and stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode, follow_symlinks=False)


def dir_problem(path: Path, mode: int) -> str | None:
    """For ``doctor``: why the directory at ``path`` is not as :func:`ensure_dir` leaves it
    (owned by root or us, no bits beyond ``mode``), or None (also when it does not exist)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return "is not a directory (a symlink or a file)"
    reason = problem_of(st)
    if reason:
        return f"is {reason}"
    extra = stat.S_IMODE(st.st_mode) & ~mode
    if extra:
        return f"has mode {stat.S_IMODE(st.st_mode):04o}, looser than {mode:04o}"
    return None


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` atomically with ``data`` at exactly ``mode`` (fchmod: the umask does not
    apply). The temporary file is created exclusively, never through a symlink. Raises OSError."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(3).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def layout_problems(layout: Any) -> list[tuple[str, str, str]]:
    """For ``doctor``: ``(code, message, path)`` for every directory or file of ``layout`` that is
    not as staticpodd leaves it. ``untrusted-path``: another user owns it or could write it
    (staticpodd refuses it); ``loose-mode``: ours but looser than intended (the next write
    tightens it; a version store others can read shows every manifest's secrets)."""
    out: list[tuple[str, str, str]] = []
    dirs = [(layout.manifest_dir, None), (layout.config_dir, None), (layout.run_dir, 0o755),
            (layout.state_dir, 0o700), (layout.private_dir, 0o700), (layout.parked_dir, 0o700),
            (layout.staging_dir, 0o700), (layout.quarantine_dir, 0o700), (layout.hooks_dir, None)]
    files = [(layout.db_path, 0o600), (layout.db_path.with_name(layout.db_path.name + "-wal"), 0o600),
             (layout.config_path, None), (layout.run_dir / "config-checked.json", 0o644)]
    for path, mode in dirs + files:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        bits = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode) and path != layout.config_path and path != layout.manifest_dir:
            out.append(("untrusted-path", f"{path} is a symlink where staticpodd keeps its own "
                        "directory or file; it is refused", str(path)))
            continue
        bad = problem_of(st)
        if bad:
            out.append(("untrusted-path", f"{path} is {bad}: another user could have written it, "
                        "so staticpodd refuses it (make it owned by root, chmod go-w)", str(path)))
        elif mode is not None and bits & ~mode:
            what = "readable by other users" if bits & 0o044 and not mode & 0o044 else "looser than intended"
            out.append(("loose-mode", f"{path} has mode {bits:04o}, {what} (intended {mode:04o}; "
                        f"chmod {mode:04o} {path}, or the next change tightens it)", str(path)))
    return out


def trusted_kubeconfig(path: Path, what: str, *, parents_up_to: Path) -> None:
    """Refuse (Untrusted) a kubeconfig another user could have written or swapped: the file, and
    every directory from it up to ``parents_up_to``, as :func:`check_path` checks them; and one
    that is not a regular file (a FIFO would hold the reader forever). The client runs what a
    kubeconfig says (``users[].user.exec``), as the caller. Raises FileNotFoundError when it does
    not exist."""
    st = check_path(path, what, parents_up_to=parents_up_to)
    if not stat.S_ISREG(st.st_mode):
        raise untrusted(path, what, "not a regular file")
