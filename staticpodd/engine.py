"""The verbs: apply, edit, park, unpark, rollback, status, history, show, diff, scan, recover.

The engine decides; :mod:`staticpodd.fsops` is the only writer; the store records. Every verb
that changes something runs under the one flock (:mod:`staticpodd.lock`), first finishes or
undoes interrupted operations (:meth:`Engine.recover`), then records drift (live bytes that
differ from what was last recorded, written by someone else) before it changes anything, so
nothing anyone wrote is ever lost.

Kubelet rules served here (KUBELET.md): only live manifests under non-dot names; rename into
place after fsync; park/unpark are renames on the same mount and keep the exact file path (it is
part of the pod UID); no-op writes are never made; an invalid manifest never enters the
directory; two files defining the same pod are refused (the lexically last one would win).
"""

from __future__ import annotations

import os
import pwd
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import fsops
from .errors import (
    AlreadyParked,
    ChangedMeanwhile,
    Conflict,
    FsError,
    InvalidManifest,
    LiveFileExists,
    NotParked,
    StaticpodError,
    StoreError,
    UnknownComponent,
    UsageError,
)
from .journal import ERR, INFO, NOTICE, WARNING, Event, Journal
from .layout import MANIFEST_SUFFIXES, PRIVATE_DIRNAME, Layout, component_of
from .lock import DEFAULT_TIMEOUT, FileLock, default_notify
from .store import Observed, ParkRecord, Version, VersionStore, digest_of, iso
from .termsafe import note_names, printable_name, shell_word

EXTERNAL = "external"

#: Names ``apply --as`` accepts for a new component (the kubelet would read any non-dot name; we
#: keep to names that are safe in file names, shells and ``COMPONENT@N`` specs).
_COMPONENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


@dataclass(frozen=True)
class Actor:
    """Who acts: the invoking user (``SUDO_USER`` through sudo), the daemon, or ``external``."""

    name: str
    uid: int
    via: str | None = None

    @classmethod
    def current(cls) -> Actor:
        """The user running this process; through sudo, the user who ran sudo (``via="sudo"``)."""
        uid = os.getuid()
        try:
            me = pwd.getpwuid(uid).pw_name
        except KeyError:
            me = str(uid)
        sudo_user = os.environ.get("SUDO_USER")
        if uid == 0 and sudo_user and sudo_user != "root":
            return cls(sudo_user, uid, "sudo")
        return cls(me, uid, None)

    @classmethod
    def daemon(cls) -> Actor:
        """The staticpodd daemon acting on its own (restores, expired parks, quarantine)."""
        return cls("staticpodd", os.getuid(), None)

    def __str__(self) -> str:
        return f"{self.name} (via {self.via})" if self.via else self.name


@dataclass(frozen=True)
class Target:
    """A resolved component: its file name and where its file is now."""

    component: str
    file_name: str
    live: bool
    parked: bool

    @property
    def location(self) -> str | None:
        """``live``, ``parked`` or None (recorded only)."""
        return "live" if self.live else "parked" if self.parked else None


@dataclass
class OpWarning:
    """Something an operation did not stop for but the operator must see (a post-hook that
    failed, a rollback across a pod rename): shaped like a validator finding for ``warnings``."""

    path: str
    message: str
    code: str = "hook-failed"
    severity: str = "warning"

    @classmethod
    def of(cls, r: Any, phase: str, verb: str) -> OpWarning:
        """From a :class:`staticpodd.hooks.HookResult`."""
        detail = {"failed": f"exited with status {r.returncode}", "signaled": f"was killed by signal {r.signal}",
                  "timeout": "timed out and was killed", "refused": f"was not run: {r.reason}"}[r.status]
        tail = f": {r.stderr_tail[-1]}" if getattr(r, "stderr_tail", None) else ""
        return cls(str(r.path), f"{phase}-{verb} hook {r.name} {detail}{tail} (the {verb} itself is done)")

    def format(self) -> str:
        """One line for a terminal."""
        return f"{self.path}: warning[{self.code}]: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape (``code``, ``severity``, ``path``, ``message``)."""
        return {"code": self.code, "severity": self.severity, "path": self.path, "message": self.message}


@dataclass
class Change:
    """One external change found by :meth:`Engine.scan`.

    ``kind``: created, modified, removed, moved-in, moved-out, mode-changed, parked-copy-edited,
    parked-copy-removed, park-broken, unparked-by-hand. ``version`` is the recorded seq when new
    bytes were recorded. ``valid`` / ``findings`` are set for live bytes when scanning with
    ``validate=True``.
    """

    component: str
    file_name: str
    location: str
    kind: str
    digest: str | None = None
    version: int | None = None
    valid: bool | None = None
    findings: list[Any] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "file_name": self.file_name,
            "location": self.location,
            "kind": self.kind,
            "digest": self.digest,
            "version": self.version,
            "valid": self.valid,
            "findings": [f.to_dict() for f in self.findings],
        }


