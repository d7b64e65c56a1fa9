"""Swapping bytes in: ``apply`` (and ``edit``), ``rollback`` and ``restore_last_good``.

:class:`Swapper` validates new bytes, refuses what would run another pod than meant, writes
them to a staging file (fsynced), records the intent, renames them into place only when the
file still holds the bytes that were judged, and records the new version. Identical bytes
change nothing on disk (docs/kubelet-contract.md consequence 6). ``rollback`` and ``restore_last_good`` put
recorded bytes back through the same path. One swap is an :class:`ApplyRequest` run through the
steps of :meth:`Swapper._swap`.
"""

from __future__ import annotations

import os
import re

from ..errors import Conflict, FsError, LiveFileExists, StaticpodError, StoreError, UnknownComponent, UsageError
from ..journal import NOTICE, Event
from ..layout import MANIFEST_SUFFIXES, component_of
from ..node import fsops
from ..record import FrozenRecord, Record
from ..store.versions import Version, digest_of
from ..termsafe import printable_name
from .fsfacts import is_utf8_name
from .model import EXTERNAL, OpWarning, Result, Target, _q, unified_diff

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Final

    from ..store.versions import ParkRecord
    from .core import EngineCore, Guard
    from .gate import Gatekeeper
    from .hostports import Ports
    from .recover import Recovery
    from .scan import Scanner

#: Names ``apply --as`` accepts for a new component (the kubelet would read any non-dot name; we
#: keep to names that are safe in file names, shells and ``COMPONENT@N`` specs).
_COMPONENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")

#: The hook directory (``<phase>-<verb>.d``) each action runs.
_HOOK_VERB = {"apply": "apply", "edit": "apply", "rollback": "rollback", "restore": "apply"}
#: The journal event of each action's swap into the live directory (a parked copy's: PARKED_COPY_UPDATED).
_EVENT = {"apply": Event.APPLIED, "edit": Event.EDITED, "rollback": Event.ROLLED_BACK}


class ApplyRequest(FrozenRecord):
    """What one swap is asked to do (see :meth:`staticpodd.engine.Engine.apply` for each field).

    ``data``: the new bytes; ``source``: where they came from (messages, default component name);
    ``component``: ``--as``; ``reason``: recorded and journaled; ``check``: change nothing, say
    what would happen; ``unpark``: the component is to be unparked after the swap (by the caller:
    :meth:`staticpodd.engine.park.Parker.apply_unparking`): its new bytes are checked against the
    live files as live bytes are; ``action``: ``apply``, ``edit``, ``rollback`` or ``restore``;
    ``expect_digest``: the digest the current bytes must have; ``rename``: allow another pod;
    ``restoring``/``gated``: the recorded version a restore puts back and its verdict;
    ``unrecorded``: the live file as a restoring caller read it, recorded after the rename.
    """

    data: Final[bytes]
    source: Final[str]
    component: Final[str | None]
    reason: Final[str | None]
    check: Final[bool]
    unpark: Final[bool]
    action: Final[str]
    expect_digest: Final[str | None]
    rename: Final[bool]
    restoring: Final[Version | None]
    gated: Final[tuple[Any, list[Any]] | None]
    unrecorded: Final[fsops.FileState | None]

    def __init__(self, data: bytes, *, source: str, component: str | None = None, reason: str | None = None,
                 check: bool = False, unpark: bool = False, action: str = "apply", expect_digest: str | None = None,
                 rename: bool = False, restoring: Version | None = None, gated: tuple[Any, list[Any]] | None = None,
                 unrecorded: fsops.FileState | None = None) -> None:
        self.data = data
        self.source = source
        self.component = component
        self.reason = reason
        self.check = check
        self.unpark = unpark
        self.action = action
        self.expect_digest = expect_digest
        self.rename = rename
        self.restoring = restoring
        self.gated = gated
        self.unrecorded = unrecorded


