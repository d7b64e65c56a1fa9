"""watchdog adapter: inotify events on the manifest directory -> debounced "look at X" hints.

No decisions are taken here. An event only says *which name* to re-read; the daemon reads the
bytes and compares digests with the store (docs/kubelet-contract.md consequence 8: inotify is a hint, queues
overflow, and watchdog drops IN_Q_OVERFLOW silently, so the daemon also rescans periodically).

Shapes:

- :class:`Hint` ``(kind, name)``: ``("file", "kube-scheduler.yaml")`` for a name directly in the
  manifest directory (file, directory or symlink: the kubelet reads every non-dot name,
  docs/kubelet-contract.md "Which files are pods"); ``("parked", "kube-scheduler.yaml")`` for a parked copy in
  ``.staticpodd/parked/`` (a hand edit there is drift); ``("directory", "")`` when the manifest
  directory itself, the private area or ``parked/`` was removed or moved (rescan and re-watch).
- :class:`Hints`: thread-safe per-hint debounce table with a wake-up pipe the daemon's main loop
  blocks on (``select``) together with signals (``signal.set_wakeup_fd``).
- :class:`OpenWrites`: which live names are being written right now, from inotify alone (a
  change, IN_MODIFY or IN_CREATE, not yet followed by IN_CLOSE_WRITE); needs no privilege,
  unlike :func:`open_writers`' scan of ``/proc/*/fd``.
- :class:`Watcher`: one watchdog ``Observer`` with two non-recursive watches, the manifest
  directory and ``.staticpodd/parked/``; re-created when the directory is replaced or recreated.

About 640 lines, a little over the ~600 a module should stay under, on purpose: the parts above share one
vocabulary (event types, hints, the manifest directory's names) and are read together when
following an event; no class is over 220 lines. If it grows, :func:`open_writers` and
:class:`Writer` (the ``/proc`` scan) are the part to move out.
"""

from __future__ import annotations

import errno
import inspect
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..layout import PRIVATE_DIRNAME

#: Event types that can mean new bytes, a new name, a gone name or a new mode/owner. Opens and
#: close-without-write are ignored: the daemon's own reads must not wake it up.
_INTERESTING = frozenset({"created", "modified", "deleted", "moved", "closed", "attrib"})


class Hint(NamedTuple):
    """What to look at: ``kind`` is ``"file"``, ``"parked"`` or ``"directory"``; ``name`` a file name."""

    kind: str
    name: str


DIRECTORY = Hint("directory", "")


def classify(root: str, path: str, *, event_type: str = "modified", is_directory: bool = False) -> Hint | None:
    """Map one event path to a Hint, or None when the kubelet and staticpodd do not care.

    ``root``: the watched manifest directory; ``path``: the event's path. Dot-names at the top
    are ignored (the kubelet ignores them too, docs/kubelet-contract.md "Which files are pods"), except that
    removing or moving ``.staticpodd`` or ``.staticpodd/parked`` is a DIRECTORY hint. Names
    inside non-dot subdirectories are ignored (the kubelet does not recurse); the subdirectory
    itself is a "file" hint (a directory finding).
    """
    if not path:
        return None
    if os.path.normpath(path) == os.path.normpath(root):
        return DIRECTORY if event_type in ("deleted", "moved") else None
    rel = os.path.relpath(path, root)
    if rel.startswith(".." + os.sep) or rel == "..":
        return None
    parts = rel.split(os.sep)
    if len(parts) == 1:
        name = parts[0]
        if not name.startswith("."):
            return Hint("file", name)
        if name == PRIVATE_DIRNAME and is_directory and event_type in ("deleted", "moved"):
            return DIRECTORY
        return None
    if parts[0] != PRIVATE_DIRNAME or parts[1] != "parked":
        return None
    if len(parts) == 2:
        return DIRECTORY if is_directory and event_type in ("deleted", "moved") else None
    if len(parts) == 3 and not parts[2].startswith("."):
        return Hint("parked", parts[2])
    return None


#: Seconds after its last change that a file still counts as being written when its writer has
#: not closed it (IN_CLOSE_WRITE never came, or ``/proc`` still shows the writer): past this, the
#: writer is taken as stalled (a hung editor holding the descriptor, a lost event) and the daemon's
#: policies act on the file as it is. A slow, non-atomic write that pauses longer than this
#: between two writes is judged half-written.
WRITE_STALL = 60.0