@dataclass
class Result:
    """What a changing verb did (or, with ``check``, would do). ``to_dict`` is the --json body."""

    action: str
    component: str
    file_name: str
    changed: bool
    msg: str
    location: str | None = None
    version: Version | None = None
    previous_digest: str | None = None
    digest: str | None = None
    diff: str | None = None
    warnings: list[Any] = field(default_factory=list)
    park: ParkRecord | None = None
    check: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    #: Ansible's diff form: before/after texts and their headers (``--json``'s ``diff``).
    diff_pair: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action,
            "component": self.component,
            "file_name": self.file_name,
            "changed": self.changed,
            "check": self.check,
            "msg": self.msg,
            "location": self.location,
            "version": self.version.seq if self.version else None,
            "digest": self.digest,
            "previous_digest": self.previous_digest,
            "diff": dict(self.diff_pair, text=self.diff) if self.diff is not None else None,
            "warnings": [w.to_dict() for w in self.warnings],
            "park": self.park.to_dict() if self.park else None,
        }
        out.update(self.extra)
        return out


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``1h30m``, ``1.5m``, ``500ms``, ``1d``, or bare seconds ``300`` -> seconds.

    Raises UsageError naming the text. (Zero is allowed here; callers that need more say so.)
    """
    t = str(text).strip().lower()
    if re.fullmatch(r"\d+(?:\.\d*)?", t):
        return float(t)
    pos, value = 0, 0.0
    for m in re.finditer(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h|d)", t):
        if m.start() != pos:
            break
        value += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not t or pos != len(t):
        raise UsageError(f"cannot read duration {text!r}", hint="use e.g. 90s, 30m, 2h, 1h30m or 1d")
    return value


def unified_diff(a: bytes | None, b: bytes | None, label_a: str, label_b: str) -> str:
    """Unified diff (difflib) of two manifests; non-UTF-8 bytes are shown with replacement chars."""
    import difflib

    la = (a or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lb = (b or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lines = list(difflib.unified_diff(la, lb, fromfile=label_a, tofile=label_b))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


class Engine:
    """The verbs over one :class:`~staticpodd.layout.Layout`.

    ``config`` is the loaded daemon/CLI configuration (attribute access) or None for defaults;
    ``config_loader`` loads it lazily instead (fast verbs never pay for it).
    """

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
        self._lock_timeout = lock_timeout
        self._notify = notify if notify is not None else default_notify()
        self._store: VersionStore | None = None
        self._lock = FileLock(layout.lock_path, description=f"{journal.identifier} by {actor}")
        self._recovered = False
        #: What the last :meth:`recover` did (one dict per interrupted operation).
        self.last_recovery: list[dict[str, Any]] = []
        #: Entries seen whose names are not valid UTF-8, as ``os.listdir`` gives them
        #: (surrogate-escaped): the kubelet reads them, we cannot track them (see _dir_names).
        self.untrackable: set[str] = set()
        self._untrackable_logged: set[str] = set()
        #: Post-hooks that failed, timed out or were refused during this Engine's operations.
        self.hook_warnings: list[OpWarning] = []
        self._listing: list[str] | None = None  # the directory's names during one scan
        self._by_stem: tuple[list[str], dict[str, set[str]]] | None = None  # stem -> names of _listing

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
            self._store = VersionStore(self.layout.db_path)
        return self._store

    def close(self) -> None:
        """Close the store."""
        if self._store is not None:
            self._store.close()
            self._store = None

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the staticpodd flock (re-entrant). On first acquisition, run :meth:`recover`.

        Raises LockTimeout after ``lock_timeout`` seconds (``--lock-timeout``, config
        ``lock_timeout``, default 30).
        """
        self.check_manifest_dir()
        timeout = self._lock_timeout
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        self._lock.acquire(timeout, self._notify)
        try:
            if not self._recovered:
                self._recovered = True
                self.recover()
            yield
        finally:
            self._lock.release()

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

    def _log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        fields.setdefault("actor", str(self.actor))
        self.journal.log(event, message, priority=priority, **fields)

    # -- resolving names ----------------------------------------------------------------------

    def _dir_names(self, directory: Path) -> list[str]:
        """Non-dot entry names of ``directory``, sorted; [] when it is missing.

        A name that is not valid UTF-8 (a Latin-1 name from an old tarball) is left out and
        remembered in :attr:`untrackable`: the version store keys everything by name as text,
        and one such file must not stop every other component from being managed. The kubelet
        still reads it (KUBELET.md "Which files are pods"); ``status`` and ``doctor`` say so.
        """
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        note_names(names)  # a newline in a name is escaped wherever it is shown (termsafe.safe)
        out = []
        for e in names:
            if e.startswith("."):
                continue
            if not is_utf8_name(e):
                if directory == self.layout.manifest_dir and os.path.isfile(directory / e):
                    self.untrackable.add(str(directory / e))  # what the kubelet reads (not dirs, not ours)
                continue
            out.append(e)
        return sorted(out)

    def live_names(self) -> list[str]:
        """Non-dot entries of the manifest directory that are files (or links to files): what the
        kubelet reads (KUBELET.md "Which files are pods"), sorted like its relist."""
        names = self._dir_names(self.layout.manifest_dir)
        files = _regular_files(self.layout.manifest_dir)  # d_type from one scandir: no stat per file
        return [n for n in names if n in files]

    def parked_names(self) -> list[str]:
        """File names of the parked copies."""
        names = self._dir_names(self.layout.parked_dir)
        files = _regular_files(self.layout.parked_dir)
        return [n for n in names if n in files]

    def component_for(self, file_name: str) -> str:
        """The component a file in the directory belongs to: its stem (``web`` for ``web.yaml``),
        unless that stem is already another file's (``web.yaml`` and ``web.yml`` are two pods):
        then the later file is its own component under its full name, with its own history.

        The first file to be recorded under a stem keeps it; with nothing recorded yet, the
        lexically first of the sibling files does.
        """
        stem = component_of(file_name)
        if stem == file_name:
            return stem
        if self.layout.db_path.exists():
            if self.store.head(file_name) is not None:
                return file_name
            head = self.store.head(stem)
            if head is not None:
                return stem if head.file_name == file_name else file_name
        pool = getattr(self, "_listing", None)
        if pool is None:
            siblings = sorted({n for n in self.live_names() + self.parked_names() if component_of(n) == stem})
        else:  # during a scan: one stem index for the whole listing (linear, not per file)
            if self._by_stem is None or self._by_stem[0] is not pool:
                index: dict[str, set[str]] = {}
                for n in pool:
                    index.setdefault(component_of(n), set()).add(n)
                self._by_stem = (pool, index)
            siblings = sorted(self._by_stem[1].get(stem, ()))
        return stem if not siblings or siblings[0] == file_name else file_name

    def resolve(self, name: str, *, allow_recorded: bool = True) -> Target:
        """Find a component by name (``kube-scheduler``) or file name (``kube-scheduler.yaml``).

        Looks at live files, then parked copies, then the store. Raises UnknownComponent, or
        Conflict when a stem matches several live files (``x.yaml`` and ``x.json``).
        """
        if "/" in name:
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
        live = self.live_names()
        parked = self.parked_names()
        for pool, is_live in ((live, True), (parked, False)):
            if name in pool:
                other = name in (parked if is_live else live)
                return Target(self.component_for(name), name, True if is_live else other, other if is_live else True)
        # component_for(n) is n itself or its stem: only those files can be this component (no
        # store queries for every other file on the node)
        matches = sorted({n for n in live + parked if component_of(n) == name and self.component_for(n) == name})
        if len(matches) > 1:
            raise Conflict(
                f"component {name!r} matches several files: {', '.join(matches)}",
                hint="name the file instead (e.g. " + matches[0] + ")",
            )
        if matches:
            fn = matches[0]
            return Target(name, fn, fn in live, fn in parked)
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
        known = sorted({self.component_for(n) for n in live + parked})
        import difflib

        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = "the manifest directory is empty"
        if known:
            hint = (f"did you mean {close[0]}? " if close else "") + "known components: " + ", ".join(known)
        raise UnknownComponent(f"no component {name!r} in {self.layout.manifest_dir}", hint=hint)

    def _state_at(self, location: str, file_name: str) -> fsops.FileState | None:
        base = self.layout.manifest_dir if location == "live" else self.layout.parked_dir
        return fsops.read_state(base / file_name)

    def _path(self, location: str, file_name: str) -> Path:
        return (self.layout.manifest_dir if location == "live" else self.layout.parked_dir) / file_name

    # -- validation ---------------------------------------------------------------------------

    def validate_options(self) -> Any:
        """``staticpodd.validate.Options`` built from the configuration."""
        from .validate import Options

        kw: dict[str, Any] = {}
        cfg = self.config
        if cfg is not None:
            for src, dst in (
                ("kubernetes_version", "kubernetes_version"),
                ("max_manifest_bytes", "max_bytes"),
                ("node_name", "node_name"),
            ):
                value = getattr(cfg, src, None)
                if value is not None:
                    kw[dst] = value
            cap = getattr(cfg, "node_capacity", None)
            if cap is not None:
                from .validate.quantity import cpu_millis, memory_bytes, parse_quantity

                for src, dst, conv in (("cpu", "cpu_capacity_millis", cpu_millis),
                                       ("memory", "memory_capacity_bytes", memory_bytes)):
                    raw = cap.get(src) if isinstance(cap, dict) else getattr(cap, src, None)
                    q = parse_quantity(raw) if raw is not None else None
                    if q is not None:
                        kw[dst] = conv(q)
        return Options(**kw)

    def gate(self, data: bytes, display_path: str, *, component: str | None = None) -> tuple[Any, list[Any]]:
        """Run the validation gate (``staticpodd.validate.gate``) and cache the verdict.

        Returns ``(manifest, warnings)``. Raises InvalidManifest (nothing changed), after logging
        REFUSED_INVALID.
        """
        from .resources import validator_id
        from .validate import gate

        digest = digest_of(data)
        try:
            manifest, warnings = gate(data, display_path, self.validate_options())
        except InvalidManifest as exc:
            self.store.set_verdict(digest, validator_id(), False)
            # counted in staticpodd_refused_applies_total (metrics.store_counters)
            self.store.record_event("refused-invalid", component=component, file_name=None, actor=self.actor.name,
                                    details={"digest": digest, "code": exc.findings[0].code if exc.findings else None})
            first = exc.findings[0] if exc.findings else None
            where = f" at line {exc.line}" if exc.line else ""
            what = f" ({first.code}{', ' + exc.field if exc.field else ''})" if first else ""
            from .validate import kubelet_refuses  # two levels: say when only staticpodd refuses it

            ours = "" if kubelet_refuses(exc.findings) else " by staticpodd's own rules (the kubelet would run it)"
            self._log(  # codes, lines and field paths only: messages may quote values from the manifest
                Event.REFUSED_INVALID,
                f"refused {display_path}: not a valid static pod manifest{where}{what}{ours}",
                priority=WARNING,
                component=component,
                digest=digest,
                file=display_path,
                line=exc.line,
                field_path=exc.field,
                code=exc.findings[0].code if exc.findings else None,
            )
            raise
        self.store.set_verdict(digest, validator_id(), True)
        self.store.set_identity(digest, (manifest.namespace, manifest.name))
        return manifest, warnings

    def pod_identity(self, data: bytes) -> tuple[str, str] | None:
        """``(namespace, name)`` of the pod these bytes define, None when not a readable Pod.

        Cached by digest in the store, so steady-state park/unpark never parse YAML for it. The
        cache is written only under the lock (read-only verbs such as ``apply --check`` write
        nothing).
        """
        digest = digest_of(data)
        have_store = self.layout.db_path.exists()
        cached = self.store.identity(digest) if have_store else None
        if cached is not None:
            ns, name = cached
            return (ns, name) if ns is not None and name is not None else None
        from .manifest import pod_identity

        ident = pod_identity(data)
        if self._lock.held:
            self.store.set_identity(digest, ident)
        return ident

    def memo(self, kind: str, data: bytes, compute: Callable[[], Any]) -> Any:
        """``compute()`` for these bytes, memoised in the store by (digest, kind, release).

        For facts that depend only on the bytes and on this release's code (a JSON value).
        Without a store yet, it just computes.
        """
        if not self.layout.db_path.exists():
            return compute()
        from . import __version__

        digest, key = digest_of(data), f"{kind}@{__version__}"
        found, value = self.store.fact(digest, key)
        if not found:
            value = compute()
            self.store.set_fact(digest, key, value)
        return value

    def files_defining(self, ident: tuple[str, str], *, besides: str) -> list[str]:
        """Live files other than ``besides`` that define pod ``ident`` = (namespace, name), in the
        kubelet's (sorted) order; the last one is what the kubelet runs (KUBELET.md "Duplicate
        names across files")."""
        out = []
        known: dict[str, Observed] = {}
        sigs: dict[str, str] = {}
        if self.layout.db_path.exists():
            known, sigs = self.store.observed(), self.store.sigs()
        for other in self.live_names():
            if other == besides:
                continue
            key = f"live/{other}"
            obs, sig = known.get(key), sigs.get(key)
            if obs is not None and sig is not None and (now := _stat_sig(self._path("live", other))) is not None \
                    and _sig_text(now) == sig:
                cached = self.store.identity(obs.digest)  # unchanged since read: its recorded bytes
                if cached is not None:
                    if (cached if cached[0] is not None else None) == ident:
                        out.append(other)
                    continue
            st = self._state_at("live", other)
            if st is not None and self.pod_identity(st.data) == ident:
                out.append(other)
        mdir = str(self.layout.manifest_dir)
        for odd in sorted(self.untrackable):  # the kubelet reads these too; shown with \xNN escapes
            path = Path(odd)
            if str(path.parent) != mdir or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if self.pod_identity(data) == ident:
                out.append(printable_name(path.name))
        return out

    def _is_untrackable_display(self, shown: str) -> bool:
        """Whether ``shown`` (as :meth:`files_defining` lists it) is a non-UTF-8 file name."""
        return any(printable_name(Path(u).name) == shown for u in self.untrackable)

    def _check_no_duplicate(self, file_name: str, namespace: str, name: str) -> None:
        """Refuse a manifest whose pod another live file already defines (KUBELET.md "Duplicate
        names across files": the lexically last file wins, the other never takes effect)."""
        others = self.files_defining((namespace, name), besides=file_name)
        if others:
            winner = sorted(others + [file_name])[-1]
            raise Conflict(
                f"{', '.join(others)} also define{'s' if len(others) == 1 else ''} pod {namespace}/{name}; "
                f"the kubelet runs only the lexically last file ({winner})",
                path=str(self.layout.manifest_dir / others[0]),
                hint=(f"move {others[0]} out of the directory (its name is not UTF-8, so staticpodctl cannot "
                      "park it)" if self._is_untrackable_display(others[0]) else
                      f"park the other file first: staticpodctl park {_q(others[0])}"
                      + ("" if component_of(others[0]) == others[0] else " --force")),
            )

    # -- hooks ----------------------------------------------------------------------------------

    def _hooks(self, phase: str, verb: str, *, component: str, file_name: str, reason: str | None,
               version: int | None = None, digest: str | None = None) -> None:
        if not (self.layout.hooks_dir / f"{phase}-{verb}.d").is_dir():
            return
        from .hooks import hook_env, run_hooks

        env = hook_env(self.layout, component=component, file_name=file_name, version=version, digest=digest,
                       actor=str(self.actor), reason=reason)
        timeout = self._cfg("hooks", None)
        timeout = getattr(timeout, "timeout", None) if timeout is not None else None
        results = run_hooks(self.layout, phase, verb, env, timeout=float(timeout or 30), journal=self.journal)
        if phase == "post":  # never fatal; the CLI shows them as warnings (and in --json "warnings")
            self.hook_warnings.extend(OpWarning.of(r, phase, verb) for r in results
                                      if r.status in ("failed", "signaled", "timeout", "refused"))

    # -- drift / scan ---------------------------------------------------------------------------

    def scan(self, names: Iterable[str] | None = None, *, validate: bool = False, log: bool = True) -> list[Change]:
        """Compare the directory (live files and parked copies) with the last observed state and
        record every difference as the work of someone else (actor ``external``).

        ``names``: file names to look at (default: everything). New bytes become versions
        (action ``external``); removals, moves and mode changes become events. With ``validate``,
        new live bytes are run through the gate and the verdict is returned in each Change.
        ``log=False``: do not journal DRIFT_RECORDED (the daemon logs its own EXTERNAL_* entries).
        Caller must hold the lock (``with engine.locked()``). Returns the changes, in file order.
        Everything one scan records is one transaction (one commit, however many files changed:
        adopting a node's directory is linear), and the directory is listed once per scan.
        """
        self._listing = None
        try:
            if self.store.readonly:
                return self._scan(names, validate=validate, log=log)
            with self.store.transaction():
                return self._scan(names, validate=validate, log=log)
        finally:
            self._listing = None

    def _scan(self, names: Iterable[str] | None, *, validate: bool, log: bool) -> list[Change]:
        store = self.store
        observed = store.observed()
        live = self.live_names()
        parked = self.parked_names()
        self._listing = live + parked  # component_for's siblings, for the rest of this scan
        for odd in sorted(self.untrackable - self._untrackable_logged):
            self._untrackable_logged.add(odd)
            self._log(Event.DIRECTORY_PROBLEM, f"{printable_name(odd)}: file name is not valid UTF-8; the kubelet "
                      "reads it but its versions cannot be recorded (rename it)", priority=WARNING,
                      file_name=printable_name(Path(odd).name), kind="name-not-utf8")
        wanted = None if names is None else set(names)
        keys: dict[str, tuple[str, str]] = {}
        # stat signatures of the files whose bytes were read and recorded (a full scan reads no
        # unchanged file: _stat_sig); the ones this scan reads are stored at its end
        sigs = store.sigs() if wanted_all(names) else {}
        read_sigs: list[tuple[str, str, str]] = []
        for loc, pool in (("live", live), ("parked", parked)):
            for fn in pool:
                keys[f"{loc}/{fn}"] = (loc, fn)
        for key, seen in observed.items():
            keys.setdefault(key, (seen.location, seen.file_name))
        # A fresh store adopts what is there: recorded like any other change, logged at info.
        adopting = not observed and not store.components()
        changes: list[Change] = []
        actual: dict[str, fsops.FileState | None] = {}
        for key, (loc, fn) in sorted(keys.items(), key=lambda kv: (kv[1][1], kv[1][0])):
            if wanted is not None and fn not in wanted:
                continue
            sig = _stat_sig(self._path(loc, fn)) if key in observed else None  # taken before any read
            if wanted is None and sig is not None and sigs.get(key) == _sig_text(sig):
                continue  # same stat as when its bytes were last read and recorded: unchanged
            if self._too_large(key, loc, fn, observed, changes):
                continue
            if sig is None:
                sig = _stat_sig(self._path(loc, fn))
            try:
                actual[key] = self._state_at(loc, fn)
            except FsError:
                actual[key] = None
            st_read = actual[key]
            if sig is not None and st_read is not None and time.time_ns() - sig[-1] > _RACY_NS:
                read_sigs.append((_sig_text(sig), key, digest_of(st_read.data)))
        for key, st in actual.items():
            loc, fn = keys[key]
            obs = observed.get(key)
            # a path seen before keeps the component it was recorded under (no store queries)
            comp = obs.component if obs is not None else self.component_for(fn)
            other_loc = "parked" if loc == "live" else "live"
            other_key = f"{other_loc}/{fn}"
            if st is not None:
                digest = digest_of(st.data)
                if obs is not None and obs.digest == digest:
                    if (obs.mode, obs.uid, obs.gid) != (st.mode, st.uid, st.gid):
                        store.record_event(
                            "mode-changed", component=comp, file_name=fn, actor=EXTERNAL,
                            details={"location": loc, "before": _mode_dict(obs), "after": _mode_dict(st)},
                        )
                        self._set_observed(comp, fn, loc, digest, st)
                        changes.append(Change(comp, fn, loc, "mode-changed", digest))
                    continue
                head = store.head(comp)
                moved_from = observed.get(other_key)
                if obs is None and moved_from is not None and moved_from.digest == digest and actual.get(
                    other_key, "absent"
                ) is None:
                    kind = "moved-in" if loc == "live" else "moved-out"
                elif obs is None:
                    kind = "created"
                else:
                    kind = "modified" if loc == "live" else "parked-copy-edited"
                park = store.park_of(comp)
                if loc == "live" and park is not None:
                    parked_st = actual.get(other_key) if other_key in actual else self._state_at("parked", fn)
                    if parked_st is not None:
                        kind = "park-broken"
                    else:
                        kind = "unparked-by-hand"
                        store.clear_park(comp)
                if adopting:
                    kind = "adopted"
                version = None
                if head is None or head.digest != digest:
                    version = store.record(
                        comp, fn, st.data, action="external", actor=EXTERNAL,
                        reason="first seen (adopted)" if kind == "adopted" else f"found {kind}",
                        mode=st.mode, uid=st.uid, gid=st.gid, location=loc,
                    ).seq
                else:
                    store.record_event(kind, component=comp, file_name=fn, actor=EXTERNAL,
                                       details={"location": loc, "digest": digest})
                self._set_observed(comp, fn, loc, digest, st)
                ch = Change(comp, fn, loc, kind, digest, version)
                if validate and loc == "live":
                    ch.valid, ch.findings = self._verdict(st.data, str(self.layout.manifest_dir / fn), comp)
                changes.append(ch)
                if not log:
                    pass
                elif adopting:
                    self._log(Event.DRIFT_RECORDED, f"{fn}: adopted as version {version}", priority=INFO,
                              component=comp, file_name=fn, version=version, digest=digest, kind=kind,
                              location=loc, actor=EXTERNAL)
                else:
                    self._log(
                        Event.DRIFT_RECORDED,
                        f"{fn}: {kind} by someone else" + (f", recorded as version {version}" if version else ""),
                        priority=WARNING, component=comp, file_name=fn, version=version, digest=digest,
                        kind=kind, location=loc, actor=EXTERNAL,
                    )
            elif obs is not None:
                moved = actual.get(other_key)
                if moved is not None and digest_of(moved.data) == obs.digest:
                    store.clear_observed(key)
                    continue  # reported as moved-in/moved-out at the other location
                # A parked copy removed by hand keeps its park (and deadline): the pod stays stopped,
                # `unpark` puts the newest version back live, `rollback` as the parked copy.
                kind = "removed" if loc == "live" else "parked-copy-removed"
                store.record_event(kind, component=comp, file_name=fn, actor=EXTERNAL,
                                   details={"location": loc, "digest": obs.digest})
                store.clear_observed(key)
                if loc == "parked" and store.park_of(comp) is None:
                    continue  # no park to stand: e.g. it just ended by a hand write-back (reported above)
                changes.append(Change(comp, fn, loc, kind, obs.digest))
                if log:
                    self._log(
                        Event.DRIFT_RECORDED, f"{fn}: {kind} by someone else", priority=WARNING,
                        component=comp, file_name=fn, digest=obs.digest, kind=kind, location=loc, actor=EXTERNAL,
                    )
        self._store_sigs(read_sigs)
        return changes

    def _store_sigs(self, read_sigs: list[tuple[str, str, str]]) -> None:
        if read_sigs and not self.store.readonly:
            self.store.set_sigs(read_sigs)

    def _scan_before_change(self, file_name: str) -> list[Change]:
        """Record drift before a change, of the whole directory (live files and parked copies):
        without the daemon this is the only moment a hand edit to any manifest gets recorded, so
        nothing anyone wrote is lost. Only records: a file caught half-written by another writer
        becomes a version of its own, and its finished bytes the next one. ``file_name`` is the
        file being changed (kept for the callers' symmetry; it is scanned with the rest)."""
        del file_name
        return self.scan(None)

    def _too_large(self, key: str, loc: str, fn: str, observed: dict[str, Observed], changes: list[Change]) -> bool:
        """A file over the kubelet's 10 MB cap (KUBELET.md "Which files are pods") is never read
        into the store: it is recorded once as a ``too-large`` event (size only). Returns True
        when the file was handled so."""
        try:
            size = os.stat(self._path(loc, fn)).st_size
        except OSError:
            return False
        if size <= fsops.KUBELET_MAX_BYTES:
            return False
        marker = f"too-large:{size}"
        obs = observed.get(key)
        if obs is None or obs.digest != marker:
            comp = self.component_for(fn)
            self.store.record_event("too-large", component=comp, file_name=fn, actor=EXTERNAL,
                                    details={"location": loc, "size": size})
            self.store.set_observed(Observed(comp, fn, loc, marker, None, None, None))
            changes.append(Change(comp, fn, loc, "too-large", None))
            self._log(Event.DRIFT_RECORDED, f"{fn}: {size} bytes, over the kubelet's 10 MB limit; not recorded",
                      priority=WARNING, component=comp, file_name=fn, kind="too-large", size=size, actor=EXTERNAL)
        return True

    def _verdict(self, data: bytes, path: str, component: str) -> tuple[bool, list[Any]]:
        from .validate import has_errors, validate_bytes

        findings = validate_bytes(data, path, self.validate_options())
        return (not has_errors(findings)), findings

    def _set_observed(self, comp: str, fn: str, loc: str, digest: str, st: Any) -> None:
        self.store.set_observed(Observed(comp, fn, loc, digest, st.mode, st.uid, st.gid))

    # -- recovery -------------------------------------------------------------------------------

    def recover(self) -> list[dict[str, Any]]:
        """Finish or undo operations interrupted by a crash, then sweep stale staging files.

        Runs under the lock (``locked()`` calls it). For each recorded intent: when the rename
        happened, the result is recorded (finished); otherwise its staging file is removed and the
        directory is left as it was (undone). Returns one dict per intent:
        ``{"op", "component", "file_name", "outcome": "finished"|"undone"}``.
        """
        if not self.layout.db_path.exists():
            fsops.sweep_staging(self.layout, keep=set())
            return []
        out: list[dict[str, Any]] = []
        for intent in self.store.intents():
            p = intent.payload
            fn = p["file_name"]
            outcome = "undone"
            if intent.op == "swap":
                dst_loc = p["location"]
                cur = self._state_at(dst_loc, fn)
                if cur is not None and digest_of(cur.data) == p["new_digest"]:
                    with self.store.transaction():
                        self._record_swap(intent.component, fn, dst_loc, cur.data, cur, p)
                        self.store.end_intent(intent.id)
                    outcome = "finished"
                else:
                    fsops.remove(Path(p["staged"]))
                    self.store.end_intent(intent.id)
            elif intent.op in ("park", "unpark"):
                src_loc, dst_loc = ("live", "parked") if intent.op == "park" else ("parked", "live")
                src = self._state_at(src_loc, fn)
                dst = self._state_at(dst_loc, fn)
                if src is not None and dst is not None and src.ino == dst.ino:
                    # link() done, unlink() not: for park undo (drop the parked link), for unpark
                    # finish (the kubelet may already run the live file).
                    if intent.op == "park":
                        fsops.remove(self._path(dst_loc, fn))
                        dst = None
                    else:
                        fsops.remove(self._path(src_loc, fn))
                        src = None
                if dst is not None and src is None and digest_of(dst.data) == p["digest"]:
                    with self.store.transaction():
                        if intent.op == "park":
                            self._record_park(intent.component, fn, dst, p)
                        else:
                            self._record_unpark(intent.component, fn, dst, p)
                        self.store.end_intent(intent.id)
                    outcome = "finished"
                else:
                    self.store.end_intent(intent.id)
            else:
                self.store.end_intent(intent.id)
            out.append({"op": intent.op, "component": intent.component, "file_name": fn, "outcome": outcome})
            self._log(
                Event.RECOVERED,
                f"interrupted {intent.op} of {fn} (pid {intent.pid}) {outcome}",
                priority=NOTICE, component=intent.component, file_name=fn, op=intent.op, outcome=outcome,
            )
        swept = fsops.sweep_staging(self.layout, keep=set()) if self.layout.staging_dir.is_dir() else []
        if swept:
            self._log(
                Event.STAGING_SWEPT, f"removed {len(swept)} stale staging file(s)", priority=NOTICE,
                count=len(swept),
            )
        self.last_recovery = out
        return out

    # -- recording helpers (each runs inside the caller's transaction) ----------------------------

    def _record_swap(self, comp: str, fn: str, loc: str, data: bytes, st: Any, p: dict[str, Any]) -> Version:
        v = self.store.record(
            comp, fn, data, action=p["action"], actor=p["actor"], actor_via=p.get("actor_via"),
            reason=p.get("reason"), mode=st.mode, uid=st.uid, gid=st.gid, location=loc,
        )
        self._set_observed(comp, fn, loc, v.digest, st)
        reopen = p.get("reopen_park")
        if reopen and loc == "parked" and self.store.park_of(comp) is None:
            # the parked copy had gone missing; the copy is back, so is the park (its deadline too)
            self.store.set_park(ParkRecord(comp, fn, v.digest, reopen["parked_at"], reopen.get("until"),
                                           reopen["actor"], reopen.get("actor_via"), reopen.get("reason")))
        return v

    def _record_park(self, comp: str, fn: str, st: Any, p: dict[str, Any]) -> tuple[Version, ParkRecord]:
        v = self.store.record(
            comp, fn, st.data, action="park", actor=p["actor"], actor_via=p.get("actor_via"),
            reason=p.get("reason"), mode=st.mode, uid=st.uid, gid=st.gid, location="parked",
        )
        rec = ParkRecord(comp, fn, v.digest, v.created_at, p.get("until"), p["actor"], p.get("actor_via"),
                         p.get("reason"))
        self.store.set_park(rec)
        self.store.clear_observed(f"live/{fn}")
        self._set_observed(comp, fn, "parked", v.digest, st)
        return v, rec

    def _record_unpark(self, comp: str, fn: str, st: Any, p: dict[str, Any]) -> Version:
        v = self.store.record(
            comp, fn, st.data, action="unpark", actor=p["actor"], actor_via=p.get("actor_via"),
            reason=p.get("reason"), mode=st.mode, uid=st.uid, gid=st.gid, location="live",
        )
        self.store.clear_park(comp)
        self.store.clear_observed(f"parked/{fn}")
        self._set_observed(comp, fn, "live", v.digest, st)
        return v

    def _moved_or_undo(self, intent: int, src: Path, dst: Path, *, comp: str | None = None,
                       expect_digest: str | None = None, action: str = "park") -> None:
        """Rename src -> dst (never replacing); when the rename fails, nothing moved: drop the
        intent so no interrupted operation is left behind, and say nothing was changed.

        ``expect_digest``: the bytes judged at ``src`` (validated for unpark, hooked for park);
        read again right before the rename, and when they changed the other write is recorded
        and ChangedMeanwhile raised, nothing moved."""
        if expect_digest is not None and comp is not None:
            try:
                now = fsops.read_state(src)
            except FsError:
                now = None
            if now is None or digest_of(now.data) != expect_digest:
                self.store.end_intent(intent)
                loc = "parked" if src.parent == self.layout.parked_dir else "live"
                raise self._changed_meanwhile(comp, src.name, loc, action, expect_digest, expect_digest, now)
        try:
            fsops.move_noreplace(src, dst)
        except (FsError, LiveFileExists) as exc:
            if src.exists() and not (dst.exists() and os.path.samefile(src, dst)):
                self.store.end_intent(intent)
                exc.message += "; nothing was changed"
            raise

    @contextmanager
    def _after_rename(self, done: str, *, then: str | None = None) -> Iterator[None]:
        """Recording after the rename: a store failure here (a full disk at COMMIT) must say that
        the change already reached the kubelet, and that it will be recorded: the intent was
        committed before the rename, so :meth:`recover` (run by ``staticpodctl recover`` and by
        every changing verb and the daemon's start) records it. Raises StoreError with
        ``details["reached_kubelet"] = True``."""
        try:
            yield
        except StoreError as exc:
            raise StoreError(
                f"{done}, but recording it failed: {exc.message}",
                path=exc.path, hint=(then or "nothing is lost: once the store can be written again, run: "
                                     "staticpodctl recover (the next staticpodctl or staticpodd start does it "
                                     "too); it records this change from the interrupted operation"),
                details={"reached_kubelet": True, "recorded": False},
            ) from exc

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

    def _intent_base(self, fn: str, reason: str | None) -> dict[str, Any]:
        return {"file_name": fn, "actor": self.actor.name, "actor_via": self.actor.via, "reason": reason}

    # -- apply / edit / rollback ------------------------------------------------------------------

    def _target_for_apply(self, source: str, component: str | None) -> Target:
        """The component ``apply`` writes: ``component`` (``--as``) or the source file's stem.
        A new file is only created under a valid component name (letters, digits, '.', '_',
        '-'); existing files with other names stay reachable by their names. Raises UsageError."""
        if component is not None and not component.strip():
            raise UsageError("--as needs a component name (it was empty)",
                             hint="e.g. --as kube-apiserver; leave --as out to use the file's stem")
        if component:
            if not _COMPONENT_NAME.fullmatch(component):
                raise UsageError(
                    f"{component!r} is not a valid component name",
                    hint="letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. kube-apiserver)",
                )
            try:
                return self.resolve(component)
            except UnknownComponent:
                fn = component if component_of(component) != component else component + ".yaml"
                return Target(component_of(fn), fn, False, False)
        base = os.path.basename(source)
        if not is_utf8_name(base):
            raise UsageError(f"'{printable_name(base)}' is not valid UTF-8 and would become the manifest's name",
                             hint="name the component with --as COMPONENT")
        if base in ("", "-") or base.startswith("."):
            raise UsageError(
                f"cannot tell which component {source!r} is",
                hint="pass --as COMPONENT (e.g. --as kube-apiserver)",
            )
        if component_of(base) == base:
            raise UsageError(
                f"{base!r} has no manifest suffix ({', '.join(MANIFEST_SUFFIXES)})",
                hint="pass --as COMPONENT to name the component it replaces",
            )
        try:
            return self.resolve(component_of(base))
        except UnknownComponent:
            if not _COMPONENT_NAME.fullmatch(base):
                raise UsageError(
                    f"{base!r} would become a new manifest under that name, which is not a valid component name",
                    hint="letters, digits, '.', '_' and '-' (e.g. kube-apiserver); name it with --as COMPONENT",
                ) from None
            return Target(component_of(base), base, False, False)

    def apply(
        self,
        data: bytes,
        *,
        source: str,
        component: str | None = None,
        reason: str | None = None,
        check: bool = False,
        unpark: bool = False,
        action: str = "apply",
        expect_digest: str | None = None,
        rename: bool = False,
        restoring: Version | None = None,
    ) -> Result:
        """Validate ``data`` and swap it in atomically as the new version of a component.

        ``source`` is where the bytes came from (for messages and the default component name);
        ``component`` (``--as``) overrides it. A parked component gets its parked copy updated and
        stays parked unless ``unpark``. Identical bytes change nothing on disk (no rename, chmod or
        touch: KUBELET.md consequence 6) and return ``changed=False``. ``check``: change nothing,
        report what would happen (no lock, no store writes). ``expect_digest``: refuse with
        Conflict when the current bytes differ (used by ``edit``).

        Refused with Conflict, before anything changes: new bytes that define another pod
        (namespace/name) than the component's current file, unless ``rename`` (the kubelet would
        stop one pod and start another: KUBELET.md "Identity and restarts"); rollback and
        restore put recorded bytes back and never ask. A live file whose pod is parked under
        another component (it would start the parked pod again behind the park's back).
        Raises InvalidManifest, Conflict, UsageError, HookFailed, LockTimeout, FsError.
        """
        if check:
            return self._apply_inner(data, source, component, reason, True, unpark, action, expect_digest, rename,
                                     restoring)
        with self.nothing_changed_on_error(), self.locked():
            return self._apply_inner(data, source, component, reason, False, unpark, action, expect_digest, rename,
                                     restoring)

    def _current_identity(self, comp: str, cur: bytes | None) -> tuple[str, str] | None:
        """The pod ``comp`` stands for: its current file's, or when that does not parse (or is
        gone) its newest recorded version's that does. None for a component never recorded."""
        ident = self.pod_identity(cur) if cur is not None else None
        if ident is not None or not self.layout.db_path.exists():
            return ident
        seen: set[str] = set()
        for v in reversed(self.store.history(comp)):
            if v.digest in seen:
                continue
            seen.add(v.digest)
            ident = self.pod_identity(self.store.data(v.digest))
            if ident is not None:
                return ident
        return None

    def _check_identity_kept(self, comp: str, fn: str, cur: bytes | None, namespace: str, name: str,
                             action: str) -> None:
        """Refuse bytes that turn ``comp`` into another pod (see :meth:`apply`)."""
        old = self._current_identity(comp, cur)
        if old is None or old == (namespace, name):
            return
        hint = "if that is what you mean, add --rename"
        if action == "apply" and name != comp:
            hint += f"; to add {name} as a pod of its own, apply it under its own name (--as {name})"
        raise Conflict(
            f"{comp} is pod {old[0]}/{old[1]}; the new manifest defines pod {namespace}/{name}: the kubelet "
            f"would stop {old[0]}/{old[1]} and start {namespace}/{name} in its place",
            path=str(self.layout.manifest_dir / fn),
            hint=hint,
        )

    def _check_not_parked_elsewhere(self, comp: str, namespace: str, name: str, cur: bytes | None) -> None:
        """Refuse a live file whose pod is parked under another component (see :meth:`apply`).
        Not when ``cur`` (the component's current bytes) already runs that pod, nor for a parked
        leftover (``kube-scheduler.yaml.bak``, parked to remove a duplicate)."""
        if cur is not None and self.pod_identity(cur) == (namespace, name):
            return
        for other in self.parked_names():
            other_comp = self.component_for(other)
            if other_comp == comp or component_of(other) == other:
                continue
            st = self._state_at("parked", other)
            if st is not None and self.pod_identity(st.data) == (namespace, name):
                raise Conflict(
                    f"pod {namespace}/{name} is parked (component {other_comp}); a live file of component {comp} "
                    "defining it would start it again behind the park",
                    path=str(self._path("parked", other)),
                    hint=f"to change the parked pod: staticpodctl apply FILE --as {other_comp}; "
                    f"to start it: staticpodctl unpark {_q(other_comp)}",
                )

    def _apply_inner(self, data: bytes, source: str, component: str | None, reason: str | None, check: bool,
                     unpark: bool, action: str, expect_digest: str | None, rename: bool = False,
                     restoring: Version | None = None) -> Result:
        if not check:
            fsops.ensure_private_dirs(self.layout)
        target = self._target_for_apply(source, component)
        fn, comp = target.file_name, target.component
        # A park whose parked copy went missing (moved or deleted by hand): the bytes come back
        # as the parked copy and the park is re-opened, never started behind the park's back.
        lost_park = (self.store.park_of(comp) if target.location is None and self.layout.db_path.exists()
                     else None)
        if not check:
            self._scan_before_change(fn)  # records the parked copy's removal (and closes the park)
            target = self.resolve(fn) if (target.live or target.parked) else target
        loc = "parked" if target.parked and not target.live else "live"
        if lost_park is not None and target.location is None:
            loc = "parked"
        if check:
            cur = self._state_at(loc, fn) if target.location else None
        else:
            cur = self._settled_state(comp, loc, fn, action)
        if expect_digest is not None and (cur is None or digest_of(cur.data) != expect_digest):
            head = self.store.head(comp) if self.layout.db_path.exists() else None
            hint = (f"the other write is recorded as version {head.seq}; see what it changed with: "
                    f"staticpodctl diff {_q(comp)} {head.seq - 1} {head.seq}" if head is not None and head.seq > 1
                    else f"see its history with: staticpodctl history {_q(comp)}")
            if action == "edit":
                raise Conflict(f"{fn} changed while you were editing it", path=str(self._path(loc, fn)), hint=hint)
            raise self._changed_meanwhile(comp, fn, loc, action, expect_digest, digest_of(data),
                                          cur) from None
        manifest, warnings = self.gate(data, source, component=comp) if not check else self._gate_ro(data, source)
        if not rename and action in ("apply", "edit"):
            self._check_identity_kept(comp, fn, cur.data if cur is not None else None, manifest.namespace,
                                      manifest.name, action)
        elif action == "rollback":
            old_ident = self._current_identity(comp, cur.data if cur is not None else None)
            if old_ident is not None and old_ident != (manifest.namespace, manifest.name):
                warnings = [*warnings, OpWarning(
                    str(self._path(loc, fn)),
                    f"this version defines pod {manifest.namespace}/{manifest.name}, the current one "
                    f"{old_ident[0]}/{old_ident[1]}: the kubelet stops one and starts the other",
                    code="pod-renamed")]
        if loc == "live" or unpark:
            self._check_no_duplicate(fn, manifest.namespace, manifest.name)
            self._check_not_parked_elsewhere(comp, manifest.namespace, manifest.name,
                                             cur.data if cur is not None and loc == "live" else None)
        new_digest = digest_of(data)
        old_digest = digest_of(cur.data) if cur else None
        label_a = f"{comp} (current)" if cur else "/dev/null"
        diff = unified_diff(cur.data if cur else None, data, label_a, f"{comp} (new)")
        pair = {"before": (cur.data if cur else b"").decode("utf-8", "replace"), "before_header": label_a,
                "after": data.decode("utf-8", "replace"), "after_header": f"{comp} (new)"}
        if old_digest == new_digest:
            res = Result(action, comp, fn, False, f"{comp}: unchanged ({fn}, {loc})", location=loc,
                         version=self.store.head(comp) if self.layout.db_path.exists() else None,
                         previous_digest=old_digest, digest=new_digest, diff="", warnings=warnings, check=check)
            if loc == "parked" and unpark and not check:
                unparked = self.unpark(comp, reason=reason)
                unparked.action = action
                unparked.msg = f"{comp}: bytes unchanged; unparked"
                unparked.diff = ""
                unparked.warnings = warnings
                return unparked
            if not check:
                self._log(Event.UNCHANGED, f"{comp}: {action} with identical bytes, nothing changed",
                          component=comp, file_name=fn, digest=new_digest, reason=reason, action=action)
            return res
        verb = {"apply": "apply", "edit": "apply", "rollback": "rollback", "restore": "apply"}.get(action, "apply")
        if check:
            where = "parked copy of " if loc == "parked" else ""
            msg = f"{comp}: would {action} {where}{fn}" + (" and unpark it" if loc == "parked" and unpark else "")
            return Result(action, comp, fn, True, msg, location=loc, previous_digest=old_digest, digest=new_digest,
                          diff=diff, warnings=warnings, check=True, diff_pair=pair)
        self._hooks("pre", verb, component=comp, file_name=fn, reason=reason, digest=new_digest)
        if cur is not None:
            mode, uid, gid = cur.mode, cur.uid, cur.gid
            if restoring is not None and restoring.mode is not None:
                # the bad write's mode is part of the bad write (cp makes 0644): never looser than
                # the version put back, and that version's owner
                mode = mode & restoring.mode
                if restoring.uid is not None and restoring.gid is not None:
                    uid, gid = restoring.uid, restoring.gid
            if cur.is_symlink:
                raise Conflict(
                    f"{fn} is a symlink; staticpodd does not write through links",
                    path=str(self._path(loc, fn)),
                    hint="replace the link with a regular file first",
                )
        else:
            mode, uid, gid = fsops.NEW_FILE_MODE, fsops.NEW_FILE_UID, fsops.NEW_FILE_GID
            if os.geteuid() != 0:
                uid, gid = os.geteuid(), os.getegid()
        staged = fsops.write_staged(self.layout, fn, data, mode=mode, uid=uid, gid=gid)
        fsops.crashpoint("swap:staged")
        payload = self._intent_base(fn, reason)
        payload.update(action=action, location=loc, staged=str(staged), new_digest=new_digest, old_digest=old_digest)
        if lost_park is not None and loc == "parked":
            payload["reopen_park"] = {"parked_at": lost_park.parked_at, "until": lost_park.until,
                                      "actor": lost_park.actor, "actor_via": lost_park.actor_via,
                                      "reason": lost_park.reason}
        try:
            intent = self.store.begin_intent("swap", comp, payload)
        except StoreError:
            try:
                fsops.remove(staged)
            except FsError:
                pass  # swept by the next recover
            raise
        fsops.crashpoint("swap:intent")
        dst = self._path(loc, fn)
        try:
            late = fsops.replace_checked(staged, dst, old_digest)
        except fsops.ChangedUnderfoot as exc:
            fsops.remove(staged)
            self.store.end_intent(intent)
            raise self._changed_meanwhile(comp, fn, loc, action, old_digest, new_digest, exc.state) from None
        except (FsError, LiveFileExists) as exc:
            if not dst.exists() or digest_of(dst.read_bytes()) != new_digest:
                fsops.remove(staged)
                self.store.end_intent(intent)
                exc.message += "; nothing was changed"
                exc.details["reached_kubelet"] = False
            else:  # renamed, then the directory fsync failed: in place, recorded by recover
                exc.message += (f"; {fn} is in place all the same (the kubelet runs it); run staticpodctl recover "
                                "to record it")
                exc.details["reached_kubelet"] = True
            raise
        fsops.crashpoint("swap:renamed")
        st = fsops.read_state(dst)
        assert st is not None
        with self._after_rename(f"{fn} is in place: the kubelet runs the new manifest ({new_digest[:12]})"
                                if loc == "live" else f"the parked copy of {fn} is updated ({new_digest[:12]})"), \
                self.store.transaction():
            if late is not None:  # written in the instant between the check and the swap: kept in history
                lv = self.store.record(comp, fn, late.data, action="external", actor=EXTERNAL,
                                       reason=f"written during the {action} swap", mode=late.mode, uid=late.uid,
                                       gid=late.gid, location=loc)
                warnings = [*warnings, OpWarning(
                    str(dst), f"{fn} was written by someone else in the instant of the swap; that write is "
                    f"recorded as version {lv.seq} ({lv.digest[:12]}) and was replaced", code="changed-meanwhile")]
            version = self._record_swap(comp, fn, loc, data, st, payload)
            self.store.end_intent(intent)
        fsops.crashpoint("swap:recorded")
        event = {"apply": Event.APPLIED, "edit": Event.EDITED, "rollback": Event.ROLLED_BACK}.get(action, Event.APPLIED)
        if loc == "parked":
            event = Event.PARKED_COPY_UPDATED
        if action != "restore":  # restore_last_good's caller (the daemon) logs RESTORED_LAST_GOOD itself
            self._log(
                event, f"{comp}: {action} version {version.seq} ({new_digest[:12]}) to {loc} {fn}",
                priority=NOTICE, component=comp, file_name=fn, version=version.seq, digest=new_digest,
                previous_digest=old_digest, reason=reason, action=action, location=loc,
            )
        self._hooks("post", verb, component=comp, file_name=fn, reason=reason, version=version.seq, digest=new_digest)
        msg = f"{comp}: {action} version {version.seq} ({new_digest[:12]}) -> {fn}"
        if loc == "parked":
            msg = f"{comp}: updated the parked copy (version {version.seq}); it stays parked"
            if unpark:
                res = self.unpark(comp, reason=reason)
                res.action = action
                res.msg = f"{comp}: updated the parked copy (version {version.seq}) and unparked it"
                res.diff = diff
                res.previous_digest = old_digest
                res.warnings = warnings
                res.changed = True
                return res
        return Result(action, comp, fn, True, msg, location=loc, version=version, previous_digest=old_digest,
                      digest=new_digest, diff=diff, warnings=warnings, diff_pair=pair)

    def _settled_state(self, comp: str, loc: str, fn: str, action: str) -> fsops.FileState | None:
        """The file at ``loc``/``fn`` as it is now, with its bytes recorded: the drift scan ran just
        before, and a write between that scan and this read is scanned (recorded) again, so the
        digest a changing verb judges, and compares right before its rename, is always one that
        is in history. Raises ChangedMeanwhile when the file will not hold still (five reads)."""
        key = f"{loc}/{fn}"
        for _ in range(5):
            st = self._state_at(loc, fn)
            obs = self.store.observed().get(key)
            if st is None:
                if obs is None:
                    return None
            elif obs is not None and (obs.digest == digest_of(st.data) or obs.digest.startswith("too-large:")):
                return st
            elif obs is None and self.store.knows_digest(comp, digest_of(st.data)):
                return st
            self.scan([fn])
        raise ChangedMeanwhile(
            f"{fn} keeps changing while {action} tries to read it (another writer is at work); nothing was changed",
            path=str(self._path(loc, fn)), hint=f"wait for the other writer, then run the {action} again")

    def _changed_meanwhile(self, comp: str, fn: str, loc: str, action: str, judged: str | None, refused: str,
                           now: fsops.FileState | None) -> ChangedMeanwhile:
        """Record the write that landed between judging and renaming (as drift, actor external)
        and build the refusal naming both versions."""
        judged_seq = next((v.seq for v in reversed(self.store.history(comp)) if v.digest == judged), None)
        self.scan([fn])
        after = self.store.head(comp)
        path = str(self._path(loc, fn))
        moving = action in ("park", "unpark")
        what = action if moving else f"{action} of {refused[:12]}"
        tail = "nothing was moved" if moving else "your manifest was not put in place"
        if now is None:
            msg = (f"{fn} was removed by someone else while the {what} was running (after it was judged, "
                   f"before the rename); {'nothing was moved' if moving else 'nothing was put in place'}")
            hint = f"see: staticpodctl history {_q(comp)}; run the {action} again to put it back"
            rec = None
        else:
            rec = after.seq if after is not None and after.digest != judged else None
            shown = after.digest if after is not None and rec is not None else digest_of(now.data)
            msg = (f"{fn} changed while the {what} was running (someone else wrote it after it was judged as "
                   f"version {judged_seq if judged_seq is not None else '-'}, before the rename): that write is "
                   f"recorded as version {rec if rec is not None else '?'} ({shown[:12]}); "
                   f"{tail}")
            hint = (f"see what changed: staticpodctl diff {_q(comp)} {judged_seq} {rec}; then run the {action} "
                    "again to replace it" if judged_seq is not None and rec is not None else
                    f"see: staticpodctl history {_q(comp)}; then run the {action} again")
        self._log(Event.DRIFT_RECORDED, f"{comp}: {action} refused: {fn} changed after it was judged",
                  priority=WARNING, component=comp, file_name=fn, version=rec, digest=refused,
                  previous_digest=judged, kind="changed-meanwhile", action=action)
        return ChangedMeanwhile(msg, path=path, hint=hint,
                                details={"judged_version": judged_seq, "recorded_version": rec,
                                         "refused_digest": refused, "judged_digest": judged})

    def _gate_ro(self, data: bytes, source: str) -> tuple[Any, list[Any]]:
        from .validate import gate

        return gate(data, source, self.validate_options())

    def current_bytes(self, name: str) -> tuple[Target, bytes, str]:
        """``(target, bytes, location)`` of a component's file as it is now (live, else parked).

        Raises UnknownComponent when it has no file.
        """
        target = self.resolve(name)
        for loc in ("live", "parked"):
            if (loc == "live" and target.live) or (loc == "parked" and target.parked):
                st = self._state_at(loc, target.file_name)
                if st is not None:
                    return target, st.data, loc
        raise UnknownComponent(
            f"{target.component} has no live or parked file",
            hint=f"see its recorded versions: staticpodctl history {_q(target.component)}",
        )

    def rollback(self, name: str, *, to: int | None = None, reason: str | None = None, check: bool = False) -> Result:
        """Put an earlier version back, as a new version (action ``rollback``).

        ``to``: the seq to restore; default the newest version whose bytes differ from the
        current ones and pass the gate (broken hand edits in history are skipped). The bytes go
        through the gate again. Raises UnknownVersion, Conflict (nothing to roll back to),
        InvalidManifest, plus what :meth:`apply` raises. Across a pod rename it warns
        (``pod-renamed``) rather than refuses: the bytes were in force before.
        """
        with self.nothing_changed_on_error():
            return self._rollback(name, to=to, reason=reason, check=check)

    def _rollback(self, name: str, *, to: int | None, reason: str | None, check: bool) -> Result:
        target = self.resolve(name)
        comp = target.component
        skipped: list[int] = []
        if to is None:
            try:
                _, cur_data, _ = self.current_bytes(comp)
                cur_digest = digest_of(cur_data)
            except UnknownComponent:
                cur_digest = None
            candidates = [v for v in reversed(self.store.history(comp)) if v.digest != cur_digest]
            if not candidates:
                raise Conflict(
                    f"{comp} has no earlier version that differs from the current bytes",
                    hint=f"see: staticpodctl history {_q(comp)}",
                )
            # the newest one that passes the gate: a broken hand edit in history is skipped
            valid = [v for v in candidates if self._verdict(self.store.data(v.digest), f"{comp}@{v.seq}", comp)[0]]
            if not valid:
                raise Conflict(
                    f"{comp} has no earlier version that passes validation",
                    hint=f"see: staticpodctl history {_q(comp)}; staticpodctl rollback {_q(comp)} --to N "
                    "shows why one fails",
                )
            version = valid[0]
            skipped = [v.seq for v in candidates[: candidates.index(version)] if v.digest != version.digest]
        else:
            version = self.store.get(comp, to)
        data = self.store.data(version.digest)
        reason = reason or f"rollback to version {version.seq}"
        res = self.apply(data, source=f"{comp}@{version.seq}", component=target.file_name, reason=reason,
                         check=check, action="rollback")
        res.extra["rolled_back_to"] = version.seq
        if res.changed and res.version is not None and res.location != "parked":
            res.msg = f"{comp}: rolled back to version {version.seq} (recorded as version {res.version.seq})"
        if to is None and skipped:
            res.msg += (f"; skipped version{'s' if len(skipped) > 1 else ''} "
                        f"{', '.join(map(str, skipped))}: invalid")
        return res

    def restore_last_good(self, name: str, *, reason: str, judged_digest: str | None = None) -> Result:
        """Put back the newest recorded version of ``name`` that passes the gate (daemon policy
        ``on_invalid: restore``). The bad bytes stay in history. The caller logs
        RESTORED_LAST_GOOD (it knows why). Raises Conflict when no recorded version passes.

        ``judged_digest``: the sha256 of the live bytes the caller judged invalid. The restore
        acts only while the live file still holds exactly those bytes: a write that landed after
        the judgement (a valid fix, typically) is recorded and never reverted; ChangedMeanwhile
        is raised instead (the caller looks again). The digest is compared once here and again
        right before the rename (:func:`fsops.replace_checked`). Issue 11 item 2.
        """
        with self.nothing_changed_on_error(), self.locked():
            return self._restore_last_good(name, reason=reason, judged_digest=judged_digest)

    def _restore_last_good(self, name: str, *, reason: str, judged_digest: str | None) -> Result:
        target = self.resolve(name)
        comp = target.component
        present = bool(target.live or target.parked)
        _, cur, _ = self.current_bytes(comp) if present else (target, b"", "live")
        bad = digest_of(cur) if present else None  # an emptied file has a digest too (B05-empty.yaml)
        if judged_digest is not None:
            if bad != judged_digest:
                now = self._state_at("live", target.file_name)
                err = self._changed_meanwhile(comp, target.file_name, "live", "restore", judged_digest,
                                              judged_digest, now)
                err.message = (f"{target.file_name} changed after it was judged invalid "
                               f"({judged_digest[:12]}); not restored: the new write is recorded"
                               + (f" as version {err.details['recorded_version']}"
                                  if err.details.get("recorded_version") else ""))
                raise err
        seen: set[str] = set()
        for v in reversed(self.store.history(comp)):
            if v.digest == bad or v.digest in seen:
                continue
            seen.add(v.digest)
            data = self.store.data(v.digest)
            ok, _ = self._verdict(data, f"{comp}@{v.seq}", comp)
            if ok:
                res = self.apply(data, source=f"{comp}@{v.seq}", component=target.file_name, reason=reason,
                                 action="restore", restoring=v, expect_digest=judged_digest)
                res.extra["restored_version"] = v.seq
                return res
        raise Conflict(f"{comp} has no recorded version that passes validation", hint="fix the file by hand")

    # -- park / unpark -----------------------------------------------------------------------------

    def park(self, name: str, *, until: float | None = None, reason: str | None = None,
             force: bool = False) -> Result:
        """Take a component out of the kubelet's directory, keeping its manifest.

        Renames ``<manifests>/<file>`` to ``<manifests>/.staticpodd/parked/<file>`` on the same
        mount (atomic), fsyncs both directories, records drift first, then a ``park`` version and
        the park record (who, when, why, ``until`` epoch deadline or None). The kubelet stops the
        pod at its next relist (KUBELET.md "When the kubelet looks").
        When other live files define the same pod (KUBELET.md "Duplicate names across files"),
        parking one of them does not stop the pod: that is refused, unless ``fn`` is itself a
        leftover (no manifest suffix: ``kube-scheduler.yaml.bak``), where parking it is exactly
        how the duplicate goes away, or ``force`` says the operator means it. The result then
        says which file the pod keeps running from.
        Raises UnknownComponent, AlreadyParked, Conflict, HookFailed, LockTimeout, FsError.
        """
        with self.nothing_changed_on_error(), self.locked():
            fsops.ensure_private_dirs(self.layout)
            target = self.resolve(name, allow_recorded=False)
            self._scan_before_change(target.file_name)
            target = self.resolve(target.file_name, allow_recorded=False)
            comp, fn = target.component, target.file_name
            if not target.live:
                rec = self.store.park_of(comp)
                detail = ""
                if rec:
                    detail = f" since {iso(rec.parked_at)} by {rec.actor}" + (
                        f" until {iso(rec.until)}" if rec.until else ""
                    ) + (f" ({rec.reason})" if rec.reason else "")
                raise AlreadyParked(f"{comp} is already parked{detail}",
                                    hint=f"bring it back with: staticpodctl unpark {_q(comp)}")
            replaced_note = ""
            if target.parked:
                old = self._state_at("parked", fn)
                if old is not None and self.store.knows_digest(comp, digest_of(old.data)):
                    fsops.remove(self._path("parked", fn))
                    self.store.clear_observed(f"parked/{fn}")
                    self.store.record_event("stale-parked-copy-replaced", component=comp, file_name=fn,
                                            actor=self.actor.name, details={"digest": digest_of(old.data)})
                    replaced_note = (f"; the older parked copy ({digest_of(old.data)[:12]}) was replaced "
                                     f"(its bytes stay in history: staticpodctl history {_q(comp)})")
                else:
                    raise Conflict(
                        f"a parked copy of {fn} exists that is not recorded",
                        path=str(self._path("parked", fn)),
                        hint="move it away by hand (it is your only copy), then park again",
                    )
            st = self._state_at("live", fn)
            assert st is not None
            if st.is_symlink:
                raise Conflict(
                    f"{fn} is a symlink (to {os.readlink(self._path('live', fn))}); parking would move the link, "
                    "not the manifest, and a relative link would dangle while parked",
                    path=str(self._path("live", fn)),
                    hint="replace the link with a regular file (cp --remove-destination TARGET LINK), then park",
                )
            ident = self.pod_identity(st.data)
            twins = self.files_defining(ident, besides=fn) if ident is not None else []
            twins_note = ""
            if twins and ident is not None:
                leftover = component_of(fn) == fn
                if not (leftover or force):
                    stray_twins = [t for t in twins if component_of(t) == t]
                    odd = [t for t in twins if self._is_untrackable_display(t)]
                    hint = (f"rename or move {odd[0]} out of the directory first (its name is not UTF-8, so "
                            f"staticpodctl cannot park it), then park {comp}" if odd else
                            f"park the leftover first (staticpodctl park {_q(stray_twins[0])}), then park {comp}"
                            if stray_twins else
                            f"park or move the other file(s) first, or park only {fn} with --force "
                            "(the pod keeps running from the other file)")
                    raise Conflict(
                        f"{', '.join(twins)} also define{'s' if len(twins) == 1 else ''} pod {ident[0]}/{ident[1]}; "
                        f"parking {fn} would not stop the pod: the kubelet would go on running it from {twins[-1]}",
                        path=str(self._path("live", twins[-1])),
                        hint=hint,
                    )
                if until is not None:
                    raise UsageError(
                        f"parking {fn} does not stop pod {ident[0]}/{ident[1]} (it keeps running from {twins[-1]}), "
                        "so a deadline to start it again means nothing",
                        hint=f"park it without --for/--until: staticpodctl park {_q(fn)}",
                    )
                twins_note = f"; pod {ident[0]}/{ident[1]} keeps running from {twins[-1]}"
            digest = digest_of(st.data)
            self._hooks("pre", "park", component=comp, file_name=fn, reason=reason, digest=digest)
            payload = self._intent_base(fn, reason)
            payload.update(digest=digest, until=until)
            intent = self.store.begin_intent("park", comp, payload)
            fsops.crashpoint("park:intent")
            self._moved_or_undo(intent, self._path("live", fn), self._path("parked", fn), comp=comp,
                                expect_digest=digest, action="park")
            fsops.crashpoint("park:renamed")
            pst = self._state_at("parked", fn)
            assert pst is not None
            with self._after_rename(f"{fn} is parked: the kubelet stops the pod"), self.store.after_intent():
                version, rec = self._record_park(comp, fn, pst, payload)
                self.store.end_intent(intent)
            self._log(
                Event.PARKED,
                f"{comp}: parked {fn}" + (f" until {iso(until)}" if until else "") + (f" ({reason})" if reason else ""),
                priority=NOTICE, component=comp, file_name=fn, version=version.seq, digest=digest,
                reason=reason, until=iso(until) if until else None,
            )
            self._hooks("post", "park", component=comp, file_name=fn, reason=reason, version=version.seq,
                        digest=digest)
            res = Result("park", comp, fn, True, f"{comp}: parked {fn}{replaced_note}{twins_note}", location="parked",
                         version=version, digest=digest, park=rec)
            if twins:
                res.extra["keeps_running_from"] = twins[-1]
            return res

    def unpark(self, name: str, *, reason: str | None = None) -> Result:
        """Put a parked component back at the same path, byte-identical, never over a live file.

        The parked bytes go through the gate (a cached verdict for the same bytes is reused).
        Raises NotParked, LiveFileExists (a live file appeared meanwhile: nothing changed),
        InvalidManifest, Conflict (another file defines the same pod), HookFailed, LockTimeout.
        """
        with self.nothing_changed_on_error(), self.locked():
            recovered_note = ""
            try:
                target = self.resolve(name, allow_recorded=False)
            except Conflict:
                missing = self._park_with_missing_copy(name)
                if missing is None:
                    raise
                # the parked copy is gone but the park stands: put its newest version back as the
                # parked copy (validated, recorded, atomic), then unpark it as usual
                back = self.rollback(missing, reason=reason or "unpark: the parked copy was gone")
                seq = back.version.seq if back.version is not None else "?"
                recovered_note = f" (its parked copy was gone: version {seq} put back from history)"
                target = self.resolve(name, allow_recorded=False)
            found = self._scan_before_change(target.file_name)
            target = self.resolve(target.file_name, allow_recorded=False)
            comp, fn = target.component, target.file_name
            if any(c.kind == "unparked-by-hand" and c.file_name == fn for c in found):
                return Result("unpark", comp, fn, False,
                              f"{comp}: {fn} was already moved back by hand; its park record is now closed",
                              location="live")
            if target.live and any(c.kind == "parked-copy-removed" and c.file_name == fn for c in found):
                return Result("unpark", comp, fn, False,
                              f"{comp}: the parked copy was removed by hand and {fn} is live; its park record is "
                              "now closed", location="live")
            if not target.parked:
                raise NotParked(f"{comp} is not parked", hint="see: staticpodctl status")
            if target.live:
                live = self._state_at("live", fn)
                parked_st = self._state_at("parked", fn)
                if live is not None and parked_st is not None and live.data == parked_st.data:
                    return self._close_park_copied_back(comp, fn, live, reason)
                when = ""
                if live is not None:
                    when = time.strftime(" (modified %Y-%m-%dT%H:%M:%SZ)",
                                         time.gmtime(os.stat(self._path("live", fn)).st_mtime))
                raise LiveFileExists(
                    f"{fn} is live again{when} and differs from the parked copy; not overwriting it",
                    path=str(self._path("live", fn)),
                    hint=f"both are in history (staticpodctl history {_q(comp)}). To keep the live file, delete the "
                    f"parked copy ({self._path('parked', fn)}), then unpark closes the park; to let the parked "
                    "copy win, move the live file out of the directory first, then unpark",
                )
            pst = self._state_at("parked", fn)
            assert pst is not None
            digest = digest_of(pst.data)
            from .resources import validator_id

            if self.store.verdict(digest, validator_id()) is not True:
                manifest, _ = self.gate(pst.data, str(self._path("parked", fn)), component=comp)
                self._check_no_duplicate(fn, manifest.namespace, manifest.name)
                self._check_not_parked_elsewhere(comp, manifest.namespace, manifest.name, None)
            else:  # these exact bytes passed this exact validator before
                ident = self.pod_identity(pst.data)
                if ident:
                    self._check_no_duplicate(fn, *ident)
                    self._check_not_parked_elsewhere(comp, *ident, None)
            self._hooks("pre", "unpark", component=comp, file_name=fn, reason=reason, digest=digest)
            payload = self._intent_base(fn, reason)
            payload.update(digest=digest)
            intent = self.store.begin_intent("unpark", comp, payload)
            fsops.crashpoint("unpark:intent")
            self._moved_or_undo(intent, self._path("parked", fn), self._path("live", fn), comp=comp,
                                expect_digest=digest, action="unpark")
            fsops.crashpoint("unpark:renamed")
            st = self._state_at("live", fn)
            assert st is not None
            rec = self.store.park_of(comp)
            with self._after_rename(f"{fn} is live again: the kubelet starts the pod"), self.store.after_intent():
                version = self._record_unpark(comp, fn, st, payload)
                self.store.end_intent(intent)
            parked_for = f" after {_human_duration(time.time() - rec.parked_at)}" if rec else ""
            self._log(
                Event.UNPARKED, f"{comp}: unparked {fn}{parked_for}" + (f" ({reason})" if reason else ""),
                priority=NOTICE, component=comp, file_name=fn, version=version.seq, digest=digest, reason=reason,
            )
            self._hooks("post", "unpark", component=comp, file_name=fn, reason=reason, version=version.seq,
                        digest=digest)
            return Result("unpark", comp, fn, True, f"{comp}: unparked {fn}{parked_for}{recovered_note}",
                          location="live", version=version, digest=digest, park=rec)

    def discard_park(self, name: str, *, reason: str | None = None) -> Result:
        """End a park without starting anything: delete the parked copy (its bytes are recorded:
        recorded first if they were not) and close the park. For a parked leftover (a
        ``.bak``), or a component the operator retires. Raises NotParked, UnknownComponent,
        LockTimeout, FsError."""
        with self.nothing_changed_on_error(), self.locked():
            missing = self._park_with_missing_copy(name)
            if missing is not None:
                comp, fn = missing, self.store.park_of(missing).file_name  # type: ignore[union-attr]
            else:
                target = self.resolve(name, allow_recorded=False)
                found = self._scan_before_change(target.file_name)  # the parked copy's bytes are in history now
                target = self.resolve(target.file_name, allow_recorded=False)
                comp, fn = target.component, target.file_name
                if any(c.kind == "unparked-by-hand" and c.file_name == fn for c in found):
                    return Result("unpark", comp, fn, False,
                                  f"{comp}: {fn} was already moved back by hand; its park record is now closed "
                                  "(nothing to discard)", location="live")
                if not target.parked or self.store.park_of(comp) is None:
                    raise NotParked(f"{comp} is not parked", hint="see: staticpodctl status")
            rec = self.store.park_of(comp)
            parked_st = self._state_at("parked", fn)
            parked_digest = digest_of(parked_st.data) if parked_st is not None else None
            parked_version = next((v for v in reversed(self.store.history(comp)) if v.digest == parked_digest), None)
            live_too = self._path("live", fn).exists()
            fsops.remove(self._path("parked", fn))
            with self._after_rename(f"the parked copy of {fn} is deleted (its bytes are in history)",
                                    then="the park stands until it is closed; run the discard again"), \
                    self.store.transaction():
                if parked_st is not None:  # a history row: the park's end, with the bytes it ended with
                    parked_version = self.store.record(
                        comp, fn, parked_st.data, action="discard", actor=self.actor.name,
                        actor_via=self.actor.via, reason=reason, mode=parked_st.mode, uid=parked_st.uid,
                        gid=parked_st.gid, location="parked")
                self.store.clear_park(comp)
                self.store.clear_observed(f"parked/{fn}")
                self.store.record_event("discarded", component=comp, file_name=fn, actor=self.actor.name,
                                        details={"reason": reason, "digest": rec.digest if rec else None})
            head = self.store.head(comp)
            seq = parked_version.seq if parked_version is not None else None
            msg = (f"{comp}: park ended; the parked copy of {fn} is deleted"
                   + (f" (its bytes stay in history as version {seq})" if seq else "")
                   + ("; the live file stays and the kubelet runs it" if live_too else
                      "; nothing was started"))
            self._log(Event.UNPARKED, msg, priority=NOTICE, component=comp, file_name=fn, version=seq,
                      reason=reason, action="discard")
            return Result("unpark", comp, fn, True, msg, location=None, version=head, park=rec)

    def parks_bypassed(self) -> list[tuple[str, str]]:
        """``(component, live file)`` for every parked component whose pod another live file
        defines: the kubelet runs it although it is parked (KUBELET.md "Duplicate names across
        files"). Read-only; for ``doctor``."""
        if not self.layout.db_path.exists():
            return []
        out = []
        for rec in self.store.parks():
            st = self._state_at("parked", rec.file_name)
            ident = self.pod_identity(st.data) if st is not None else None
            if ident is None:
                continue
            for other in self.files_defining(ident, besides=rec.file_name):
                out.append((rec.component, other))
        return out

    def _park_with_missing_copy(self, name: str) -> str | None:
        """The component ``name`` (or file name) when it is parked and its parked copy and live
        file are both gone; None otherwise."""
        if not self.layout.db_path.exists():
            return None
        head = self.store.head(name) or self.store.head(component_of(name))
        if head is None or self.store.park_of(head.component) is None:
            return None
        if self._path("parked", head.file_name).exists() or self._path("live", head.file_name).exists():
            return None
        return head.component

    def _close_park_copied_back(self, comp: str, fn: str, live: Any, reason: str | None) -> Result:
        """The parked copy was copied (not moved) back by hand: the live file is byte-identical
        and the kubelet already runs it. Delete the redundant parked copy (its bytes are recorded)
        and close the park. A crash between the two leaves the parked copy's removal for the next
        scan, which closes the park the same way."""
        parked_path = self._path("parked", fn)
        fsops.remove(parked_path)
        rec = self.store.park_of(comp)
        payload = self._intent_base(fn, reason)
        with self.store.transaction():
            self.store.clear_observed(f"parked/{fn}")
            version = self._record_unpark(comp, fn, live, payload)
        msg = f"{comp}: {fn} was already copied back by hand (identical bytes); removed the parked copy, park closed"
        self._log(Event.UNPARKED, msg, priority=NOTICE, component=comp, file_name=fn, version=version.seq,
                  digest=version.digest, reason=reason)
        return Result("unpark", comp, fn, True, msg, location="live", version=version, digest=version.digest,
                      park=rec)

    # -- quarantine ------------------------------------------------------------------------------

    def quarantine(self, file_name: str, *, reason: str) -> Path:
        """Move a stray live file out of the kubelet's sight into ``.staticpodd/quarantine/``
        (same mount: one rename), recorded first so its bytes are in history. Returns the new path.
        Raises UnknownComponent when the file is not there, FsError."""
        with self.nothing_changed_on_error(), self.locked():
            fsops.ensure_private_dirs(self.layout)
            src = self._path("live", file_name)
            if not src.is_file():
                raise UnknownComponent(f"no file {file_name!r} in {self.layout.manifest_dir}")
            self.scan([file_name])
            st = self._state_at("live", file_name)
            assert st is not None
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            dst = self.layout.quarantine_dir / f"{file_name}.{stamp}"
            n = 1
            while dst.exists():
                n += 1
                dst = self.layout.quarantine_dir / f"{file_name}.{stamp}.{n}"
            fsops.move_noreplace(src, dst)
            comp = self.component_for(file_name)
            self.store.clear_observed(f"live/{file_name}")
            self.store.record_event("quarantined", component=comp, file_name=file_name, actor=self.actor.name,
                                    reason=reason, details={"digest": digest_of(st.data), "to": str(dst)})
            self._log(Event.STRAY_QUARANTINED, f"moved stray {file_name} to {dst}", priority=WARNING,
                      component=comp, file_name=file_name, digest=digest_of(st.data), reason=reason,
                      quarantine_path=str(dst))
            return dst

    # -- read-only verbs ---------------------------------------------------------------------------

    def history(self, name: str, *, limit: int | None = None) -> tuple[str, list[Version]]:
        """``(component, versions oldest first)``. Raises UnknownComponent."""
        target = self.resolve(name)
        versions = self.store.history(target.component, limit=limit) if self.layout.db_path.exists() else []
        return target.component, versions

    def show(self, spec: str) -> tuple[Version | None, bytes, str]:
        """Bytes of ``component@seq`` (or the current file for a bare name): ``(version, bytes, label)``.

        Raises UnknownComponent, UnknownVersion, UsageError.
        """
        comp_name, seq = split_at(spec)
        if seq is None:
            target, data, loc = self.current_bytes(comp_name)
            head = self.store.head(target.component) if self.layout.db_path.exists() else None
            v = head if head is not None and head.digest == digest_of(data) else None
            return v, data, f"{target.file_name} ({loc})"
        target = self.resolve(comp_name)
        v = self.store.get(target.component, seq)
        return v, self.store.data(v.digest), f"{target.component}@{seq}"

    def diff(self, name: str, a: int | None = None, b: int | None = None) -> str:
        """Unified diff between versions ``a`` and ``b`` (``b`` None: the current file; both None:
        the newest version against the current file, which shows drift). Raises UnknownVersion."""
        target = self.resolve(name)
        comp = target.component
        if a is None:
            head = self.store.head(comp)
            if head is None:
                raise UnknownComponent(f"{comp} has no recorded version", hint="nothing to compare with yet")
            a = head.seq
        va = self.store.get(comp, a)
        da = self.store.data(va.digest)
        if b is None:
            try:
                _, db, loc = self.current_bytes(comp)
                label_b = f"{target.file_name} ({loc})"
            except UnknownComponent:
                db, label_b = None, "(no file)"
        else:
            vb = self.store.get(comp, b)
            db = self.store.data(vb.digest)
            label_b = f"{comp}@{b}"
        return unified_diff(da, db, f"{comp}@{a}", label_b)

    def status(self) -> dict[str, Any]:
        """Every component with its state (``live``, ``parked``, ``missing`` = parked copy gone,
        ``removed`` = recorded but no longer in the directory), newest version, digest
        of its current bytes, drift, park record, plus interrupted operations. Read-only: takes no
        lock and writes nothing. Shape: ``{"manifest_dir", "components": [...], "interrupted": n}``.
        """
        self.check_manifest_dir()
        have_store = self.layout.db_path.exists()
        store = self.store if have_store else None
        live = self.live_names()
        parked = self.parked_names()
        rows: dict[str, dict[str, Any]] = {}
        parks = {p.component: p for p in store.parks()} if store else {}
        for loc, pool in (("live", live), ("parked", parked)):
            for fn in pool:
                comp = self.component_for(fn)
                if comp in rows and rows[comp]["state"] == "live":
                    continue
                try:
                    st = self._state_at(loc, fn)
                except FsError:
                    st = None
                digest = digest_of(st.data) if st else None
                head = store.head(comp) if store else None
                rows[comp] = {
                    "component": comp,
                    "file_name": fn,
                    "state": loc,
                    "version": head.seq if head else None,
                    "digest": digest,
                    "drift": head is None or head.digest != digest,
                    "mode": f"{st.mode:04o}" if st else None,
                    "stray": component_of(fn) == fn,
                    "parked": parks[comp].to_dict() if comp in parks else None,
                }
                if loc == "live" and comp in parks:
                    if fn in parked:  # both copies: someone wrote it back while parked
                        rows[comp]["park_broken"] = True
                    else:  # the parked copy was moved back by hand: effectively unparked
                        rows[comp]["unparked_by_hand"] = True
        if store is not None:
            for comp in store.components():
                if comp in rows or comp in parks:
                    continue
                last = store.events(comp, limit=1)
                if last and last[-1]["kind"] == "quarantined":
                    continue  # a stray the daemon moved out on purpose
                head = store.head(comp)
                assert head is not None
                if _is_tool_tempfile(head.file_name):
                    continue  # a sed/salt/puppet temp file that was renamed into place: not a component
                rows[comp] = {"component": comp, "file_name": head.file_name, "state": "removed",
                              "version": head.seq, "digest": None, "drift": False, "mode": None,
                              "stray": component_of(head.file_name) == head.file_name, "parked": None}
        for comp, p in parks.items():
            if comp not in rows:
                head = store.head(comp) if store else None
                rows[comp] = {"component": comp, "file_name": p.file_name, "state": "missing",
                              "version": head.seq if head else None, "digest": None, "drift": True,
                              "mode": None, "stray": False, "parked": p.to_dict()}
        return {
            "manifest_dir": str(self.layout.manifest_dir),
            "components": [rows[k] for k in sorted(rows)],
            # files the kubelet reads but staticpodd cannot track (names not valid UTF-8)
            "untrackable": sorted(printable_name(n) for n in self.untrackable),
            # intents whose process is gone: a live pid is an operation still under way
            "interrupted": sum(1 for i in store.intents() if not pid_alive(i.pid)) if store else 0,
        }


