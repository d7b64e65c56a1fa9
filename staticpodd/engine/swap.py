"""Swapping bytes in: ``apply`` (and ``edit``), ``rollback`` and ``restore_last_good``.

:class:`SwapVerbs` validates new bytes, refuses what would run another pod than meant, writes
them to a staging file (fsynced), records the intent, renames them into place only when the
file still holds the bytes that were judged, and records the new version. Identical bytes
change nothing on disk (docs/kubelet-contract.md consequence 6). ``rollback`` and ``restore_last_good`` put
recorded bytes back through the same path.
"""

from __future__ import annotations

import os
import re

from .. import fsops
from ..errors import Conflict, FsError, LiveFileExists, StaticpodError, StoreError, UnknownComponent, UsageError
from ..journal import NOTICE, Event
from ..layout import MANIFEST_SUFFIXES, component_of
from ..store import Version, digest_of
from ..termsafe import printable_name
from .fsfacts import is_utf8_name
from .hostports import PortsCore
from .model import EXTERNAL, OpWarning, Result, Target, _q, unified_diff
from .recover import RecoverVerbs
from .scan import ScanVerbs

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

#: Names ``apply --as`` accepts for a new component (the kubelet would read any non-dot name; we
#: keep to names that are safe in file names, shells and ``COMPONENT@N`` specs).
_COMPONENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


