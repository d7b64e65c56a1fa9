"""The engine core: what every verb needs, and nothing verb-specific.

One :class:`EngineCore` over a :class:`~staticpodd.layout.Layout`: the configuration (loaded
lazily), the version store (opened on first use), the one flock, the journal, the hooks, and
the directory as the kubelet sees it: listing its files and resolving a name to a component.
:class:`Guard` takes the flock around a changing verb (its first acquisition finishes or undoes
interrupted operations). The verb families (:mod:`.swap`, :mod:`.park`, :mod:`.scan`,
:mod:`.query`, :mod:`.recover`) are given the core they work on;
:class:`staticpodd.engine.Engine` composes them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import Conflict, FsError, StaticpodError, StoreError, UnknownComponent, UsageError
from ..journal import INFO, Event, Journal
from ..layout import MANIFEST_SUFFIXES, Layout, component_of
from ..node import fsops
from ..node.lock import DEFAULT_TIMEOUT, FileLock, default_notify
from ..store.versions import Observed, VersionStore
from ..termsafe import note_names, printable_name
from .fsfacts import _entry_is_file, is_utf8_name
from .model import Actor, OpWarning, Target, _q

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


class EngineCore:
    """Configuration, store, lock, journal, hooks and name resolution over one layout.

    ``config`` is the loaded daemon/CLI configuration (attribute access) or None for defaults;
    ``config_loader`` loads it lazily instead (fast verbs never pay for it).
    """

    #: ``live file name -> (stat signature, digest)`` of the files this lock hold's scan read or
    #: found unchanged; dropped when the lock is released (:mod:`staticpodd.engine.known`).
    _held_digests: dict[str, tuple[str, str]] | None = None

    def __init__(
        self,
        layout: Layout,
        *,
        actor: Actor,
        journal: Journal,
        config: Any = None,
        config_loader: Callable[[], Any] | None = None,
        lock_timeout: float | None = None,
        notify: Any = None,
    ) -> None:
        self.layout = layout
        self.actor = actor
        self.journal = journal
        self._config = config
        self._config_loader = config_loader
        #: ``--lock-timeout`` (seconds), None for the default: bounds the flock and SQLite's waits
        self.lock_timeout = lock_timeout
        #: called while waiting for the flock (say who holds it)
        self.notify = notify if notify is not None else default_notify()
        self._store: VersionStore | None = None
        #: the one flock; :class:`Guard` takes it around a changing verb
        self.lock = FileLock(layout.lock_path, description=f"{journal.identifier} by {actor}")
        #: Entries seen whose names are not valid UTF-8, as ``os.listdir`` gives them
        #: (surrogate-escaped): the kubelet reads them, we cannot track them (see _dir_names).
        self.untrackable: set[str] = set()
        #: live symlinks whose target the kubelet refuses as a pod: never recorded (file -> why)
        self.links_not_recorded: dict[str, str] = {}
        self.untrackable_logged: set[str] = set()
        #: Files without a manifest suffix whose name is a component another file owns
        #: (``kube-scheduler`` beside ``kube-scheduler.yaml``), as ``(location, name) -> owner's file
        #: name``: the kubelet reads a live one, we do not track it (see :meth:`name_owner`). A state,
        #: not a fact about the name: refreshed by every listing (:meth:`live_names`, :meth:`parked_names`).
        self.names_taken: dict[tuple[str, str], str] = {}
        self.taken_logged: set[tuple[str, str, str]] = set()
        #: Post-hooks that failed, timed out or were refused during this Engine's operations.
        self.hook_warnings: list[OpWarning] = []
        self.listing: list[str] | None = None  # the directory's names during one scan
        self._by_stem: tuple[list[str], dict[str, set[str]]] | None = None  # stem -> names of listing

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def config(self) -> Any:
        """The configuration (loaded on first use), or None when there is none."""
        if self._config is None and self._config_loader is not None:
            self._config = self._config_loader()
            self._config_loader = None
        return self._config

    def _cfg(self, name: str, default: Any) -> Any:
        cfg = self.config
        value = getattr(cfg, name, None) if cfg is not None else None
        return default if value is None else value

    @property
    def store(self) -> VersionStore:
        """The version store (opened on first use)."""
        if self._store is None:
            # SQLite waits for another connection (a sqlite3 shell, a backup) as long as we wait
            # for the flock: --lock-timeout bounds both
            timeout = DEFAULT_TIMEOUT if self.lock_timeout is None else self.lock_timeout
            self._store = VersionStore(self.layout.db_path, busy_timeout=timeout)
        return self._store

    def close(self) -> None:
        """Close the store."""
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def lock_held(self) -> bool:
        """Whether this process holds the flock now (caches are written only under it)."""
        return self.lock.held

    def check_manifest_dir(self) -> None:
        """Raise FsError unless the manifest directory exists and is a directory (a typo in
        ``--root`` or ``staticPodPath`` must not look like an empty node)."""
        mdir = self.layout.manifest_dir
        if not mdir.is_dir():
            what = "is not a directory" if mdir.exists() else "does not exist"
            raise FsError(
                f"the manifest directory {what}",
                path=str(mdir),
                hint="check --root / --manifest-dir, or staticPodPath in <root>/var/lib/kubelet/config.yaml",
            )

    def log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        fields.setdefault("actor", str(self.actor))
        self.journal.log(event, message, priority=priority, **fields)

    @contextmanager
    def nothing_changed_on_error(self) -> Iterator[None]:
        """A StoreError or FsError before a changing verb's rename: say that nothing reached the
        kubelet (``details["reached_kubelet"] = False``), unless the error already says it did."""
        try:
            yield
        except StaticpodError as exc:
            if isinstance(exc, (StoreError, FsError)) and "reached_kubelet" not in exc.details:
                exc.details["reached_kubelet"] = False
                if "nothing was changed" not in exc.message:
                    exc.message += "; nothing was changed in the manifest directory"
            raise

    def set_observed(self, comp: str, fn: str, loc: str, digest: str, st: Any) -> None:
        self.store.set_observed(Observed(comp, fn, loc, digest, st.mode, st.uid, st.gid))

    # -- resolving names ----------------------------------------------------------------------

    def _dir_names(self, directory: Path) -> list[str]:
        """Non-dot entry names of ``directory``, sorted; [] when it is missing.

        A name that is not valid UTF-8 (a Latin-1 name from an old tarball) is left out and
        remembered in :attr:`untrackable`: the version store keys everything by name as text,
        and one such file must not stop every other component from being managed. The kubelet
        still reads it (docs/kubelet-contract.md "Which files are pods"); ``status`` and ``doctor`` say so.
        """
        return self.listed(directory, files_only=False)

    def listed(self, directory: Path, *, files_only: bool) -> list[str]:
        """:meth:`_dir_names`, or with ``files_only`` just the entries that are files or links
        to files, from one ``os.scandir`` (the entry type comes with the listing: a stat is made
        only for links and for names that are not UTF-8)."""
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            return []
        note_names([e.name for e in entries])  # a newline in a name is escaped wherever it is shown
        out = []
        odd: set[str] = set()
        for e in entries:
            name = e.name
            if name.startswith("."):
                continue
            if not is_utf8_name(name):
                if _entry_is_file(e):
                    odd.add(str(directory / name))  # what the kubelet reads (not dirs, not ours)
                continue
            if files_only and not _entry_is_file(e):
                continue
            out.append(name)
        if directory == self.layout.manifest_dir:
            # the whole directory was listed: what is gone is no longer reported (a long-lived
            # daemon's engine lists it again and again), and logged again should it come back
            self.untrackable = odd
            self.untrackable_logged &= odd
        out.sort()
        return out

    def live_names(self) -> list[str]:
        """Non-dot entries of the manifest directory that are files (or links to files): what the
        kubelet reads (docs/kubelet-contract.md "Which files are pods"), sorted like its relist; without the
        names another file's component takes (:attr:`names_taken`), which are no component."""
        return self._untaken("live", self.listed(self.layout.manifest_dir, files_only=True))

    def parked_names(self) -> list[str]:
        """File names of the parked copies (without the names taken, as :meth:`live_names`)."""
        return self._untaken("parked", self.listed(self.layout.parked_dir, files_only=True))

    def _untaken(self, location: str, names: list[str]) -> list[str]:
        """``names`` (one listing of ``location``) without the suffix-less names that are another
        file's component (:meth:`name_owner`); records them in :attr:`names_taken`. Costs nothing
        more when no name lacks a manifest suffix; else one store query and a few stats."""
        for key in [k for k in self.names_taken if k[0] == location]:
            del self.names_taken[key]
        bare = [n for n in names if component_of(n) == n]
        if not bare:
            return names
        here = set(names)
        other = "parked" if location == "live" else "live"
        owners = self._owners(bare, lambda fn: fn in here or self._is_file_at(other, fn))
        if not owners:
            return names
        for n, owner in owners.items():
            self.names_taken[(location, n)] = owner
        return [n for n in names if n not in owners]

    def name_owner(self, name: str) -> str | None:
        """The file whose component ``name`` is, when ``name`` is a file without a manifest suffix
        that therefore cannot be its own component; None otherwise.

        A suffix-less file's component would be its whole name, which is the stem of its siblings
        (``kube-scheduler`` and ``kube-scheduler.yaml``), and unlike ``web.yml`` beside ``web.yaml``
        it has no other name to go by. So it is no component when that component is recorded
        with another file name (even a file gone since: the name stays that file's, as a stem stays
        the first file's), or, nothing recorded, when a live or parked sibling with a suffix would
        take the stem (:meth:`component_for`), whatever the lexical order. Such a file is not
        tracked; the kubelet still reads it (the duplicate-pod checks do too). A few stats and one
        store query; lists no directory."""
        if component_of(name) != name:
            return None
        return self._owners([name], lambda fn: self._is_file_at("live", fn) or self._is_file_at("parked", fn)).get(name)

    def _owners(self, bare: list[str], present: Callable[[str], bool]) -> dict[str, str]:
        """``name -> owner's file name`` for the suffix-less ``bare`` names that are another file's
        component (see :meth:`name_owner`); ``present(file_name)``: whether that file is live or
        parked. One store query for all of them."""
        siblings = {n: sorted(fn for fn in (n + s for s in MANIFEST_SUFFIXES) if present(fn)) for n in bare}
        heads: dict[str, str] = {}
        if self.layout.db_path.exists():
            heads = self.store.head_file_names([*bare, *(fn for fns in siblings.values() for fn in fns)])
        out = {}
        for n in bare:
            recorded = heads.get(n)
            if recorded is not None:
                if recorded != n:
                    out[n] = recorded
            elif siblings[n] and siblings[n][0] not in heads:
                # the sibling component_for gives the stem: the first one, unless it is recorded
                # under its own file name (then no sibling takes the stem)
                out[n] = siblings[n][0]
        return out

    def taken_reason(self, name: str, owner: str) -> tuple[str, str]:
        """``(reason, fix)`` for a file ``name`` that is not tracked because its name is the
        component of ``owner`` (:meth:`name_owner`), for status, doctor and the journal."""
        state = ("" if self._is_file_at("live", owner) else " (parked)" if self._is_file_at("parked", owner)
                 else " (removed; staticpodctl rollback " + _q(name) + " puts it back)")
        return (f"its name is the component {name} of {owner}{state}",
                f"rename it, e.g. to {name}.notes, or move it out of the directory")

    def _is_file_at(self, location: str, file_name: str) -> bool:
        """Whether ``file_name`` (a non-dot UTF-8 name) is among :meth:`live_names` (``live``) or
        :meth:`parked_names` (``parked``), without listing the directory: one stat."""
        return os.path.isfile(self.path(location, file_name))

    def component_for(self, file_name: str) -> str:
        """The component a file in the directory belongs to: its stem (``web`` for ``web.yaml``),
        unless that stem is already another file's (``web.yaml`` and ``web.yml`` are two pods):
        then the later file is its own component under its full name, with its own history.

        The first file to be recorded under a stem keeps it; with nothing recorded yet, the
        lexically first of the sibling files with a manifest suffix does. A file without one is
        its own component, named by its whole name, unless that name is another file's component:
        then it is none (:meth:`name_owner`; the listings leave it out, :meth:`resolve` skips it).
        """
        stem = component_of(file_name)
        if stem == file_name:
            return stem  # unless another file owns that name: then no component (name_owner)
        if self.layout.db_path.exists():
            if self.store.head(file_name) is not None:
                return file_name
            head = self.store.head(stem)
            if head is not None:
                return stem if head.file_name == file_name else file_name
        pool = self.listing
        if pool is None:
            siblings = sorted({n for n in self.live_names() + self.parked_names()
                               if component_of(n) == stem and n != stem})
        else:  # during a scan: one stem index for the whole listing (linear, not per file)
            if self._by_stem is None or self._by_stem[0] is not pool:
                index: dict[str, set[str]] = {}
                for n in pool:
                    c = component_of(n)
                    if c != n:  # a suffix-less file never takes the stem from a sibling (name_owner)
                        index.setdefault(c, set()).add(n)
                self._by_stem = (pool, index)
            siblings = sorted(self._by_stem[1].get(stem, ()))
        return stem if not siblings or siblings[0] == file_name else file_name

    def resolve(self, name: str, *, allow_recorded: bool = True) -> Target:
        """Find a component by name (``kube-scheduler``) or file name (``kube-scheduler.yaml``).

        Looks at live files, then parked copies, then the store. A file whose name is another
        file's component (:meth:`name_owner`) is skipped: ``kube-scheduler`` means the component
        of ``kube-scheduler.yaml``; given by its path it is refused (Conflict). Raises
        UnknownComponent, or Conflict when a stem matches several live files (``x.yaml`` and ``x.json``).
        """
        by_path = "/" in name
        if by_path:
            p = Path(os.path.abspath(name))
            if p.parent in (self.layout.manifest_dir, self.layout.parked_dir):
                name = p.name
            else:
                raise UsageError(
                    f"{name!r} is not a component name",
                    hint="name a component by its file stem (kube-scheduler) or file name; "
                    "to install a file from elsewhere use: staticpodctl apply FILE",
                )
        if name.startswith("."):
            raise UsageError(f"{name!r}: dot-names are never read by the kubelet and are not components")
        if not is_utf8_name(name):
            raise UsageError(
                f"'{printable_name(name)}' is not valid UTF-8: staticpodd cannot track such a file",
                hint="rename it (mv -- OLD NEW) to a UTF-8 name; the kubelet reads it under any name",
            )
        # only ``name`` itself and ``name`` + a manifest suffix can be this component (component_for(n)
        # is n or its stem): a few stats, not a listing of the directory (park's cost must not grow
        # with the node)
        in_live, in_parked = self._is_file_at("live", name), self._is_file_at("parked", name)
        if (in_live or in_parked) and (owner := self.name_owner(name)) is not None:
            if by_path:  # that very file is meant, and it is no component
                reason, fix = self.taken_reason(name, owner)
                raise Conflict(f"{name}: {reason}; staticpodd does not track this file",
                               path=str(self.path("live" if in_live else "parked", name)),
                               hint=f"{fix}; to mean the component, name it without a path: {_q(name)}")
            in_live = in_parked = False  # a file named like another file's component: that component is meant
        if in_live or in_parked:
            return Target(self.component_for(name), name, in_live, in_parked)
        where = {fn: (self._is_file_at("live", fn), self._is_file_at("parked", fn))
                 for fn in (name + suffix for suffix in MANIFEST_SUFFIXES)}
        where = {fn: w for fn, w in where.items() if w[0] or w[1]}
        matches = sorted(fn for fn in where if self.component_for(fn) == name)
        if len(matches) > 1:
            raise Conflict(
                f"component {name!r} matches several files: {', '.join(matches)}",
                hint="name the file instead (e.g. " + matches[0] + ")",
            )
        if matches:
            fn = matches[0]
            return Target(name, fn, *where[fn])
        head = self.store.head(name) if self.layout.db_path.exists() else None
        if head is None and self.layout.db_path.exists():
            head = self.store.head(component_of(name))
        if head is not None and allow_recorded:
            return Target(head.component, head.file_name, False, False)
        if head is not None:  # recorded, but its file is in neither place: say what happened
            comp = head.component
            if self.store.park_of(comp) is not None:
                raise Conflict(
                    f"{comp} is recorded as parked, but its parked copy is gone (moved or deleted by hand)",
                    path=str(self.layout.parked_dir / head.file_name),
                    hint=f"to start it from its newest version: staticpodctl unpark {_q(comp)}; to put that version "
                    f"back as the parked copy and keep it stopped: staticpodctl rollback {_q(comp)}",
                )
            raise UnknownComponent(
                f"{comp} is not in {self.layout.manifest_dir}: its file was removed (newest version {head.seq})",
                hint=f"put it back with: staticpodctl rollback {_q(comp)}",
            )
        known = sorted({self.component_for(n) for n in self.live_names() + self.parked_names()})
        import difflib

        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = "the manifest directory is empty"
        if known:
            hint = (f"did you mean {close[0]}? " if close else "") + "known components: " + ", ".join(known)
        raise UnknownComponent(f"no component {name!r} in {self.layout.manifest_dir}", hint=hint)

    def state_at(self, location: str, file_name: str) -> fsops.FileState | None:
        base = self.layout.manifest_dir if location == "live" else self.layout.parked_dir
        return fsops.read_state(base / file_name)

    def _refuse_link_out(self, path: Path) -> None:
        """Raise FsError when ``path`` is a symlink that resolves outside the manifest directory
        (or does not resolve), naming where it points; return when it is not such a link."""
        if not os.path.islink(path):
            return
        where = os.readlink(path)
        real = os.path.realpath(path)
        home = os.path.realpath(self.layout.manifest_dir)
        if real == home or not real.startswith(home + os.sep) or not os.path.isfile(real):
            raise FsError(
                f"is a symlink to {where}, outside the manifest directory: its bytes are not shown",
                path=str(path),
                hint=f"look at the target yourself if you mean to (ls -l {path}); the kubelet reads it as a pod",
            )

    def path(self, location: str, file_name: str) -> Path:
        return (self.layout.manifest_dir if location == "live" else self.layout.parked_dir) / file_name

    def current_bytes(self, name: str, *, for_display: bool = False) -> tuple[Target, bytes, str]:
        """``(target, bytes, location)`` of a component's file as it is now (live, else parked).

        ``for_display``: the bytes are to be shown to whoever asks (``show``, ``diff``, ``edit``),
        so a symlink whose target lies outside the manifest directory is not followed (a link to
        /etc/shadow would print it); FsError says what the link is instead.
        Raises UnknownComponent when it has no file, FsError as said.
        """
        target = self.resolve(name)
        for loc in ("live", "parked"):
            if (loc == "live" and target.live) or (loc == "parked" and target.parked):
                if for_display:
                    self._refuse_link_out(self.path(loc, target.file_name))
                st = self.state_at(loc, target.file_name)
                if st is not None:
                    return target, st.data, loc
        raise UnknownComponent(
            f"{target.component} has no live or parked file",
            hint=f"see its recorded versions: staticpodctl history {_q(target.component)}",
        )

    # -- hooks ----------------------------------------------------------------------------------

    def hooks(self, phase: str, verb: str, *, component: str, file_name: str, reason: str | None,
               version: int | None = None, digest: str | None = None) -> bool:
        """Run ``<hooks>/<phase>-<verb>.d`` (staticpodd.engine.hooks). Returns whether any hook ran: a
        pre-hook is a wait, after which what was judged before it is judged again."""
        if not (self.layout.hooks_dir / f"{phase}-{verb}.d").is_dir():
            return False
        from .hooks import hook_env, run_hooks

        env = hook_env(self.layout, component=component, file_name=file_name, version=version, digest=digest,
                       actor=str(self.actor), reason=reason)
        timeout = self._cfg("hooks", None)
        timeout = getattr(timeout, "timeout", None) if timeout is not None else None
        results = run_hooks(self.layout, phase, verb, env, timeout=float(timeout or 30), journal=self.journal)
        if phase == "post":  # never fatal; the CLI shows them as warnings (and in --json "warnings")
            self.hook_warnings.extend(OpWarning.of(r, phase, verb) for r in results
                                      if r.status in ("failed", "signaled", "timeout", "refused"))
        return any(r.status not in ("refused", "skipped") for r in results)


class Guard:
    """The one flock around a changing verb, re-entrant; its first acquisition runs ``recover``
    (finishes or undoes interrupted operations) before anything else happens under it.

    ``core``: the :class:`EngineCore` whose lock, lock timeout and manifest directory it uses;
    ``recover``: what to run on the first acquisition
    (:meth:`staticpodd.engine.recover.Recovery.recover`).
    """

    def __init__(self, core: EngineCore, recover: Callable[[], object]) -> None:
        self._core = core
        self._recover = recover
        self._recovered = False

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the staticpodd flock (re-entrant). On first acquisition, run ``recover``.

        Raises LockTimeout after ``lock_timeout`` seconds (``--lock-timeout``, config
        ``lock_timeout``, default 30); FsError when the manifest directory is missing.
        """
        core = self._core
        core.check_manifest_dir()
        timeout = core.lock_timeout
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        core.lock.acquire(timeout, core.notify)
        try:
            if not self._recovered:
                self._recovered = True
                self._recover()
            yield
        finally:
            core.lock.release()
            if not core.lock.held:
                core._held_digests = None  # what this hold's scan read: see engine/known.py