#: A file whose ctime was less than this before its bytes were read gets no stored signature: a
#: write in the same timestamp tick as the read would leave the stat unchanged (git's "racy" rule).
_RACY_NS = 2_000_000_000


def wanted_all(names: Iterable[str] | None) -> bool:
    """Whether a scan of ``names`` is a full one (None: every path)."""
    return names is None


def _sig_text(sig: tuple[int, ...]) -> str:
    return ",".join(map(str, sig))


def _stat_sig(path: Path) -> tuple[int, ...] | None:
    """``(size, mtime_ns, ino, dev, mode, uid, gid, ctime_ns)`` of what ``path`` points to, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_mode, st.st_uid, st.st_gid, st.st_ctime_ns)


def _regular_files(directory: Path) -> set[str]:
    """Names in ``directory`` that are files or links to files (``Path.is_file`` for each), from
    one ``os.scandir``: the entry type comes with the listing, a stat is made only for links."""
    out: set[str] = set()
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    if e.is_file():
                        out.add(e.name)
                except OSError:
                    continue
    except OSError:
        pass
    return out


def _is_tool_tempfile(file_name: str) -> bool:
    """Whether ``file_name`` has a config-management or sed temp file's shape (cmpatterns)."""
    from .cmpatterns import identify

    left = identify(file_name)
    return left is not None and left.pattern.kind == "tempfile"


def _q(name: str) -> str:
    """``name`` as a shell word for a hint (:func:`staticpodd.termsafe.shell_word`)."""
    return shell_word(name)


def is_utf8_name(name: str) -> bool:
    """False for a file name that is not valid UTF-8 (``os.listdir`` surrogate-escapes its bytes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def split_at(spec: str) -> tuple[str, int | None]:
    """``kube-apiserver@3`` -> ``("kube-apiserver", 3)``; ``kube-apiserver`` -> ``(…, None)``."""
    if "@" in spec:
        name, _, seq = spec.rpartition("@")
        if not seq.isdigit() or not name:
            raise UsageError(f"cannot read {spec!r}", hint="use COMPONENT@N, e.g. kube-apiserver@3")
        return name, int(seq)
    return spec, None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (EPERM counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mode_dict(x: Any) -> dict[str, Any]:
    return {"mode": f"{x.mode:04o}" if x.mode is not None else None, "uid": x.uid, "gid": x.gid}


def _human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


__all__ = [
    "Actor",
    "Change",
    "Engine",
    "Result",
    "Target",
    "parse_duration",
    "split_at",
    "unified_diff",
    "ERR",
    "PRIVATE_DIRNAME",
]