class OpenWrites:
    """Live file names being written right now, as inotify tells it (thread-safe).

    A name is *open for writing* from a change (watchdog ``FileModifiedEvent``: IN_MODIFY, a
    write or truncate; ``FileCreatedEvent`` of an empty regular file with one link: a new file
    someone opened with O_CREAT and has not written yet) until its IN_CLOSE_WRITE
    (``FileClosedEvent``), its removal or a rename from or onto the name (a rename brings a
    complete inode: the atomic write). Symlinks, new hard links and non-empty files are not
    writes when created: watchdog also reports a rename from an unwatched directory into this one
    (``mv /tmp/x.yaml .``, IN_MOVED_TO alone) as created, and a real writer's bytes come with
    their own IN_MODIFY. inotify needs no privilege, so this works where
    the ``/proc/PID/fd`` scan cannot see other processes' descriptors (no CAP_SYS_PTRACE).

    Limits: a writer that opened the file before the watch began is seen from its next write
    on; a second writer's close ends the mark of the first (its next write sets it again).

    ``attrib_as_modify``: watchdog before 5 reports IN_ATTRIB (chmod, chown, touch -m) as
    ``FileModifiedEvent`` too; then a modification counts only when the file's mtime equals its
    ctime (a write sets both to the same instant; chmod, chown and utime with a given time move
    ctime alone). Default: detected from the installed watchdog.
    Times are ``time.monotonic()`` seconds.
    """

    def __init__(self, *, attrib_as_modify: bool | None = None) -> None:
        if attrib_as_modify is None:
            from watchdog import events as ev

            attrib_as_modify = not hasattr(ev, "FileAttribEvent")
        self.attrib_as_modify = attrib_as_modify
        self._lock = threading.Lock()
        self._open: dict[str, float] = {}  # name -> monotonic time of its last change

    def note(self, event_type: str, name: str, path: str, now: float | None = None) -> None:
        """Record one watchdog event (``event_type`` as watchdog spells it) for the live file
        ``name`` at ``path`` (watchdog thread). For a rename call it for both names with
        ``"moved"``. Never raises."""
        now = time.monotonic() if now is None else now
        mark: bool | None = None  # True: being written, False: done, None: no news
        if event_type == "created":
            try:
                st = os.lstat(path)
                mark = stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_size == 0
            except OSError:
                mark = False
        elif event_type == "modified":
            mark = True
            if self.attrib_as_modify:
                try:
                    st = os.stat(path)
                except OSError:
                    mark = False
                else:
                    mark = st.st_mtime_ns == st.st_ctime_ns
                    if not mark:
                        return  # an attribute change: no news (a chmod during a write: it goes on)
        elif event_type in ("closed", "deleted", "moved"):
            mark = False
        if mark is None:
            return
        with self._lock:
            if mark:
                self._open[name] = now
            else:
                self._open.pop(name, None)

    def since(self, name: str, now: float | None = None) -> float | None:
        """Seconds since the last change of ``name`` while it is open for writing, or None when
        it is not (closed, removed, renamed, or never seen changing)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            last = self._open.get(name)
        return None if last is None else max(0.0, now - last)

    def names(self) -> set[str]:
        """Every name open for writing (whatever its age)."""
        with self._lock:
            return set(self._open)

    def clear(self) -> None:
        """Forget everything (a new watch: what happened to the old directory is unknown)."""
        with self._lock:
            self._open.clear()


class Hints:
    """Per-hint debounce table, filled by the watchdog thread, drained by the daemon's main loop.

    A hint becomes due ``debounce`` seconds after its *last* event, but no later than
    ``max_delay`` seconds after its *first* one (a file written continuously is still looked at).
    ``fileno()`` is the read end of a non-blocking pipe that becomes readable when a new hint
    arrives or :meth:`wake` is called; ``wakeup_fd`` is the write end (for ``signal.set_wakeup_fd``).
    Times are ``time.monotonic()`` seconds.
    """

    def __init__(self, debounce: float, max_delay: float | None = None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Hint, tuple[float, float]] = {}  # hint -> (first, last)
        self.debounce = 0.0
        self.max_delay = 0.0
        self.set_debounce(debounce, max_delay)
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.events = 0  # interesting events seen (for status / tests)
        #: live names being written, as inotify tells it (filled by :class:`Watcher`)
        self.writes = OpenWrites()
        #: live names a writer closed (IN_CLOSE_WRITE) since the last :meth:`take_closed`
        self._closed: set[str] = set()

    def set_debounce(self, debounce: float, max_delay: float | None = None) -> None:
        """Change the quiet time (seconds); ``max_delay`` defaults to max(1 s, 5 x debounce)."""
        self.debounce = max(0.0, float(debounce))
        self.max_delay = float(max_delay) if max_delay is not None else max(1.0, 5 * self.debounce)

    def fileno(self) -> int:
        """Read end of the wake-up pipe (select on it)."""
        return self._r

    @property
    def wakeup_fd(self) -> int:
        """Write end of the wake-up pipe (non-blocking)."""
        return self._w

    def add(self, hint: Hint, now: float | None = None) -> None:
        """Record an event for ``hint`` (any thread). Wakes the main loop when the hint is new."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self.events += 1
            prev = self._pending.get(hint)
            self._pending[hint] = (prev[0] if prev else now, now)
        if prev is None:
            self.wake()

    def note_closed(self, name: str) -> None:
        """A writer closed live file ``name`` (any thread); wakes the main loop, which may look
        at it before its debounce (:mod:`staticpodd.validate.refused`)."""
        with self._lock:
            self._closed.add(name)
        self.wake()

    def take_closed(self) -> set[str]:
        """Remove and return the names closed since the last call."""
        with self._lock:
            out, self._closed = self._closed, set()
        return out

    def wake(self) -> None:
        """Make ``fileno()`` readable (any thread)."""
        try:
            os.write(self._w, b"\0")
        except (BlockingIOError, OSError):
            pass  # pipe full: the loop is going to wake anyway

    def drain(self) -> None:
        """Empty the wake-up pipe (main loop, after select returned)."""
        try:
            while os.read(self._r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _deadline(self, first: float, last: float) -> float:
        return min(last + self.debounce, first + self.max_delay)

    def next_deadline(self) -> float | None:
        """Monotonic time at which the next pending hint becomes due, or None."""
        with self._lock:
            if not self._pending:
                return None
            return min(self._deadline(f, la) for f, la in self._pending.values())

    def take_due(self, now: float | None = None) -> list[Hint]:
        """Remove and return the hints that are due (sorted for a stable order)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            due = [h for h, (f, la) in self._pending.items() if self._deadline(f, la) <= now]
            for h in due:
                del self._pending[h]
        return sorted(due)

    def take_all(self) -> list[Hint]:
        """Remove and return every pending hint (a full rescan covers them)."""
        with self._lock:
            out = sorted(self._pending)
            self._pending.clear()
        return out

    def pending_names(self) -> set[str]:
        """File names with events still inside their quiet time (someone may be writing them)."""
        with self._lock:
            return {h.name for h in self._pending if h.name}

    def discard(self, hint: Hint) -> None:
        """Forget one pending hint (e.g. DIRECTORY once a full rescan is under way)."""
        with self._lock:
            self._pending.pop(hint, None)

    def pending(self) -> int:
        """Number of hints waiting for their debounce."""
        with self._lock:
            return len(self._pending)

    def close(self) -> None:
        """Close the pipe."""
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass


class Writer(NamedTuple):
    """A process holding a file open for writing: ``pid``, ``comm`` (its /proc/PID/comm, the
    kernel's 15-character command name) and the descriptor number ``fd``."""

    pid: int
    comm: str
    fd: int


#: ``O_ACCMODE`` bits of /proc/PID/fdinfo/N ``flags`` (octal) meaning "open for writing".
_WRITE_MODES = (os.O_WRONLY, os.O_RDWR)


def open_writers(
    path: str | os.PathLike[str],
    *,
    proc: str = "/proc",
    skip_self: bool = True,
    denied: set[int] | None = None,
) -> list[Writer]:
    """Processes that hold ``path`` open for writing, found by scanning ``/proc/*/fd``.

    A descriptor matches when the file it refers to has the same ``(st_dev, st_ino)`` as ``path``
    (``os.stat`` of ``/proc/PID/fd/N`` follows the magic link, so renamed or unlinked-but-open
    files are compared by identity, not by name) and ``O_ACCMODE`` of the ``flags:`` line in
    ``/proc/PID/fdinfo/N`` is ``O_WRONLY`` or ``O_RDWR``. Sockets, pipes and anonymous inodes are
    skipped by their link text before any stat. Processes that exit during the scan and those
    whose ``/proc`` entries we may not read are skipped; when ``denied`` is given, the pids of
    the latter (EACCES/EPERM listing ``/proc/PID/fd`` or reading its links) are added to it. Root alone is not enough to
    see everyone: the kernel's ptrace access check also wants CAP_SYS_PTRACE for a process with
    capabilities we lack (a full root shell seen from a unit with a reduced
    CapabilityBoundingSet), which is why the daemon also asks :class:`OpenWrites`.
    The calling process is skipped unless ``skip_self=False``.

    Returns ``[]`` when ``path`` is missing. Never raises for /proc races. Linux only (on other
    systems ``proc`` does not exist and the answer is ``[]``). Cost: one readlink per open
    descriptor on the machine, plus a stat for each one naming a file: about 2-3 ms for ~80
    processes with ~400 descriptors (measured on the CI machine); run only before a restore or a
    quarantine, never on every event.
    """
    try:
        want = os.stat(path)
    except OSError:
        return []
    ident = (want.st_dev, want.st_ino)
    me = os.getpid()
    out: list[Writer] = []
    try:
        pids = [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if skip_self and pid == me:
            continue
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError as exc:
            if denied is not None and exc.errno in (errno.EACCES, errno.EPERM):
                denied.add(pid)
            continue  # gone, a kernel thread, or not ours to read
        for fd in fds:
            link = f"{fd_dir}/{fd}"
            try:
                target = os.readlink(link)
                if not target.startswith("/"):
                    continue  # socket:[…], pipe:[…], anon_inode:…
                st = os.stat(link)
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    # the directory lists, but each link is behind the ptrace access check
                    if denied is not None:
                        denied.add(pid)
                    break
                continue
            if (st.st_dev, st.st_ino) != ident:
                continue
            try:
                with open(f"{proc}/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
                    flags = next((int(line.split()[1], 8) for line in fh if line.startswith("flags:")), 0)
            except (OSError, ValueError, IndexError):
                continue
            if (flags & os.O_ACCMODE) not in _WRITE_MODES:
                continue
            try:
                with open(f"{proc}/{pid}/comm", encoding="utf-8", errors="replace") as fh:
                    comm = fh.read().strip()
            except OSError:
                comm = "?"
            out.append(Writer(pid, comm, int(fd)))
    return out


def hidden_from_proc(*, proc: str = "/proc") -> set[int]:
    """Pids whose open descriptors :func:`open_writers` cannot see: ``/proc/PID/fd`` may not be
    listed, or its links may not be read (EACCES/EPERM: the ptrace access check, see
    :func:`open_writers`). The same answer as ``open_writers(path, denied=...)`` gives for any
    path, for one listing and at most one readlink per process instead of one per descriptor
    (the daemon asks once, at start). Our own process is skipped. Never raises."""
    me = os.getpid()
    out: set[int] = set()
    try:
        pids = [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return out
    for pid in pids:
        if pid == me:
            continue
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                out.add(pid)
            continue
        for fd in fds:  # one link read is enough: they are all behind the same check
            try:
                os.readlink(f"{fd_dir}/{fd}")
            except OSError as exc:
                if exc.errno in (errno.EACCES, errno.EPERM):
                    out.add(pid)
                    break
                continue  # closed meanwhile: try the next one
            break
    return out


class _Wake:
    """An item for a stopped watchdog observer's event queue that reaches no handler (it equals
    nothing else, and no watch is scheduled under it): see :func:`_wake_dispatcher`."""

    def __eq__(self, other: object) -> bool:
        return other is self  # never NotImplemented: watchdog's own __eq__ is never asked

    def __ne__(self, other: object) -> bool:
        return other is not self

    def __hash__(self) -> int:
        return id(self)


def _wake_dispatcher(observer: Any) -> None:
    """Wake ``observer``'s dispatcher thread after ``observer.stop()``, so that joining it waits
    for nothing. watchdog 2.2 and later put a sentinel in the event queue on stop; earlier ones
    (Ubuntu 22.04's python3-watchdog is 2.1.6) block in ``event_queue.get(timeout=1)`` and see
    the stop only when an event comes or that second passes: up to 1 s of every daemon stop,
    reload and re-watch spent waiting on an idle timeout. One item that dispatches to no handler
    ends that wait; with a sentinel, the dispatcher has returned before reaching it. Uses only
    ``observer.event_queue`` (a public property in every version). Never raises."""
    try:
        item = _Wake()
        observer.event_queue.put((item, item))
    except Exception:  # noqa: BLE001 - a missed wake-up costs the timeout, nothing else
        pass


def _event_filter() -> list[Any] | None:
    """watchdog event classes to subscribe to (watchdog >= 4 filters in the kernel mask)."""
    from watchdog import events as ev

    names = [
        "FileCreatedEvent", "DirCreatedEvent", "FileModifiedEvent", "DirModifiedEvent",
        "FileDeletedEvent", "DirDeletedEvent", "FileMovedEvent", "DirMovedEvent",
        "FileClosedEvent", "FileAttribEvent", "DirAttribEvent",
    ]  # fmt: skip
    return [getattr(ev, n) for n in names if hasattr(ev, n)]


def dir_identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of a directory, or None when it is missing or not a directory."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


class Watcher:
    """inotify watches (through one watchdog Observer) feeding :class:`Hints`.

    Two non-recursive watches, as the kubelet itself looks (it never recurses, docs/kubelet-contract.md
    "Which files are pods"): the manifest directory, and ``.staticpodd/parked/`` once it exists
    (a hand edit of a parked copy is drift). Nothing else below the directory is watched, so a
    big subtree someone keeps there (a ``.git``, an ``apps/`` directory) costs no inotify watches.

    :meth:`ensure` (call it on every loop) (re)creates the watch when the directory appeared,
    was replaced (new ``st_dev``/``st_ino``), was recreated, or the watch died, and adds, drops or
    renews the ``parked/`` watch as that directory comes and goes; it returns what happened to the
    main watch so the daemon can log it. Never raises for a missing directory.
    """

    def __init__(self, manifest_dir: Path, hints: Hints) -> None:
        self.manifest_dir = Path(manifest_dir)
        #: The directory actually watched: ``manifest_dir`` with every symlink resolved. inotify
        #: (watchdog adds IN_DONT_FOLLOW) would watch a symlink itself, not the directory the
        #: kubelet reads through it (docs/kubelet-contract.md "Which files are pods": symlinks are followed).
        self.watched_dir = Path(os.path.realpath(self.manifest_dir))
        self.parked_dir = self.watched_dir / PRIVATE_DIRNAME / "parked"
        self.hints = hints
        self.identity: tuple[int, int] | None = None
        self.parked_identity: tuple[int, int] | None = None
        self.error: str | None = None
        self._observer: Any = None
        self._handler: Any = None
        self._parked_watch: Any = None
        self._lost = threading.Event()  # set by the handler when the root went away
        self.generation = 0  # how many times a watch was started

    # -- watchdog side (observer thread) -------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        etype = getattr(event, "event_type", "")
        if etype not in _INTERESTING:
            return
        root = str(self.watched_dir)
        paths = [event.src_path]
        if etype == "moved":
            paths.append(getattr(event, "dest_path", ""))
        for raw in paths:
            path = os.fsdecode(raw) if raw else ""
            hint = classify(root, path, event_type=etype, is_directory=bool(event.is_directory))
            if hint is None:
                continue
            if hint == DIRECTORY and os.path.normpath(path) == os.path.normpath(root):
                self._lost.set()
            if hint.kind == "file" and not event.is_directory:
                self.hints.writes.note(etype, hint.name, path)
            self.hints.add(hint)
            if etype == "closed" and hint.kind == "file" and not event.is_directory:
                self.hints.note_closed(hint.name)

    # -- main-thread side -----------------------------------------------------------------------
    def _emitter_alive(self, path: Path) -> bool:
        """Whether the observer's emitter for ``path`` is running (watchdog internals, guarded)."""
        obs = self._observer
        if obs is None or not obs.is_alive():
            return False
        try:
            emitters = list(obs.emitters)
        except Exception:  # watchdog internals changed; assume alive
            return True
        want = os.path.normpath(str(path))
        for e in emitters:
            watch = getattr(e, "watch", None)
            if watch is not None and os.path.normpath(os.fsdecode(watch.path)) == want:
                return bool(e.is_alive())
        return False

    def ensure(self) -> str | None:
        """Start or re-create the watches when needed (main thread).

        The watch is on the resolved directory (``os.path.realpath``): when staticPodPath is, or
        goes through, a symlink, a retargeted link is noticed here and the watch follows it.

        Returns None when the main watch is unchanged, else one of ``"started"`` (first watch),
        ``"replaced"`` (the path now names a different directory, e.g. a symlink in it was
        retargeted), ``"recreated"`` (the watch
        died or the directory was removed and came back), ``"missing"`` (the directory is gone;
        the watch is dropped until it comes back), ``"failed"`` (``self.error`` says why).
        """
        ident = dir_identity(self.manifest_dir)
        lost = self._lost.is_set()
        if ident is None:
            if self._observer is not None or self.identity is not None:
                self._stop_observer()
                self.identity = None
                return "missing"
            return None
        resolved = Path(os.path.realpath(self.manifest_dir))
        moved = resolved != self.watched_dir  # a symlink in the path now points elsewhere
        if (
            self._observer is not None
            and ident == self.identity
            and not lost
            and not moved
            and self._emitter_alive(self.watched_dir)
        ):
            self._ensure_parked()
            return None
        if self._observer is None and self.error is not None and ident == self.identity and not moved:
            return None  # failed before on this very directory; retried by reset_error()
        if self._observer is None and self.identity is None and self.generation == 0:
            what = "started"
        elif self.identity is not None and (ident != self.identity or moved):
            what = "replaced"
        else:
            what = "recreated"
        self.watched_dir = resolved
        self.parked_dir = resolved / PRIVATE_DIRNAME / "parked"
        self._stop_observer()
        self._lost.clear()
        if not self._start(ident):
            return "failed"
        return what

    def _ensure_parked(self, *, announce: bool = True) -> None:
        """Watch ``.staticpodd/parked/`` while it exists; renew the watch when it was replaced
        or its emitter stopped (removed and recreated). A new watch is a DIRECTORY hint, so the
        daemon rescans what may have changed there unseen."""
        obs = self._observer
        if obs is None:
            return
        pid = dir_identity(self.parked_dir)
        healthy = self._parked_watch is not None and self._emitter_alive(self.parked_dir)
        if pid == self.parked_identity and (healthy or pid is None):
            return
        if self._parked_watch is not None:
            try:
                obs.unschedule(self._parked_watch)
            except Exception:
                pass
            self._parked_watch = None
        self.parked_identity = pid
        if pid is None:
            return
        try:
            self._parked_watch = obs.schedule(self._handler, str(self.parked_dir), **self._schedule_kwargs(obs))
        except OSError:
            self.parked_identity = None  # retried on the next ensure(); the rescan covers it
            return
        if announce:
            self.hints.add(DIRECTORY)

    def reset_error(self) -> None:
        """Forget a failed start so that the next :meth:`ensure` retries."""
        self.error = None

    @staticmethod
    def _schedule_kwargs(observer: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"recursive": False}
        if "event_filter" in inspect.signature(observer.schedule).parameters:
            kwargs["event_filter"] = _event_filter()
        return kwargs

    def _start(self, ident: tuple[int, int]) -> bool:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                watcher._on_event(event)

        observer = Observer()
        handler = _Handler()
        try:
            observer.schedule(handler, str(self.watched_dir), **self._schedule_kwargs(observer))
            observer.daemon = True
            observer.start()
        except OSError as exc:
            self.error = f"cannot watch {self.manifest_dir}: {exc.strerror or exc}" + (
                " (raise fs.inotify.max_user_watches)" if exc.errno == errno.ENOSPC else ""
            )
            self.identity = ident
            try:
                observer.stop()
            except Exception:
                pass
            return False
        self.error = None
        self.hints.writes.clear()  # marks of the directory watched before are meaningless now
        self._observer = observer
        self._handler = handler
        self._parked_watch = None
        self.parked_identity = None
        self.identity = ident
        self.generation += 1
        self._ensure_parked(announce=False)  # a new main watch is followed by a full rescan anyway
        return True

    def _stop_observer(self) -> None:
        obs, self._observer = self._observer, None
        self._parked_watch = None
        self.parked_identity = None
        if obs is None:
            return
        try:
            obs.stop()  # stops and joins the emitters: their reads are woken by closing inotify
            _wake_dispatcher(obs)
            obs.join(timeout=5)
        except Exception:
            pass

    @property
    def watching(self) -> bool:
        """True while an inotify watch is in place."""
        return self._observer is not None

    @property
    def watching_parked(self) -> bool:
        """True while ``.staticpodd/parked/`` is watched too."""
        return self._parked_watch is not None

    def stop(self) -> None:
        """Stop watching (main thread)."""
        self._stop_observer()
