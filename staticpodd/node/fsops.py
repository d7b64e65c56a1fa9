"""The only code that writes, renames or removes anything inside the manifest directory.

Rules it keeps (docs/kubelet-contract.md "Consequences for staticpodd"):

1. Nothing but live manifests ever appears in the directory under a non-dot name: staging files
   live in ``.staticpodd/staging/``, parked copies in ``.staticpodd/parked/``.
2. New bytes are written to a staging file on the same mount, fsynced, given the live file's
   mode and owner, renamed over the target, and the directory is fsynced: the kubelet sees the
   complete old file or the complete new one, never a partial file.
3. Park/unpark are single renames on the same mount; unpark never replaces a file that appeared
   meanwhile (``renameat2(RENAME_NOREPLACE)``, or ``link``+``unlink`` where that is missing).
4. Unchanged bytes are never rewritten, chmodded or touched (callers compare digests first).

Crash points: for the crash-safety tests, :func:`crashpoint` kills the process with SIGKILL when
the environment variable ``STATICPODD_TEST_CRASHPOINT`` names the step being passed, and
:func:`pausepoint` sleeps where ``STATICPODD_TEST_PAUSEPOINT`` says. They are test hooks (like
SQLite's fault injection) and do nothing otherwise.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import FsError, LiveFileExists
from ..layout import Layout
from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import BinaryIO, Final

#: Mode and owner of new manifests: kubeadm writes 0600 root:root, and the CIS benchmark asks for it.
NEW_FILE_MODE = 0o600
NEW_FILE_UID = 0
NEW_FILE_GID = 0

STAGING_PREFIX = "stage-"

#: The largest file the kubelet reads: ``maxConfigLength`` (10 MiB) - 1, as
#: :data:`staticpodd.manifest.decoded.KUBELET_MAX_BYTES` (a file of exactly 10 MiB fails the kubelet's
#: ``utilio.ReadAtMost``); larger files are never copied into the version store.
KUBELET_MAX_BYTES = 10 * 1024 * 1024 - 1

_CRASHPOINT = os.environ.get("STATICPODD_TEST_CRASHPOINT")
_PAUSEPOINT = os.environ.get("STATICPODD_TEST_PAUSEPOINT")  # "NAME:SECONDS"
_FAILPOINT = os.environ.get("STATICPODD_TEST_FAILPOINT")


def crashpoint(name: str) -> None:
    """Die with SIGKILL here when ``STATICPODD_TEST_CRASHPOINT == name`` (tests only)."""
    if _CRASHPOINT is not None and _CRASHPOINT == name:
        import signal  # tests only: the signal module's enums cost every verb's start-up

        os.kill(os.getpid(), signal.SIGKILL)


def failpoint(name: str) -> None:
    """Raise RuntimeError here when ``STATICPODD_TEST_FAILPOINT == name`` (tests only: stands
    for a bug, the exception nobody planned for)."""
    if _FAILPOINT is not None and _FAILPOINT == name:
        raise RuntimeError(f"test failpoint {name}")


def pausepoint(name: str) -> None:
    """Sleep here when ``STATICPODD_TEST_PAUSEPOINT == "name:seconds"`` (tests only: widens a
    race window that is otherwise microseconds, so the test of what happens in it is exact)."""
    if _PAUSEPOINT is not None and _PAUSEPOINT.rpartition(":")[0] == name:
        import time

        time.sleep(float(_PAUSEPOINT.rpartition(":")[2]))


class FileState(FrozenRecord):
    """What is at a path now: bytes plus the stat fields we keep across swaps."""

    data: Final[bytes]
    mode: Final[int]  # permission bits only, e.g. 0o600
    uid: Final[int]
    gid: Final[int]
    ino: Final[int]
    is_symlink: Final[bool]

    def __init__(self, data: bytes, mode: int, uid: int, gid: int, ino: int, is_symlink: bool) -> None:
        self.data = data
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.ino = ino
        self.is_symlink = is_symlink


def fsync_dir(path: Path) -> None:
    """fsync a directory so that renames and unlinks in it are durable. Raises FsError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise FsError(f"cannot open directory to fsync it: {exc.strerror}", path=str(path)) from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsError(f"fsync of directory failed: {exc.strerror}", path=str(path)) from exc
    finally:
        os.close(fd)