class _Swap(Record):
    """What the steps of one swap found out so far (:meth:`Swapper._swap`): the component and
    file, where the bytes go (``loc``), a park whose parked copy was lost (re-opened by the swap),
    whether the component has a file (``present``: live or parked), the current bytes (``cur``,
    None for a new file), the gate's manifest and warnings (changed by the steps)."""

    comp: str
    fn: str
    loc: str
    lost_park: ParkRecord | None
    present: bool
    cur: fsops.FileState | None
    manifest: Any
    warnings: list[Any]

    def __init__(self, comp: str, fn: str, loc: str, lost_park: ParkRecord | None, *, present: bool) -> None:
        self.comp = comp
        self.fn = fn
        self.loc = loc
        self.lost_park = lost_park
        self.present = present
        self.cur = None
        self.manifest = None
        self.warnings = []

    @property
    def cur_data(self) -> bytes | None:
        """The current bytes, None for a new file."""
        return self.cur.data if self.cur is not None else None

    @property
    def old_digest(self) -> str | None:
        return digest_of(self.cur.data) if self.cur else None


class Swapper:
    """``apply``, ``rollback`` and ``restore_last_good``.

    Collaborators: ``core`` (directory, store, journal, hooks), ``guard`` (the flock),
    ``gatekeeper`` (validation, pod identity, duplicate refusals), ``ports`` (host-port refusal),
    ``scanner`` (drift recorded before a change, settled reads, changed-meanwhile refusals) and
    ``recovery`` (intents and the recording of what a swap did).
    """

    def __init__(self, core: EngineCore, guard: Guard, gatekeeper: Gatekeeper, ports: Ports, scanner: Scanner,
                 recovery: Recovery) -> None:
        self.core = core
        self.guard = guard
        self.gatekeeper = gatekeeper
        self.ports = ports
        self.scanner = scanner
        self.recovery = recovery

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
                return self.core.resolve(component)
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
            return self.core.resolve(component_of(base))
        except UnknownComponent:
            if not _COMPONENT_NAME.fullmatch(base):
                raise UsageError(
                    f"{base!r} would become a new manifest under that name, which is not a valid component name",
                    hint="letters, digits, '.', '_' and '-' (e.g. kube-apiserver); name it with --as COMPONENT",
                ) from None
            return Target(component_of(base), base, False, False)


    def apply(self, req: ApplyRequest) -> Result:
        """Validate ``req.data`` and swap it in atomically (see :meth:`staticpodd.engine.Engine.apply`).
        ``req.check``: no lock, no store writes. With ``req.unpark`` a parked component's result is
        returned as it stands (still parked; nothing journaled for identical bytes): the caller
        unparks it (:meth:`staticpodd.engine.park.Parker.apply_unparking`)."""
        if req.check:
            return self._swap(req)
        with self.core.nothing_changed_on_error(), self.guard.locked():
            return self._swap(req)

    def _swap(self, req: ApplyRequest) -> Result:
        """The steps of one swap, in order: where the bytes go and what is there now; the
        refusals (changed since it was read, invalid, another pod, the other live files); the
        no-op of identical bytes and the answer of ``--check``; then the pre-hooks, the staging
        file and the intent, the checked rename, the record, and the journal, post-hooks and result."""
        if not req.check:
            fsops.ensure_private_dirs(self.core.layout)
        s = self._placed(req)
        s.cur = self._current(req, s)
        self._check_expected(req, s)
        self._judge(req, s)
        if s.loc == "live" or req.unpark:
            self._check_others(req, s)
        if s.old_digest == digest_of(req.data):
            return self._unchanged(req, s)
        if req.check:
            return self._would(req, s)
        if self.core.hooks("pre", _HOOK_VERB.get(req.action, "apply"), component=s.comp, file_name=s.fn,
                            reason=req.reason, digest=digest_of(req.data)) and (s.loc == "live" or req.unpark):
            self._check_others(req, s)  # a pre-hook may have written a twin: judged again after the wait
        staged = self._staged(req, s)
        intent, payload, external = self._intend(req, s, staged)
        late = self._renamed(req, s, staged, intent, external)
        version, ext = self._recorded(req, s, intent, payload, external, late)
        return self._announced(req, s, version, ext, external)

    def _placed(self, req: ApplyRequest) -> _Swap:
        """Step 1: the component and file the bytes are for, and where they go (``live``, or
        ``parked`` for a parked component, and for one whose parked copy went missing); the
        directory's drift recorded first (not by ``--check``, nor a restore: the daemon records
        drift in its own passes)."""
        target = self._target_for_apply(req.source, req.component)
        fn, comp = target.file_name, target.component
        # A park whose parked copy went missing (moved or deleted by hand): the bytes come back
        # as the parked copy and the park is re-opened, never started behind the park's back.
        lost_park = (self.core.store.park_of(comp) if target.location is None and self.core.layout.db_path.exists()
                     else None)
        if not req.check and req.action != "restore":
            self.scanner.scan_before_change(fn)  # records the parked copy's removal (and closes the park)
            target = self.core.resolve(fn) if (target.live or target.parked) else target
        loc = "parked" if target.parked and not target.live else "live"
        if lost_park is not None and target.location is None:
            loc = "parked"
        return _Swap(comp, fn, loc, lost_park, present=target.location is not None)

    def _current(self, req: ApplyRequest, s: _Swap) -> fsops.FileState | None:
        """Step 2: the bytes the swap replaces (None: a new file), recorded before they are judged
        (:meth:`Scanner.settled_state`), unless a restoring caller read them (``unrecorded``)."""
        if req.check:
            return self.core.state_at(s.loc, s.fn) if s.present else None
        if req.unrecorded is not None:
            assert s.loc == "live", "unrecorded bytes are a live file's, read under this lock"
            return req.unrecorded  # read and judged by the caller; recorded after the rename
        return self.scanner.settled_state(s.comp, s.loc, s.fn, req.action)

    def _check_expected(self, req: ApplyRequest, s: _Swap) -> None:
        """Step 3: with ``expect_digest``, refuse when the current bytes are not those (an edit's
        file written meanwhile: Conflict; else ChangedMeanwhile, the other write recorded)."""
        if req.expect_digest is None or (s.cur is not None and digest_of(s.cur.data) == req.expect_digest):
            return
        comp = s.comp
        head = self.core.store.head(comp) if self.core.layout.db_path.exists() else None
        hint = (f"the other write is recorded as version {head.seq}; see what it changed with: "
                f"staticpodctl diff {_q(comp)} {head.seq - 1} {head.seq}" if head is not None and head.seq > 1
                else f"see its history with: staticpodctl history {_q(comp)}")
        if req.action == "edit":
            raise Conflict(f"{s.fn} changed while you were editing it", path=str(self.core.path(s.loc, s.fn)),
                           hint=hint)
        raise self.scanner.changed_meanwhile(comp, s.fn, s.loc, req.action, req.expect_digest,
                                              digest_of(req.data), s.cur) from None

    def _judge(self, req: ApplyRequest, s: _Swap) -> None:
        """Step 4: the gate's verdict (``s.manifest``, ``s.warnings``; given by a restore), then the
        pod the bytes define: another pod than the component's is refused unless ``rename`` (a
        rollback with ``rename`` gets a ``pod-renamed`` warning instead)."""
        if req.gated is not None:
            s.manifest, s.warnings = req.gated
        elif req.check:
            s.manifest, s.warnings = self.gatekeeper.gate_ro(req.data, req.source)
        else:
            s.manifest, s.warnings = self.gatekeeper.gate(req.data, req.source, component=s.comp)
        manifest = s.manifest
        if not req.rename and req.action in ("apply", "edit", "rollback"):
            # a rollback's version was in force once, but the kubelet would still stop one pod and
            # start another: refused as an apply is, unless asked for (--rename)
            self.gatekeeper.check_identity_kept(s.comp, s.fn, s.cur_data, manifest.namespace, manifest.name,
                                                 req.action)
        elif req.action == "rollback":
            old_ident = self.gatekeeper.current_identity(s.comp, s.cur_data)
            if old_ident is not None and old_ident != (manifest.namespace, manifest.name):
                s.warnings = [*s.warnings, OpWarning(
                    str(self.core.path(s.loc, s.fn)),
                    f"this version defines pod {manifest.namespace}/{manifest.name}, the current one "
                    f"{old_ident[0]}/{old_ident[1]}: the kubelet stops one and starts the other",
                    code="pod-renamed")]

    def _check_others(self, req: ApplyRequest, s: _Swap) -> None:
        """Step 5 (for bytes going live, and again after a pre-hook's wait): the other files of
        the directory, as the kubelet will read them, in one look: no second file for the pod,
        not a pod parked under another component, no host port another live pod holds (not for
        a restore: the daemon's undo of a bad write is never held back, README)."""
        namespace, name = s.manifest.namespace, s.manifest.name
        with self.gatekeeper.one_look():  # one listing and one stat per file for all these checks
            try:
                self.gatekeeper.check_no_duplicate(s.fn, namespace, name)
            except Conflict as exc:
                if s.cur is not None or req.action != "apply":
                    raise
                raise self._new_file_would_duplicate(s.comp, s.fn, namespace, name, exc) from None
            self.gatekeeper.check_not_parked_elsewhere(s.comp, namespace, name,
                                                        s.cur_data if s.loc == "live" else None)
            if req.action != "restore":
                self.ports.check_host_ports(s.fn, req.data, req.source, action=req.action, doc=s.manifest.doc)

    def _diff_of(self, req: ApplyRequest, s: _Swap) -> tuple[str, dict[str, str]]:
        """The diff shown and the (before, after) pair of ``--diff``: made for the result only
        (never before a rename: the kubelet waits for nothing it does not need)."""
        comp, cur = s.comp, s.cur
        label_a = f"{comp} (current)" if cur else "/dev/null"
        pair = {"before": (cur.data if cur else b"").decode("utf-8", "replace"), "before_header": label_a,
                "after": req.data.decode("utf-8", "replace"), "after_header": f"{comp} (new)"}
        return unified_diff(cur.data if cur else None, req.data, label_a, f"{comp} (new)"), pair

    def _unchanged(self, req: ApplyRequest, s: _Swap) -> Result:
        """Step 6, identical bytes: nothing changes on disk (no rename, chmod or touch); journaled
        as UNCHANGED, unless ``--check``, or an unpark follows (the caller's)."""
        comp, fn, loc = s.comp, s.fn, s.loc
        new_digest = digest_of(req.data)
        res = Result(req.action, comp, fn, False, f"{comp}: unchanged ({fn}, {loc})", location=loc,
                     version=self.core.store.head(comp) if self.core.layout.db_path.exists() else None,
                     previous_digest=s.old_digest, digest=new_digest, diff="", warnings=s.warnings, check=req.check)
        if not req.check and not (loc == "parked" and req.unpark):
            self.core.log(Event.UNCHANGED, f"{comp}: {req.action} with identical bytes, nothing changed",
                           component=comp, file_name=fn, digest=new_digest, reason=req.reason, action=req.action)
        return res

    def _would(self, req: ApplyRequest, s: _Swap) -> Result:
        """Step 7, ``--check``: what the swap would do, with its diff; nothing changed."""
        where = "parked copy of " if s.loc == "parked" else ""
        msg = (f"{s.comp}: would {req.action} {where}{s.fn}"
               + (" and unpark it" if s.loc == "parked" and req.unpark else ""))
        diff, pair = self._diff_of(req, s)
        return Result(req.action, s.comp, s.fn, True, msg, location=s.loc, previous_digest=s.old_digest,
                      digest=digest_of(req.data), diff=diff, warnings=s.warnings, check=True, diff_pair=pair)

    def _staged(self, req: ApplyRequest, s: _Swap) -> Path:
        """Step 8: the new bytes in a staging file (fsynced), with the mode and owner of the file
        they replace (a restore's never looser than the version put back), or a new file's.
        Refuses (Conflict) to write through a symlink."""
        cur, restoring = s.cur, req.restoring
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
                    f"{s.fn} is a symlink; staticpodd does not write through links",
                    path=str(self.core.path(s.loc, s.fn)),
                    hint="replace the link with a regular file first",
                )
        else:
            mode, uid, gid = fsops.NEW_FILE_MODE, fsops.NEW_FILE_UID, fsops.NEW_FILE_GID
            if os.geteuid() != 0:
                uid, gid = os.geteuid(), os.getegid()
        staged = fsops.write_staged(self.core.layout, s.fn, req.data, mode=mode, uid=uid, gid=gid)
        fsops.crashpoint("swap:staged")
        return staged

    def _intend(self, req: ApplyRequest, s: _Swap, staged: Path
                ) -> tuple[int, dict[str, Any], dict[str, Any] | None]:
        """Step 9: the intent, committed before the rename (what :meth:`Recovery.recover` finishes
        or undoes): ``(intent id, payload, external)``. ``external``: the unrecorded bytes the
        swap replaces (stored with the intent), None when there are none. A store that cannot
        commit it removes the staging file and raises StoreError."""
        payload = self.recovery.intent_base(s.fn, req.reason)
        payload.update(action=req.action, location=s.loc, staged=str(staged), new_digest=digest_of(req.data),
                       old_digest=s.old_digest)
        lost_park = s.lost_park
        if lost_park is not None and s.loc == "parked":
            payload["reopen_park"] = {"parked_at": lost_park.parked_at, "until": lost_park.until,
                                      "actor": lost_park.actor, "actor_via": lost_park.actor_via,
                                      "reason": lost_park.reason}
        external = None
        cur = s.cur
        if req.unrecorded is not None and cur is not None:  # the bytes replaced: kept with the intent
            external = {"digest": s.old_digest, "mode": cur.mode, "uid": cur.uid, "gid": cur.gid,
                        "reason": "found modified"}
            payload["external"] = external
        try:
            with self.core.store.transaction():
                if req.unrecorded is not None:
                    self.core.store.keep_bytes(req.unrecorded.data)
                intent = self.core.store.begin_intent("swap", s.comp, payload)
        except StoreError:
            try:
                fsops.remove(staged)
            except FsError:
                pass  # swept by the next recover
            raise
        fsops.crashpoint("swap:intent")
        return intent, payload, external

    def _renamed(self, req: ApplyRequest, s: _Swap, staged: Path, intent: int,
                 external: dict[str, Any] | None) -> fsops.FileState | None:
        """Step 10: the rename, only while the file still holds the bytes judged
        (:func:`fsops.replace_checked`). Returns a write that landed in the instant of the swap
        (None: none). When the rename did not happen the intent is ended, the unrecorded bytes
        recorded, and ChangedMeanwhile (or the FsError, "nothing was changed") raised."""
        comp, fn, loc = s.comp, s.fn, s.loc
        old_digest, new_digest = s.old_digest, digest_of(req.data)
        dst = self.core.path(loc, fn)
        try:
            return fsops.replace_checked(staged, dst, old_digest)
        except fsops.ChangedUnderfoot as exc:
            fsops.remove(staged)
            ext = self._end_unrenamed(intent, comp, fn, loc, external)
            err = self.scanner.changed_meanwhile(comp, fn, loc, req.action, old_digest, new_digest, exc.state)
            if ext is not None:
                err.details["external_version"] = ext.seq
            raise err from None
        except (FsError, LiveFileExists) as exc:
            if not dst.exists() or digest_of(dst.read_bytes()) != new_digest:
                fsops.remove(staged)
                ext = self._end_unrenamed(intent, comp, fn, loc, external)
                if ext is not None:
                    exc.details["external_version"] = ext.seq
                exc.message += "; nothing was changed"
                exc.details["reached_kubelet"] = False
            else:  # renamed, then the directory fsync failed: in place, recorded by recover
                exc.message += (f"; {fn} is in place all the same (the kubelet runs it); run staticpodctl recover "
                                "to record it")
                exc.details["reached_kubelet"] = True
            raise

    def _recorded(self, req: ApplyRequest, s: _Swap, intent: int, payload: dict[str, Any],
                  external: dict[str, Any] | None, late: fsops.FileState | None) -> tuple[Version, Version | None]:
        """Step 11, after the rename, in one transaction: the unrecorded bytes replaced, a write
        that landed in the instant of the swap (kept in history, with a warning), the new version,
        the verdict cache of a restore's bytes, the intent's end. Returns ``(version, external
        version or None)``; a store failure says the change reached the kubelet (StoreError)."""
        comp, fn, loc = s.comp, s.fn, s.loc
        new_digest = digest_of(req.data)
        dst = self.core.path(loc, fn)
        fsops.crashpoint("swap:renamed")
        st = fsops.read_state(dst)
        assert st is not None
        with self.recovery.after_rename(f"{fn} is in place: the kubelet runs the new manifest ({new_digest[:12]})"
                                         if loc == "live" else
                                         f"the parked copy of {fn} is updated ({new_digest[:12]})"), \
                self.core.store.transaction():
            ext = self.recovery.record_external(comp, fn, loc, external) if external is not None else None
            if late is not None:  # written in the instant between the check and the swap: kept in history
                lv = self.core.store.record(comp, fn, late.data, action="external", actor=EXTERNAL,
                                            reason=f"written during the {req.action} swap", mode=late.mode,
                                            uid=late.uid, gid=late.gid, location=loc)
                s.warnings = [*s.warnings, OpWarning(
                    str(dst), f"{fn} was written by someone else in the instant of the swap; that write is "
                    f"recorded as version {lv.seq} ({lv.digest[:12]}) and was replaced", code="changed-meanwhile")]
            version = self.recovery.record_swap(comp, fn, loc, req.data, st, payload)
            if req.gated is not None:  # what gate() caches, for bytes judged by judge_recorded()
                self.gatekeeper.cache_passed(new_digest, s.manifest)
            self.core.store.end_intent(intent)
        fsops.crashpoint("swap:recorded")
        return version, ext

    def _announced(self, req: ApplyRequest, s: _Swap, version: Version, ext: Version | None,
                   external: dict[str, Any] | None) -> Result:
        """Step 12: the journal entry (not a restore's: the daemon logs RESTORED_LAST_GOOD), the
        post-hooks, and the result with its diff."""
        comp, fn, loc, action = s.comp, s.fn, s.loc, req.action
        new_digest = digest_of(req.data)
        diff, pair = self._diff_of(req, s)
        event = Event.PARKED_COPY_UPDATED if loc == "parked" else _EVENT.get(action, Event.APPLIED)
        if action != "restore":
            self.core.log(
                event, f"{comp}: {action} version {version.seq} ({new_digest[:12]}) to {loc} {fn}",
                priority=NOTICE, component=comp, file_name=fn, version=version.seq, digest=new_digest,
                previous_digest=s.old_digest, reason=req.reason, action=action, location=loc,
            )
        self.core.hooks("post", _HOOK_VERB.get(action, "apply"), component=comp, file_name=fn, reason=req.reason,
                         version=version.seq, digest=new_digest)
        msg = f"{comp}: {action} version {version.seq} ({new_digest[:12]}) -> {fn}"
        if loc == "parked":
            msg = f"{comp}: updated the parked copy (version {version.seq}); it stays parked"
        res = Result(action, comp, fn, True, msg, location=loc, version=version, previous_digest=s.old_digest,
                     digest=new_digest, diff=diff, warnings=s.warnings, diff_pair=pair)
        if external is not None:
            res.extra["external_version"] = ext.seq if ext is not None else None
        return res

    def _end_unrenamed(self, intent: int, comp: str, fn: str, loc: str,
                       external: dict[str, Any] | None) -> Version | None:
        """End the intent of a swap whose rename did not happen; the bytes the caller left
        unrecorded (``external``) are still what was there: recorded in the same transaction.
        Returns their version (None: nothing to record, or only an event was)."""
        with self.core.store.transaction():
            ext = self.recovery.record_external(comp, fn, loc, external) if external is not None else None
            self.core.store.end_intent(intent)
        return ext

    def _new_file_would_duplicate(self, comp: str, fn: str, namespace: str, name: str, exc: Conflict) -> Conflict:
        """``exc`` for an apply that would add a new file ``comp`` for a pod another live file
        already defines (``apply ./ks.yaml`` meaning kube-scheduler): the likely intent is to
        replace that component, so the hint says ``--as`` it, not to park the running file."""
        others = self.gatekeeper.files_defining((namespace, name), besides=fn)
        target = component_of(others[-1]) if others else None
        hint = (f"to replace {target}, name it: staticpodctl apply FILE --as {_q(target)}" if target else exc.hint)
        return Conflict(f"applying it as a new component {comp} would add a second file for pod "
                        f"{namespace}/{name}: {exc.message}", path=exc.path, hint=hint)

    def rollback(self, name: str, *, to: int | None = None, reason: str | None = None, check: bool = False,
                 rename: bool = False) -> Result:
        """Put an earlier version back, as a new version (action ``rollback``).

        ``to``: the seq to restore; default the newest version whose bytes differ from the
        current ones and pass the gate (broken hand edits in history are skipped). The bytes go
        through the gate again. Raises UnknownVersion, Conflict (nothing to roll back to),
        InvalidManifest, plus what :meth:`apply` raises. A version that defines another pod
        (metadata.namespace/name) than the current bytes is refused (Conflict) as :meth:`apply`
        refuses it: the kubelet would stop one pod and start another. ``rename`` allows it (with
        a ``pod-renamed`` warning).
        """
        with self.core.nothing_changed_on_error():
            return self._rollback(name, to=to, reason=reason, check=check, rename=rename)

    def _rollback(self, name: str, *, to: int | None, reason: str | None, check: bool, rename: bool = False) -> Result:
        target = self.core.resolve(name)
        comp = target.component
        skipped: list[int] = []
        if to is None:
            try:
                _, cur_data, _ = self.core.current_bytes(comp)
                cur_digest = digest_of(cur_data)
            except UnknownComponent:
                cur_digest = None
            candidates = [v for v in reversed(self.core.store.history(comp)) if v.digest != cur_digest]
            if not candidates:
                raise Conflict(
                    f"{comp} has no earlier version that differs from the current bytes",
                    hint=f"see: staticpodctl history {_q(comp)}",
                )
            # the newest one that passes the gate: a broken hand edit in history is skipped
            valid = [v for v in candidates
                     if self.gatekeeper.verdict(self.core.store.data(v.digest), f"{comp}@{v.seq}", comp)[0]]
            if not valid:
                raise Conflict(
                    f"{comp} has no earlier version that passes validation",
                    hint=f"see: staticpodctl history {_q(comp)}; staticpodctl rollback {_q(comp)} --to N "
                    "shows why one fails",
                )
            version = valid[0]
            skipped = [v.seq for v in candidates[: candidates.index(version)] if v.digest != version.digest]
        else:
            version = self.core.store.get(comp, to)
        data = self.core.store.data(version.digest)
        reason = reason or f"rollback to version {version.seq}"
        res = self.apply(ApplyRequest(data, source=f"{comp}@{version.seq}", component=target.file_name,
                                      reason=reason, check=check, action="rollback", rename=rename))
        res.extra["rolled_back_to"] = version.seq
        if res.changed and res.version is not None and res.location != "parked":
            res.msg = f"{comp}: rolled back to version {version.seq} (recorded as version {res.version.seq})"
        if to is None and skipped:
            res.msg += (f"; skipped version{'s' if len(skipped) > 1 else ''} "
                        f"{', '.join(map(str, skipped))}: invalid")
        return res

    def restore_last_good(self, name: str, *, reason: str, judged_digest: str | None = None,
                          unrecorded: fsops.FileState | None = None) -> Result:
        """Put back the newest recorded version of ``name`` that passes the gate (daemon policy
        ``on_invalid: restore``). The bad bytes stay in history. The caller logs
        RESTORED_LAST_GOOD (it knows why). Raises Conflict when no recorded version passes.

        ``judged_digest``: the sha256 of the live bytes the caller judged invalid. The restore
        acts only while the live file still holds exactly those bytes: a write that landed after
        the judgement (a valid fix, typically) is recorded and never reverted; ChangedMeanwhile
        is raised instead (the caller looks again). The digest is compared once here and again
        right before the rename (:func:`fsops.replace_checked`). A valid write must never be reverted.

        ``unrecorded``: the live file ``name`` (its file name then, not a component's) as the
        caller read and judged it under the lock it holds, not recorded yet (the daemon's restore
        on a writer's close; UsageError when ``name`` is not that file): its bytes are recorded as a
        version by ``external`` after the rename instead of before, and the digest it is compared
        with right before the rename is theirs (see :meth:`apply`). If the restore fails they are
        recorded before the error is raised (``details["external_version"]``), unless the
        restored bytes are in place already (``details["reached_kubelet"]``): :meth:`recover`
        records both.

        Each recorded version it looks at is validated once (:meth:`judge_recorded`, memoised),
        and history is read a page at a time, newest first.
        """
        with self.core.nothing_changed_on_error(), self.guard.locked():
            if unrecorded is None:
                return self._restore_last_good(name, reason=reason, judged_digest=judged_digest)
            target = self.core.resolve(name)
            if not target.live or target.file_name != name:
                raise UsageError(f"{name!r} is not the live file whose unrecorded bytes were read")
            try:
                return self._restore_last_good(name, reason=reason, judged_digest=digest_of(unrecorded.data),
                                               unrecorded=unrecorded)
            except StaticpodError as exc:
                if not exc.details.get("reached_kubelet") and "external_version" not in exc.details:
                    self._record_unrecorded(name, unrecorded, exc)
                raise

    def _record_unrecorded(self, name: str, unrecorded: fsops.FileState, exc: StaticpodError) -> None:
        """A restore given ``unrecorded`` bytes failed before its intent: record them now (they
        are what was on disk), and name their version in ``exc.details["external_version"]``. A
        store that cannot record them leaves them to the next scan (they are still on disk)."""
        try:
            target = self.core.resolve(name)
            with self.core.store.transaction():
                ext = self.recovery.record_external(target.component, target.file_name, "live", {
                    "digest": self.core.store.keep_bytes(unrecorded.data), "mode": unrecorded.mode,
                    "uid": unrecorded.uid, "gid": unrecorded.gid, "reason": "found modified"})
        except StaticpodError:
            return
        exc.details["external_version"] = ext.seq if ext is not None else None

    def _restore_last_good(self, name: str, *, reason: str, judged_digest: str | None,
                           unrecorded: fsops.FileState | None = None) -> Result:
        target = self.core.resolve(name)
        comp = target.component
        present = bool(target.live or target.parked)
        if unrecorded is not None:
            cur, present = unrecorded.data, True
        else:
            _, cur, _ = self.core.current_bytes(comp) if present else (target, b"", "live")
        bad = digest_of(cur) if present else None  # an emptied file has a digest too (B05-empty.yaml)
        if judged_digest is not None and unrecorded is None:
            if bad != judged_digest:
                now = self.core.state_at("live", target.file_name)
                err = self.scanner.changed_meanwhile(comp, target.file_name, "live", "restore", judged_digest,
                                                      judged_digest, now)
                err.message = (f"{target.file_name} changed after it was judged invalid "
                               f"({judged_digest[:12]}); not restored: the new write is recorded"
                               + (f" as version {err.details['recorded_version']}"
                                  if err.details.get("recorded_version") else ""))
                raise err
        seen: set[str] = set()
        page = self.core.store.older(comp)  # newest first, a page at a time: the history can be long
        while page:
            for v in page:
                if v.digest == bad or v.digest in seen:
                    continue
                seen.add(v.digest)
                data = self.core.store.data(v.digest)
                gated = self.gatekeeper.judge_recorded(data, f"{comp}@{v.seq}")  # the one validation of these bytes
                if gated is not None:
                    res = self.apply(ApplyRequest(data, source=f"{comp}@{v.seq}", component=target.file_name,
                                                  reason=reason, action="restore", restoring=v,
                                                  expect_digest=judged_digest, gated=gated, unrecorded=unrecorded))
                    res.extra["restored_version"] = v.seq
                    return res
            page = self.core.store.older(comp, page[-1].seq)
        raise Conflict(f"{comp} has no recorded version that passes validation", hint="fix the file by hand")