class SwapVerbs(ScanVerbs, PortsCore, RecoverVerbs):
    """``apply``, ``rollback`` and ``restore_last_good``."""

    if TYPE_CHECKING:  # defined by ParkVerbs (park.py): ``apply(..., unpark=True)`` ends with it

        def unpark(self, name: str, *, reason: str | None = None) -> Result: ...

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
        gated: tuple[Any, list[Any]] | None = None,
        unrecorded: fsops.FileState | None = None,
    ) -> Result:
        """Validate ``data`` and swap it in atomically as the new version of a component.

        ``source`` is where the bytes came from (for messages and the default component name);
        ``component`` (``--as``) overrides it. A parked component gets its parked copy updated and
        stays parked unless ``unpark``. Identical bytes change nothing on disk (no rename, chmod or
        touch: docs/kubelet-contract.md consequence 6) and return ``changed=False``. ``check``: change nothing,
        report what would happen (no lock, no store writes). ``expect_digest``: refuse with
        Conflict when the current bytes differ (used by ``edit``).

        Refused with Conflict, before anything changes: new bytes that define another pod
        (namespace/name) than the component's current file, unless ``rename`` (the kubelet would
        stop one pod and start another: docs/kubelet-contract.md "Identity and restarts"); rollback and
        restore put recorded bytes back and never ask. A live file whose pod is parked under
        another component (it would start the parked pod again behind the park's back).
        Raises InvalidManifest, Conflict, UsageError, HookFailed, LockTimeout, FsError.

        ``action="restore"`` (:meth:`restore_last_good`, the daemon's): ``restoring`` is the
        recorded version put back and ``gated`` its verdict from :meth:`judge_recorded` (the
        bytes are not validated again); there is no drift scan of the directory (the daemon
        records drift in its own passes): the file's own bytes are recorded before they are
        judged (:meth:`_settled_state`), as for every verb, unless the caller read and judged them
        itself: ``unrecorded`` is then the live file as the caller read it (under this lock;
        ``expect_digest`` its digest), recorded as a version by ``external`` only after the rename,
        in the transaction that records the restore. Crash-safe: its bytes are stored with the
        intent, committed before the rename, and :meth:`recover` records them from there (then the
        restore); when the rename does not happen they are recorded before the error is raised
        (``details["external_version"]``), so they are in history whatever happens. Its
        ``result.extra["external_version"]`` is their version (None: they were the newest version
        already, an event says they came back).
        """
        if check:
            return self._apply_inner(data, source, component, reason, True, unpark, action, expect_digest, rename,
                                     restoring, gated)
        with self.nothing_changed_on_error(), self.locked():
            return self._apply_inner(data, source, component, reason, False, unpark, action, expect_digest, rename,
                                     restoring, gated, unrecorded)

    def _apply_inner(self, data: bytes, source: str, component: str | None, reason: str | None, check: bool,
                     unpark: bool, action: str, expect_digest: str | None, rename: bool = False,
                     restoring: Version | None = None, gated: tuple[Any, list[Any]] | None = None,
                     unrecorded: fsops.FileState | None = None) -> Result:
        if not check:
            fsops.ensure_private_dirs(self.layout)
        target = self._target_for_apply(source, component)
        fn, comp = target.file_name, target.component
        # A park whose parked copy went missing (moved or deleted by hand): the bytes come back
        # as the parked copy and the park is re-opened, never started behind the park's back.
        lost_park = (self.store.park_of(comp) if target.location is None and self.layout.db_path.exists()
                     else None)
        if not check and action != "restore":  # a restore is the daemon's, which records drift itself
            self._scan_before_change(fn)  # records the parked copy's removal (and closes the park)
            target = self.resolve(fn) if (target.live or target.parked) else target
        loc = "parked" if target.parked and not target.live else "live"
        if lost_park is not None and target.location is None:
            loc = "parked"
        if check:
            cur = self._state_at(loc, fn) if target.location else None
        elif unrecorded is not None:
            assert loc == "live", "unrecorded bytes are a live file's, read under this lock"
            cur = unrecorded  # read and judged by the caller; recorded after the rename
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
        if gated is not None:
            manifest, warnings = gated
        elif check:
            manifest, warnings = self._gate_ro(data, source)
        else:
            manifest, warnings = self.gate(data, source, component=comp)
        if not rename and action in ("apply", "edit"):
            self._check_identity_kept(comp, fn, cur.data if cur is not None else None, manifest.namespace,
                                      manifest.name, action)
        elif action == "rollback" and not rename:
            # the version was in force once, but the kubelet would still stop one pod and start
            # another: refused as an apply is, unless asked for (--rename)
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
        def check_others() -> None:  # the other files of the directory, as the kubelet will read them
            with self.one_look():  # one listing and one stat per file for all these checks
                check_against_others()

        def check_against_others() -> None:
            try:
                self._check_no_duplicate(fn, manifest.namespace, manifest.name)
            except Conflict as exc:
                if cur is not None or action != "apply":
                    raise
                raise self._new_file_would_duplicate(comp, fn, manifest.namespace, manifest.name, exc) from None
            self._check_not_parked_elsewhere(comp, manifest.namespace, manifest.name,
                                             cur.data if cur is not None and loc == "live" else None)
            if action != "restore":  # the daemon's undo of a bad write: never held back (README)
                self._check_host_ports(fn, data, source, action=action, doc=manifest.doc)

        if loc == "live" or unpark:
            check_others()
        new_digest = digest_of(data)
        old_digest = digest_of(cur.data) if cur else None

        def diff_of() -> tuple[str, dict[str, str]]:
            """The diff shown and the (before, after) pair of ``--diff``: made for the result only
            (never before a rename: the kubelet waits for nothing it does not need)."""
            label_a = f"{comp} (current)" if cur else "/dev/null"
            pair = {"before": (cur.data if cur else b"").decode("utf-8", "replace"), "before_header": label_a,
                    "after": data.decode("utf-8", "replace"), "after_header": f"{comp} (new)"}
            return unified_diff(cur.data if cur else None, data, label_a, f"{comp} (new)"), pair

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
            diff, pair = diff_of()
            return Result(action, comp, fn, True, msg, location=loc, previous_digest=old_digest, digest=new_digest,
                          diff=diff, warnings=warnings, check=True, diff_pair=pair)
        if self._hooks("pre", verb, component=comp, file_name=fn, reason=reason, digest=new_digest) and (
                loc == "live" or unpark):
            check_others()  # a pre-hook may have written a twin: judged again after the wait
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
        external = None
        if unrecorded is not None and cur is not None:  # the bytes replaced: kept with the intent
            external = {"digest": old_digest, "mode": cur.mode, "uid": cur.uid, "gid": cur.gid,
                        "reason": "found modified"}
            payload["external"] = external
        try:
            with self.store.transaction():
                if unrecorded is not None:
                    self.store.keep_bytes(unrecorded.data)
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
            ext = self._end_unrenamed(intent, comp, fn, loc, external)
            err = self._changed_meanwhile(comp, fn, loc, action, old_digest, new_digest, exc.state)
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
        fsops.crashpoint("swap:renamed")
        st = fsops.read_state(dst)
        assert st is not None
        with self._after_rename(f"{fn} is in place: the kubelet runs the new manifest ({new_digest[:12]})"
                                if loc == "live" else f"the parked copy of {fn} is updated ({new_digest[:12]})"), \
                self.store.transaction():
            ext = self._record_external(comp, fn, loc, external) if external is not None else None
            if late is not None:  # written in the instant between the check and the swap: kept in history
                lv = self.store.record(comp, fn, late.data, action="external", actor=EXTERNAL,
                                       reason=f"written during the {action} swap", mode=late.mode, uid=late.uid,
                                       gid=late.gid, location=loc)
                warnings = [*warnings, OpWarning(
                    str(dst), f"{fn} was written by someone else in the instant of the swap; that write is "
                    f"recorded as version {lv.seq} ({lv.digest[:12]}) and was replaced", code="changed-meanwhile")]
            version = self._record_swap(comp, fn, loc, data, st, payload)
            if gated is not None:  # what gate() caches, for bytes judged by judge_recorded()
                self._cache_passed(new_digest, manifest)
            self.store.end_intent(intent)
        fsops.crashpoint("swap:recorded")
        diff, pair = diff_of()
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
        res = Result(action, comp, fn, True, msg, location=loc, version=version, previous_digest=old_digest,
                     digest=new_digest, diff=diff, warnings=warnings, diff_pair=pair)
        if external is not None:
            res.extra["external_version"] = ext.seq if ext is not None else None
        return res

    def _end_unrenamed(self, intent: int, comp: str, fn: str, loc: str,
                       external: dict[str, Any] | None) -> Version | None:
        """End the intent of a swap whose rename did not happen; the bytes the caller left
        unrecorded (``external``) are still what was there: recorded in the same transaction.
        Returns their version (None: nothing to record, or only an event was)."""
        with self.store.transaction():
            ext = self._record_external(comp, fn, loc, external) if external is not None else None
            self.store.end_intent(intent)
        return ext

    def _new_file_would_duplicate(self, comp: str, fn: str, namespace: str, name: str, exc: Conflict) -> Conflict:
        """``exc`` for an apply that would add a new file ``comp`` for a pod another live file
        already defines (``apply ./ks.yaml`` meaning kube-scheduler): the likely intent is to
        replace that component, so the hint says ``--as`` it, not to park the running file."""
        others = self.files_defining((namespace, name), besides=fn)
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
        with self.nothing_changed_on_error():
            return self._rollback(name, to=to, reason=reason, check=check, rename=rename)

    def _rollback(self, name: str, *, to: int | None, reason: str | None, check: bool, rename: bool = False) -> Result:
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
                         check=check, action="rollback", rename=rename)
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
        with self.nothing_changed_on_error(), self.locked():
            if unrecorded is None:
                return self._restore_last_good(name, reason=reason, judged_digest=judged_digest)
            target = self.resolve(name)
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
            target = self.resolve(name)
            with self.store.transaction():
                ext = self._record_external(target.component, target.file_name, "live", {
                    "digest": self.store.keep_bytes(unrecorded.data), "mode": unrecorded.mode,
                    "uid": unrecorded.uid, "gid": unrecorded.gid, "reason": "found modified"})
        except StaticpodError:
            return
        exc.details["external_version"] = ext.seq if ext is not None else None

    def _restore_last_good(self, name: str, *, reason: str, judged_digest: str | None,
                           unrecorded: fsops.FileState | None = None) -> Result:
        target = self.resolve(name)
        comp = target.component
        present = bool(target.live or target.parked)
        if unrecorded is not None:
            cur, present = unrecorded.data, True
        else:
            _, cur, _ = self.current_bytes(comp) if present else (target, b"", "live")
        bad = digest_of(cur) if present else None  # an emptied file has a digest too (B05-empty.yaml)
        if judged_digest is not None and unrecorded is None:
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
        page = self.store.older(comp)  # newest first, a page at a time: the history can be long
        while page:
            for v in page:
                if v.digest == bad or v.digest in seen:
                    continue
                seen.add(v.digest)
                data = self.store.data(v.digest)
                gated = self.judge_recorded(data, f"{comp}@{v.seq}")  # the one validation of these bytes
                if gated is not None:
                    res = self.apply(data, source=f"{comp}@{v.seq}", component=target.file_name, reason=reason,
                                     action="restore", restoring=v, expect_digest=judged_digest, gated=gated,
                                     unrecorded=unrecorded)
                    res.extra["restored_version"] = v.seq
                    return res
            page = self.store.older(comp, page[-1].seq)
        raise Conflict(f"{comp} has no recorded version that passes validation", hint="fix the file by hand")