def open_for_reading(path: Path | str) -> BinaryIO:
    """Open ``path`` (following a symlink) for reading without ever blocking: O_NONBLOCK, so a
    FIFO (no writer) or a device opens at once and the caller's ``os.fstat`` of the open file
    decides (every caller refuses what is not a regular file; O_NONBLOCK changes nothing for a
    regular file). O_NOCTTY: a terminal never becomes ours. Raises OSError (ENXIO for a socket).

    The kubelet never opens such files: its file source (pkg/kubelet/config/file.go) stats each
    entry and reads only regular files; any other entry is skipped with a log line (docs/kubelet-contract.md
    "Which files are pods").
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_state(path: Path) -> FileState | None:
    """Bytes, mode and owner of the regular file at ``path`` (following a symlink, as the kubelet
    does: docs/kubelet-contract.md "Which files are pods"), or None when there is no such file.

    Raises FsError for a path that exists but cannot be read (e.g. a directory).
    """
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FsError(f"cannot stat: {exc.strerror}", path=str(path)) from exc
    is_link = stat.S_ISLNK(lst.st_mode)
    try:
        with open_for_reading(path) as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise FsError("not a regular file", path=str(path))
            data = fh.read()
    except FileNotFoundError:
        return None  # dangling symlink, or removed meanwhile
    except IsADirectoryError as exc:
        raise FsError("is a directory, not a manifest file", path=str(path)) from exc
    except OSError as exc:
        raise FsError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    return FileState(data, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_ino, is_link)


def ensure_private_dirs(layout: Layout) -> None:
    """Create ``<manifests>/.staticpodd/{parked,staging,quarantine}`` (0700) when missing.

    Raises FsError when the manifest directory itself is missing or not writable, Untrusted (an
    FsError) when one of them is another user's, a symlink or not a directory.
    """
    if not layout.manifest_dir.is_dir():
        raise FsError(
            "the manifest directory does not exist",
            path=str(layout.manifest_dir),
            hint="check staticPodPath in /var/lib/kubelet/config.yaml, or pass --manifest-dir",
        )
    from .trust import ensure_dir

    # Exactly 0700 and ours whatever the umask: a user who could write here could swap a parked
    # copy or a staging file for a pod of their own, which root would then put live. One of ours
    # left looser is tightened; one owned by another user is refused (Untrusted).
    for d in (layout.private_dir, layout.parked_dir, layout.staging_dir, layout.quarantine_dir):
        try:
            ensure_dir(d, 0o700, "private directory")
        except OSError as exc:
            raise FsError(f"cannot create private directory: {exc.strerror}", path=str(d)) from exc


def write_staged(layout: Layout, file_name: str, data: bytes, *, mode: int, uid: int, gid: int) -> Path:
    """Write ``data`` to a new staging file for ``file_name``, with this mode/owner, fsynced.

    Returns the staging path (``<manifests>/.staticpodd/staging/stage-<file_name>.<random>``).
    The owner is set only when it differs from ours (non-root runs keep their own). Raises FsError.
    """
    ensure_private_dirs(layout)
    path = layout.staging_dir / f"{STAGING_PREFIX}{file_name}.{os.urandom(4).hex()}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise FsError(f"cannot create staging file: {exc.strerror}", path=str(path)) from exc
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (uid, gid):
            try:
                os.fchown(fd, uid, gid)
            except PermissionError:
                if os.geteuid() == 0:
                    raise
        os.fchmod(fd, mode)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        _unlink_quietly(path)
        raise FsError(f"cannot write staging file: {exc.strerror}", path=str(path)) from exc
    os.close(fd)
    return path


def replace(staged: Path, target: Path) -> None:
    """Atomically rename ``staged`` over ``target`` (same mount), then fsync both directories.

    Raises FsError (EXDEV means the two are on different mounts: see docs/kubelet-contract.md consequence 3).
    """
    try:
        os.rename(staged, target)
    except OSError as exc:
        raise FsError(f"rename into place failed: {exc.strerror}", path=str(target)) from exc
    fsync_dir(target.parent)
    if staged.parent != target.parent:
        fsync_dir(staged.parent)


_renameat2: tuple[object, object] | bool | None = None  # (renameat2, ctypes); False: absent; None: not looked
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class ChangedUnderfoot(Exception):
    """The file at ``path`` is not the one that was judged: someone wrote it meanwhile.

    ``state`` is what is there now (None: it is gone). Raised by :func:`replace_checked` before
    anything moved; the engine records ``state`` as a version and refuses."""

    def __init__(self, path: Path, state: FileState | None) -> None:
        super().__init__(str(path))
        self.path = path
        self.state = state


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def replace_checked(staged: Path, target: Path, expect_digest: str | None) -> FileState | None:
    """Put ``staged`` at ``target`` only if ``target`` still holds the bytes that were judged.

    ``expect_digest``: sha256 of the bytes the caller judged (validated, recorded, ran its hooks
    against); None means "there was no file": then the rename never replaces one that appeared
    meanwhile (``RENAME_NOREPLACE``). Right before the rename the target is read again and
    compared; a difference raises :class:`ChangedUnderfoot` and nothing moves.

    The replaced inode is first hard-linked into the staging directory, then ``staged`` is
    renamed over ``target`` with plain ``rename(2)``: a write that landed in the microseconds
    between the check and the swap (or through a descriptor opened before it) is not lost, since
    the old inode stays reachable through that link: its state is returned for the caller to
    record, and the link is then removed. Not ``renameat2(RENAME_EXCHANGE)``: an exchange moves the
    live name out (IN_MOVED_FROM), which a real kubelet 1.34 takes as the file's deletion and
    kills the running pod before re-adding it, so every restore of the same bytes restarted it
    (tests/e2e/test_e2e_restore.py: 0-1 of 10 runs kept their container); ``rename(2)`` gives it
    one IN_MOVED_TO (docs/kubelet-contract.md "When the kubelet looks"). The link adds only IN_ATTRIB on the
    live file, a re-read of bytes that do not change the pod. Where no hard link can be made the
    rename happens alone and None is returned. fsyncs both directories. Raises
    ChangedUnderfoot, LiveFileExists (a file appeared where there was none), FsError.
    """
    try:
        now = read_state(target)
    except FsError:
        now = None
        if expect_digest is not None:
            raise
    if (None if now is None else _digest(now.data)) != expect_digest:
        raise ChangedUnderfoot(target, now)
    if expect_digest is None:
        try:
            move_noreplace(staged, target)
        except LiveFileExists:
            raise ChangedUnderfoot(target, read_state(target)) from None
        return None
    pausepoint("swap:checked")
    held = staged.with_name(staged.name + ".replaced")
    try:
        os.link(target, held, follow_symlinks=False)
    except FileNotFoundError:
        raise ChangedUnderfoot(target, None) from None
    except OSError:
        held = None  # type: ignore[assignment]  # no hard links here: rename alone
    replace(staged, target)
    if held is None:
        return None
    crashpoint("swap:exchanged")
    try:
        old = read_state(held)
    except FsError:
        old = None
    late = old if old is not None and _digest(old.data) != expect_digest else None
    _unlink_quietly(held)
    fsync_dir(held.parent)
    return late


def _load_renameat2():  # type: ignore[no-untyped-def]
    global _renameat2
    if _renameat2 is None and os.environ.get("STATICPODD_TEST_NO_RENAMEAT2") == "1":
        _renameat2 = False  # tests: exercise the link()+unlink() fallback
    if _renameat2 is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = (fn, ctypes)
        except (OSError, AttributeError):
            _renameat2 = False
    return _renameat2


def move_noreplace(src: Path, dst: Path, *, sync: bool = True) -> None:
    """Rename ``src`` to ``dst`` on the same mount, failing if ``dst`` exists. fsyncs both dirs
    (unless ``sync`` is False: a caller moving many files fsyncs the two directories once after).

    Uses ``renameat2(RENAME_NOREPLACE)``; where the C library or filesystem lacks it, falls back to
    ``link`` + ``unlink`` (also never replaces). Raises LiveFileExists when ``dst`` exists, FsError
    otherwise.
    """
    r2 = _load_renameat2()
    done = False
    if r2:
        fn, ctypes = r2
        rc = fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        if rc == 0:
            done = True
        else:
            err = ctypes.get_errno()
            if err == errno.EEXIST:
                raise LiveFileExists(f"{dst.name} exists; not replacing it", path=str(dst))
            if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
                raise FsError(f"rename failed: {os.strerror(err)}", path=str(dst))
    if not done:
        try:
            os.link(src, dst)
        except FileExistsError as exc:
            raise LiveFileExists(f"{dst.name} exists; not replacing it", path=str(dst)) from exc
        except OSError as exc:
            raise FsError(f"link failed: {exc.strerror}", path=str(dst)) from exc
        crashpoint("move:linked")
        try:
            os.unlink(src)
        except OSError as exc:
            raise FsError(f"unlink after link failed: {exc.strerror}", path=str(src)) from exc
    if not sync:
        return
    fsync_dir(dst.parent)
    if src.parent != dst.parent:
        fsync_dir(src.parent)


def remove(path: Path) -> None:
    """Unlink ``path`` and fsync its directory. Missing is not an error. Raises FsError."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FsError(f"cannot remove: {exc.strerror}", path=str(path)) from exc
    fsync_dir(path.parent)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def sweep_staging(layout: Layout, keep: set[str]) -> list[Path]:
    """Remove staging files not named in ``keep`` (file names of in-flight intents).

    Called under the lock, where no other writer can be mid-way. Returns the removed paths.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(layout.staging_dir))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if entry.name in keep or not entry.is_file(follow_symlinks=False):
            continue
        _unlink_quietly(Path(entry.path))
        removed.append(Path(entry.path))
    if removed:
        fsync_dir(layout.staging_dir)
    return removed


def remove_private_dir_if_alone(layout: Layout) -> bool:
    """Remove ``<manifests>/.staticpodd/`` when it is the only entry of the manifest directory
    and holds nothing but its empty subdirectories (parked, staging, quarantine).

    It was reported that kubeadm's preflight ``DirAvailable--etc-kubernetes-manifests``
    refuses a non-empty directory, dot-entries included. kubeadm v1.34.2 has no such check on
    the manifest directory (``cmd/kubeadm/app/preflight/checks.go``: ``InitNodeChecks`` only
    requires the four manifest files to be absent; ``DirAvailableCheck`` runs on etcd's data
    directory), but ``DirAvailableCheck`` itself counts dot-entries, and an operator or another
    tool checking "is the directory empty" does too: so the empty ``.staticpodd/`` left behind
    after the last parked or applied file went away is removed. A file anywhere inside (a
    parked or quarantined manifest) keeps it: nothing the user had is lost. Call under the
    lock. Returns True when it was removed; never raises (a failure leaves it for the next pass).
    """
    try:
        if os.listdir(layout.manifest_dir) != [layout.private_dir.name]:
            return False
        subdirs = os.listdir(layout.private_dir)
        known = {layout.parked_dir.name, layout.staging_dir.name, layout.quarantine_dir.name}
        if not set(subdirs) <= known:
            return False
        for name in subdirs:
            if os.listdir(layout.private_dir / name):
                return False
        for name in subdirs:
            os.rmdir(layout.private_dir / name)
        os.rmdir(layout.private_dir)
        fsync_dir(layout.manifest_dir)
    except OSError:
        return False
    return True
