"""Parking: ``park``, ``unpark``, ``discard_park``, and what ``doctor`` asks about parks.

:class:`Parker` moves a component's file between ``<manifests>/`` and
``<manifests>/.staticpodd/parked/`` by one rename on the same mount (atomic; the file path is
part of the pod UID, so it is kept), never over another file, after recording the intent;
then records the ``park``/``unpark`` version and the park record. Also the park's odd ends:
a parked copy gone missing, a parked copy copied (not moved) back by hand, a parked pod that
another live file still runs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..errors import AlreadyParked, Conflict, FsError, InvalidManifest, LiveFileExists, NotParked, UsageError
from ..journal import NOTICE, Event
from ..layout import component_of
from ..node import fsops
from ..store.versions import digest_of, iso
from .model import OpWarning, Result, Target, _human_duration, _q

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

    from .core import EngineCore, Guard
    from .gate import Gatekeeper
    from .hostports import Ports
    from .model import Change
    from .recover import Recovery
    from .scan import Scanner
    from .swap import ApplyRequest, Swapper


class Parker:
    """``park``, ``unpark``, ``discard_park``, ``parks_bypassed``, and ``apply --unpark``.

    Collaborators: ``core`` (directory, store, journal, hooks), ``guard`` (the flock),
    ``gatekeeper`` (validation, pod identity, duplicate refusals), ``ports`` (host-port refusal),
    ``scanner`` (drift recorded before a change, changed-meanwhile refusals), ``recovery``
    (intents and the recording of a park or unpark) and ``swapper``: an unpark whose parked
    copy went missing puts it back through a rollback first, and ``apply --unpark`` swaps the
    parked copy before it unparks it.
    """

    def __init__(self, core: EngineCore, guard: Guard, gatekeeper: Gatekeeper, ports: Ports, scanner: Scanner,
                 recovery: Recovery, swapper: Swapper) -> None:
        self.core = core
        self.guard = guard
        self.gatekeeper = gatekeeper
        self.ports = ports
        self.scanner = scanner
        self.recovery = recovery
        self.swapper = swapper

    # -- apply --unpark ------------------------------------------------------------------------------

    def apply_unparking(self, req: ApplyRequest) -> Result:
        """``apply --unpark`` (``req.unpark``; not ``--check``): the swap
        (:meth:`Swapper.apply`), then, when the component is parked, its unpark under the same
        lock. The result is the unpark's, telling what the swap did (its action, diff, warnings;
        ``bytes unchanged; unparked`` when the parked copy already held the bytes)."""
        with self.core.nothing_changed_on_error(), self.guard.locked():
            res = self.swapper.apply(req)
            if res.location != "parked":
                return res
            unparked = self.unpark(res.component, reason=req.reason)
            unparked.action = res.action
            unparked.diff = res.diff
            unparked.warnings = res.warnings
            if not res.changed:
                unparked.msg = f"{res.component}: bytes unchanged; unparked"
                return unparked
            seq = res.version.seq if res.version is not None else "?"
            unparked.msg = f"{res.component}: updated the parked copy (version {seq}) and unparked it"
            unparked.previous_digest = res.previous_digest
            unparked.changed = True
            return unparked

    # -- park / unpark -----------------------------------------------------------------------------

    def park(self, name: str, *, until: float | None = None, reason: str | None = None,
             force: bool = False) -> Result:
        """Take a component out of the kubelet's directory, keeping its manifest.

        Renames ``<manifests>/<file>`` to ``<manifests>/.staticpodd/parked/<file>`` on the same
        mount (atomic), fsyncs both directories, records drift first, then a ``park`` version and
        the park record (who, when, why, ``until`` epoch deadline or None). The kubelet stops the
        pod at its next relist (docs/kubelet-contract.md "When the kubelet looks").
        When other live files define the same pod (docs/kubelet-contract.md "Duplicate names across files"),
        parking one of them does not stop the pod: that is refused, unless ``fn`` is itself a
        leftover (no manifest suffix: ``kube-scheduler.yaml.bak``), where parking it is exactly
        how the duplicate goes away, or ``force`` says the operator means it. The result then
        says which file the pod runs from, and that file is touched so that the kubelet re-adds
        the pod at once (:meth:`_readd_from`).
        Raises UnknownComponent, AlreadyParked, Conflict, HookFailed, LockTimeout, FsError.
        """
        with self.core.nothing_changed_on_error(), self.guard.locked():
            fsops.ensure_private_dirs(self.core.layout)
            target = self.core.resolve(name, allow_recorded=False)
            self.scanner.scan_before_change(target.file_name)
            target = self.core.resolve(target.file_name, allow_recorded=False)
            comp, fn = target.component, target.file_name
            if not target.live:
                raise self._already_parked(comp)
            replaced_note = self._replace_stale_parked_copy(comp, fn) if target.parked else ""
            st = self._live_to_park(comp, fn)
            ident = self.gatekeeper.pod_identity(st.data)
            twins = self.gatekeeper.files_defining(ident, besides=fn) if ident is not None else []
            twins_note = ""
            if twins and ident is not None:
                twins_note = self._twins_note(comp, fn, ident, twins, until=until, force=force)
            digest = digest_of(st.data)
            if self.core.hooks("pre", "park", component=comp, file_name=fn, reason=reason, digest=digest) and ident:
                # a pre-hook may have written a twin that would keep the pod running: judged again
                again = self.gatekeeper.files_defining(ident, besides=fn)
                if again != twins:
                    twins_note = self._twins_note(comp, fn, ident, again, until=until, force=force) if again else ""
                    twins = again
            payload = self.recovery.intent_base(fn, reason)
            payload.update(digest=digest, until=until)
            intent = self.core.store.begin_intent("park", comp, payload)
            fsops.crashpoint("park:intent")
            self._moved_or_undo(intent, self.core.path("live", fn), self.core.path("parked", fn), comp=comp,
                                expect_digest=digest, action="park")
            fsops.crashpoint("park:renamed")
            fsops.pausepoint("park:renamed")
            # looked at again under the lock: a hand `mv` (which takes no lock) may have moved the
            # parked copy on in the instant since the rename. The park happened all the same, with
            # the bytes checked right before the rename: those are recorded, and the next scan
            # sees where the copy went (moved back: the park is closed as unparked by hand)
            pst = self.core.state_at("parked", fn)
            moved_note = ""
            if pst is None or digest_of(pst.data) != digest:
                pst = st
                moved_note = ("; its parked copy was moved or changed by hand right after the park "
                              "(see: staticpodctl status)")
            with self.recovery.after_rename(f"{fn} is parked: the kubelet stops the pod"), \
                    self.core.store.after_intent():
                version, rec = self.recovery.record_park(comp, fn, pst, payload)
                self.core.store.end_intent(intent)
            if twins:
                twins_note += self._readd_from(twins[-1])
            self.core.log(
                Event.PARKED,
                f"{comp}: parked {fn}" + (f" until {iso(until)}" if until else "") + (f" ({reason})" if reason else "")
                + (f"; pod runs from {twins[-1]}" if twins else ""),
                priority=NOTICE, component=comp, file_name=fn, version=version.seq, digest=digest,
                reason=reason, until=iso(until) if until else None, readded=twins[-1] if twins else None,
            )
            self.core.hooks("post", "park", component=comp, file_name=fn, reason=reason, version=version.seq,
                             digest=digest)
            res = Result("park", comp, fn, True, f"{comp}: parked {fn}{replaced_note}{twins_note}{moved_note}",
                         location="parked",
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
        with self.core.nothing_changed_on_error(), self.guard.locked():
            fsops.ensure_private_dirs(self.core.layout)  # refuses another user's parked directory
            target, recovered_note = self._unpark_target(name, reason)
            found = self.scanner.scan_before_change(target.file_name)
            target = self.core.resolve(target.file_name, allow_recorded=False)
            comp, fn = target.component, target.file_name
            over = self._park_already_over(target, found, reason)
            if over is not None:
                return over
            if not target.parked:
                raise NotParked(f"{comp} is not parked", hint="see: staticpodctl status")
            if target.live:
                live = self.core.state_at("live", fn)
                parked_st = self.core.state_at("parked", fn)
                if live is not None and parked_st is not None and live.data == parked_st.data:
                    return self._close_park_copied_back(comp, fn, live, reason)
                raise self._live_again(comp, fn, live)
            pst = self._parked_to_unpark(comp, fn)
            digest = digest_of(pst.data)
            ident, warnings = self._judge_parked(comp, fn, pst)
            self._check_unpark_others(comp, fn, pst, ident)
            if self.core.hooks("pre", "unpark", component=comp, file_name=fn, reason=reason, digest=digest):
                # a pre-hook may have written a twin: judged again after the wait
                self._check_unpark_others(comp, fn, pst, ident)
            payload = self.recovery.intent_base(fn, reason)
            payload.update(digest=digest)
            intent = self.core.store.begin_intent("unpark", comp, payload)
            fsops.crashpoint("unpark:intent")
            self._moved_or_undo(intent, self.core.path("parked", fn), self.core.path("live", fn), comp=comp,
                                expect_digest=digest, action="unpark")
            fsops.crashpoint("unpark:renamed")
            # looked at again under the lock, as after a park's rename: the bytes checked right
            # before the rename are what went live, even if a hand `mv` moved them on since
            st = self.core.state_at("live", fn)
            if st is None or digest_of(st.data) != digest:
                st = pst
            rec = self.core.store.park_of(comp)
            with self.recovery.after_rename(f"{fn} is live again: the kubelet starts the pod"), \
                    self.core.store.after_intent():
                version = self.recovery.record_unpark(comp, fn, st, payload)
                self.core.store.end_intent(intent)
            parked_for = f" after {_human_duration(time.time() - rec.parked_at)}" if rec else ""
            self.core.log(
                Event.UNPARKED, f"{comp}: unparked {fn}{parked_for}" + (f" ({reason})" if reason else ""),
                priority=NOTICE, component=comp, file_name=fn, version=version.seq, digest=digest, reason=reason,
            )
            self.core.hooks("post", "unpark", component=comp, file_name=fn, reason=reason, version=version.seq,
                             digest=digest)
            return Result("unpark", comp, fn, True, f"{comp}: unparked {fn}{parked_for}{recovered_note}",
                          location="live", version=version, digest=digest, park=rec, warnings=warnings)

    def discard_park(self, name: str, *, reason: str | None = None) -> Result:
        """End a park without starting anything: delete the parked copy (its bytes are recorded:
        recorded first if they were not) and close the park. For a parked leftover (a
        ``.bak``), or a component the operator retires. Raises NotParked, UnknownComponent,
        LockTimeout, FsError."""
        with self.core.nothing_changed_on_error(), self.guard.locked():
            missing = self._park_with_missing_copy(name)
            if missing is not None:
                comp, fn = missing, self.core.store.park_of(missing).file_name  # type: ignore[union-attr]
            else:
                target = self.core.resolve(name, allow_recorded=False)
                found = self.scanner.scan_before_change(target.file_name)  # the parked copy's bytes are in history now
                target = self.core.resolve(target.file_name, allow_recorded=False)
                comp, fn = target.component, target.file_name
                if any(c.kind == "unparked-by-hand" and c.file_name == fn for c in found):
                    return Result("unpark", comp, fn, False,
                                  f"{comp}: {fn} was already moved back by hand; its park record is now closed "
                                  "(nothing to discard)", location="live")
                if not target.parked or self.core.store.park_of(comp) is None:
                    raise NotParked(f"{comp} is not parked", hint="see: staticpodctl status")
            rec = self.core.store.park_of(comp)
            parked_st = self.core.state_at("parked", fn)
            parked_digest = digest_of(parked_st.data) if parked_st is not None else None
            parked_version = next((v for v in reversed(self.core.store.history(comp)) if v.digest == parked_digest),
                                  None)
            live_too = self.core.path("live", fn).exists()
            fsops.remove(self.core.path("parked", fn))
            with self.recovery.after_rename(f"the parked copy of {fn} is deleted (its bytes are in history)",
                                             then="the park stands until it is closed; run the discard again"), \
                    self.core.store.transaction():
                if parked_st is not None:  # a history row: the park's end, with the bytes it ended with
                    parked_version = self.core.store.record(
                        comp, fn, parked_st.data, action="discard", actor=self.core.actor.name,
                        actor_via=self.core.actor.via, reason=reason, mode=parked_st.mode, uid=parked_st.uid,
                        gid=parked_st.gid, location="parked")
                live_st = self.core.state_at("live", fn) if live_too else None
                if live_st is not None and (parked_st is None or live_st.data != parked_st.data):
                    # the live file the park is discarded for (a broken park: kubeadm's rollback
                    # put its backup back) is the component's current version from now on, so
                    # that no verb calls it unrecorded drift behind the discarded bytes
                    self.core.store.record(
                        comp, fn, live_st.data, action="discard", actor=self.core.actor.name,
                        actor_via=self.core.actor.via,
                        reason="the live file kept when the park was discarded", mode=live_st.mode,
                        uid=live_st.uid, gid=live_st.gid, location="live")
                self.core.store.clear_park(comp)
                self.core.store.clear_observed(f"parked/{fn}")
                self.core.store.record_event("discarded", component=comp, file_name=fn, actor=self.core.actor.name,
                                             details={"reason": reason, "digest": rec.digest if rec else None})
            head = self.core.store.head(comp)
            seq = parked_version.seq if parked_version is not None else None
            msg = (f"{comp}: park ended; the parked copy of {fn} is deleted"
                   + (f" (its bytes stay in history as version {seq})" if seq else "")
                   + ("; the live file stays and the kubelet runs it" if live_too else
                      "; nothing was started"))
            self.core.log(Event.UNPARKED, msg, priority=NOTICE, component=comp, file_name=fn, version=seq,
                           reason=reason, action="discard")
            return Result("unpark", comp, fn, True, msg, location=None, version=head, park=rec)

    def parks_bypassed(self) -> list[tuple[str, str]]:
        """``(component, live file)`` for every parked component whose pod another live file
        defines: the kubelet runs it although it is parked (docs/kubelet-contract.md "Duplicate names across
        files"). Not a parked leftover (``kube-scheduler.yaml.bak``): parking it is how its
        duplicate goes away, and the live file is meant to run. Read-only; for ``doctor``."""
        if not self.core.layout.db_path.exists():
            return []
        out = []
        for rec in self.core.store.parks():
            if component_of(rec.file_name) == rec.file_name:
                continue
            st = self.core.state_at("parked", rec.file_name)
            ident = self.gatekeeper.pod_identity(st.data) if st is not None else None
            if ident is None:
                continue
            for other in self.gatekeeper.files_defining(ident, besides=rec.file_name):
                out.append((rec.component, other))
        return out

    # -- park helpers ------------------------------------------------------------------------------

    def _already_parked(self, comp: str) -> AlreadyParked:
        """The refusal of a park of ``comp``, which has no live file: who parked it, when, until
        when and why, from its park record."""
        rec = self.core.store.park_of(comp)
        detail = ""
        if rec:
            detail = f" since {iso(rec.parked_at)} by {rec.actor}" + (
                f" until {iso(rec.until)}" if rec.until else ""
            ) + (f" ({rec.reason})" if rec.reason else "")
        return AlreadyParked(f"{comp} is already parked{detail}",
                             hint=f"bring it back with: staticpodctl unpark {_q(comp)}")

    def _replace_stale_parked_copy(self, comp: str, fn: str) -> str:
        """A parked copy beside the live file ``fn`` that a park is about to replace: deleted when
        its bytes are in history (an event says so; returns the note for the result), else
        Conflict: it is the only copy of bytes nobody recorded."""
        old = self.core.state_at("parked", fn)
        if old is not None and self.core.store.knows_digest(comp, digest_of(old.data)):
            fsops.remove(self.core.path("parked", fn))
            self.core.store.clear_observed(f"parked/{fn}")
            self.core.store.record_event("stale-parked-copy-replaced", component=comp, file_name=fn,
                                         actor=self.core.actor.name, details={"digest": digest_of(old.data)})
            return (f"; the older parked copy ({digest_of(old.data)[:12]}) was replaced "
                    f"(its bytes stay in history: staticpodctl history {_q(comp)})")
        raise Conflict(
            f"a parked copy of {fn} exists that is not recorded",
            path=str(self.core.path("parked", fn)),
            hint="move it away by hand (it is your only copy), then park again",
        )

    def _live_to_park(self, comp: str, fn: str) -> fsops.FileState:
        """The live file ``fn`` a park moves, as it is now; Conflict when it went meanwhile (a hand
        ``mv`` takes no lock) or is a symlink (parking would move the link, not the manifest)."""
        st = self.core.state_at("live", fn)
        if st is None:  # moved or removed by hand since it was resolved (a hand `mv` takes no lock)
            raise Conflict(f"{fn} was moved or removed meanwhile (not by staticpodd); nothing was changed",
                           path=str(self.core.path("live", fn)),
                           hint=f"see where it went: staticpodctl status; then park {_q(comp)} again if needed")
        if st.is_symlink:
            raise Conflict(
                f"{fn} is a symlink (to {os.readlink(self.core.path('live', fn))}); parking would move the link, "
                "not the manifest, and a relative link would dangle while parked",
                path=str(self.core.path("live", fn)),
                hint="replace the link with a regular file (cp --remove-destination TARGET LINK), then park",
            )
        return st

    # -- unpark helpers ----------------------------------------------------------------------------

    def _unpark_target(self, name: str, reason: str | None) -> tuple[Target, str]:
        """The component an unpark of ``name`` moves, and the note for its result. A park whose
        parked copy is gone (and no live file either) gets its parked bytes back first as the
        parked copy, through the swapper's rollback (validated, recorded, atomic), so that it is
        unparked as usual. Raises what :meth:`EngineCore.resolve` raises otherwise."""
        try:
            return self.core.resolve(name, allow_recorded=False), ""
        except Conflict:
            missing = self._park_with_missing_copy(name)
            if missing is None:
                raise
        # The version the park record names, not the newest: a hand copy written (and recorded)
        # while the park stood is newer, and is not what was parked
        rec = self.core.store.park_of(missing)
        parked_seq = next((v.seq for v in reversed(self.core.store.history(missing))
                           if rec is not None and v.digest == rec.digest), None)
        back = self.swapper.rollback(missing, to=parked_seq, rename=True,  # the bytes that were parked
                                     reason=reason or "unpark: the parked copy was gone")
        seq = back.version.seq if back.version is not None else "?"
        return (self.core.resolve(name, allow_recorded=False),
                f" (its parked copy was gone: version {seq} put back from history)")

    def _park_already_over(self, target: Target, found: list[Change], reason: str | None) -> Result | None:
        """The result of an unpark whose park a hand already ended, None when it stands: the
        parked copy was moved back (``found`` by the scan before the change: the scan closed
        the record), or it was removed while a live file runs (the record is closed here)."""
        comp, fn = target.component, target.file_name
        if any(c.kind == "unparked-by-hand" and c.file_name == fn for c in found):
            return Result("unpark", comp, fn, False,
                          f"{comp}: {fn} was already moved back by hand; its park record is now closed",
                          location="live")
        if not (target.live and not target.parked and self.core.store.park_of(comp) is not None):
            return None
        # the parked copy was removed by hand (seen now or by an earlier scan) and a live file
        # runs: the park is over; close its record, which the message has always claimed
        with self.core.store.transaction():
            self.core.store.clear_park(comp)
            self.core.store.record_event("park-closed", component=comp, file_name=fn, actor=self.core.actor.name,
                                         details={"reason": reason, "why": "parked copy removed, live file kept"})
        msg = f"{comp}: the parked copy was removed by hand and {fn} is live; its park record is now closed"
        self.core.log(Event.UNPARKED, msg, priority=NOTICE, component=comp, file_name=fn, reason=reason,
                      action="close")
        return Result("unpark", comp, fn, True, msg, location="live")

    def _parked_to_unpark(self, comp: str, fn: str) -> fsops.FileState:
        """The parked copy an unpark puts live, as it is now. Conflict when it went meanwhile (a
        hand ``mv`` takes no lock); refused as untrusted when another user could have written it
        (it could be a pod of theirs: never put live)."""
        pst = self.core.state_at("parked", fn)
        if pst is None:  # moved or removed by hand since it was resolved (a hand `mv` takes no lock)
            raise Conflict(f"the parked copy of {fn} was moved or removed meanwhile (not by staticpodd); "
                           "nothing was changed", path=str(self.core.path("parked", fn)),
                           hint=f"see where it went: staticpodctl status; then unpark {_q(comp)} again")
        from ..node.trust import owner_mode_problem, untrusted

        bad = owner_mode_problem(pst.uid, pst.mode)
        if bad:  # another user could have swapped it for a pod of theirs: never put it live
            raise untrusted(self.core.path("parked", fn), "parked copy", bad)
        return pst

    def _judge_parked(self, comp: str, fn: str, pst: fsops.FileState
                      ) -> tuple[tuple[str, str] | None, list[OpWarning]]:
        """``(pod identity, warnings)`` of the parked bytes an unpark puts live: through the gate,
        unless these exact bytes passed this exact validator before; bytes only staticpodd's own
        rules refuse that ran before the park go live with a warning
        (:meth:`_ran_before_the_park`). Raises InvalidManifest."""
        from ..resources import validator_id

        digest = digest_of(pst.data)
        if self.core.store.verdict(digest, validator_id()) is True:
            return self.gatekeeper.pod_identity(pst.data), []
        try:
            manifest, _ = self.gatekeeper.gate(pst.data, str(self.core.path("parked", fn)), component=comp)
            return (manifest.namespace, manifest.name), []
        except InvalidManifest as exc:
            warnings = self._ran_before_the_park(comp, fn, digest, exc)  # or raises exc
            return self.gatekeeper.pod_identity(pst.data), warnings

    def _check_unpark_others(self, comp: str, fn: str, pst: fsops.FileState, ident: tuple[str, str] | None) -> None:
        """The live files the unparked pod ``ident`` would join, in one look: no second file for
        the pod, not a pod parked under another component, no host port another live pod holds."""
        if not ident:
            return
        with self.gatekeeper.one_look():  # one listing and one stat per file for all these checks
            try:
                self.gatekeeper.check_no_duplicate(fn, *ident)
            except Conflict as exc:
                raise self._unpark_would_duplicate(comp, exc) from None
            self.gatekeeper.check_not_parked_elsewhere(comp, *ident, None)
            self.ports.check_host_ports(fn, pst.data, str(self.core.path("parked", fn)), action="unpark")

    def _twins_note(self, comp: str, fn: str, ident: tuple[str, str], twins: list[str], *,
                    until: float | None, force: bool) -> str:
        """Parking ``fn`` while ``twins`` (other live files) define the same pod ``ident``: refused
        (Conflict) unless ``fn`` is a leftover or ``force``; a deadline is refused (UsageError), as
        the pod keeps running. Returns the note for the result (see :meth:`park`)."""
        leftover = component_of(fn) == fn
        if not (leftover or force):
            odd = [(t, why) for t in twins if (why := self.gatekeeper.why_not_parkable(t)) is not None]
            stray_twins = [t for t in twins if component_of(t) == t and t not in dict(odd)]
            hint = (f"rename or move {odd[0][0]} out of the directory first ({odd[0][1]}, so "
                    f"staticpodctl cannot park it), then park {comp}" if odd else
                    f"park the leftover first (staticpodctl park {_q(stray_twins[0])}), then park {comp}"
                    if stray_twins else
                    f"park or move the other file(s) first, or park only {fn} with --force "
                    "(the pod keeps running from the other file)")
            raise Conflict(
                f"{', '.join(twins)} also define{'s' if len(twins) == 1 else ''} pod {ident[0]}/{ident[1]}; "
                f"parking {fn} would not stop the pod: the kubelet would go on running it from {twins[-1]}",
                path=str(self.core.path("live", twins[-1])),
                hint=hint,
            )
        if until is not None:
            raise UsageError(
                f"parking {fn} does not stop pod {ident[0]}/{ident[1]} (the kubelet runs it from {twins[-1]}), "
                "so a deadline to start it again means nothing",
                hint=f"park it without --for/--until: staticpodctl park {_q(fn)}",
            )
        return f"; pod {ident[0]}/{ident[1]} runs from {twins[-1]}"

    def _readd_from(self, winner: str) -> str:
        """After parking one of several live files of one pod: touch ``winner``, the file the
        kubelet runs the pod from now, so that it re-adds the pod at once. The kubelet drops a pod
        when one of its files goes and re-reads the others only at its next relist, up to
        fileCheckFrequency (20 s) later, unless an event on one arrives (docs/kubelet-contract.md
        "Duplicate names across files"; seen with the daemon's quarantine, tests/e2e/test_e2e_strays.py).
        The touch changes no byte, mode or owner. Returns the note for the result."""
        try:
            os.utime(self.core.path("live", winner))
        except OSError as exc:
            return (f" (cannot touch it: {exc.strerror or exc}; the kubelet runs the pod again at its next "
                    "relist, up to 20 s)")
        return (" (touched it: the kubelet drops a pod when one of its files goes, and re-adds it now, "
                "not at its next relist)")

    def _live_again(self, comp: str, fn: str, live: Any) -> LiveFileExists:
        """The refusal of an unpark whose live file is back and differs from the parked copy
        (``live``: its state, or None when it went again)."""
        when = ""
        if live is not None:
            when = time.strftime(" (modified %Y-%m-%dT%H:%M:%SZ)",
                                 time.gmtime(os.stat(self.core.path("live", fn)).st_mtime))
        return LiveFileExists(
            f"{fn} is live again{when} and differs from the parked copy; not overwriting it",
            path=str(self.core.path("live", fn)),
            hint=f"both are in history (staticpodctl history {_q(comp)}). To keep the live file (what the kubelet "
            f"runs now; e.g. kubeadm upgrade put its backup back): staticpodctl unpark {_q(comp)} --discard. "
            "To let the parked copy win: move the live file out of the directory (its bytes stay in "
            "history), then unpark",
        )

    def _ran_before_the_park(self, comp: str, fn: str, digest: str, exc: InvalidManifest) -> list[OpWarning]:
        """The warnings for unparking bytes only staticpodd's own rules refuse (a key given twice,
        a second document, a stricter Kubernetes minor: README "Deliberate strictness"), when they
        are the very bytes that were parked: the kubelet ran them before the park and runs them
        again, and a park must never become permanent because the rules are stricter than the
        kubelet (a deadline unpark cannot ask anyone). Re-raises ``exc`` when the kubelet itself
        refuses them or the parked copy was changed since the park."""
        from ..validate import kubelet_refuses

        rec = self.core.store.park_of(comp)
        if kubelet_refuses(exc.findings) or rec is None or rec.digest != digest:
            raise exc
        codes = ", ".join(sorted({f.code for f in exc.findings if f.severity == "error"}))
        return [OpWarning(str(self.core.path("live", fn)),
                          f"put back although staticpodd's own rules refuse these bytes ({codes}): the kubelet runs "
                          "them, and they ran before the park; fix them with: staticpodctl edit "
                          f"{_q(comp)}", code="unparked-despite-strictness")]

    @staticmethod
    def _unpark_would_duplicate(comp: str, exc: Conflict) -> Conflict:
        """``exc`` (another live file defines the parked pod) for unpark: parking that file would
        stop the pod the kubelet runs from it (after ``park --force`` of a twin, it is the one
        meant to run), so the way out named is ending the park without starting it."""
        return Conflict(
            f"unparking would start a second file for the same pod: {exc.message}",
            path=exc.path,
            hint=f"to end the park without starting it: staticpodctl unpark {_q(comp)} --discard (its bytes stay "
            "in history); to let the parked copy run instead, move the other file out of the directory first",
        )

    def _park_with_missing_copy(self, name: str) -> str | None:
        """The component ``name`` (or file name) when it is parked and its parked copy and live
        file are both gone; None otherwise."""
        if not self.core.layout.db_path.exists():
            return None
        head = self.core.store.head(name) or self.core.store.head(component_of(name))
        if head is None or self.core.store.park_of(head.component) is None:
            return None
        if self.core.path("parked", head.file_name).exists() or self.core.path("live", head.file_name).exists():
            return None
        return head.component

    def _close_park_copied_back(self, comp: str, fn: str, live: Any, reason: str | None) -> Result:
        """The parked copy was copied (not moved) back by hand: the live file is byte-identical
        and the kubelet already runs it. Delete the redundant parked copy (its bytes are recorded)
        and close the park. A crash between the two leaves the parked copy's removal for the next
        scan, which closes the park the same way."""
        parked_path = self.core.path("parked", fn)
        fsops.remove(parked_path)
        rec = self.core.store.park_of(comp)
        payload = self.recovery.intent_base(fn, reason)
        with self.core.store.transaction():
            self.core.store.clear_observed(f"parked/{fn}")
            version = self.recovery.record_unpark(comp, fn, live, payload)
        msg = f"{comp}: {fn} was already copied back by hand (identical bytes); removed the parked copy, park closed"
        self.core.log(Event.UNPARKED, msg, priority=NOTICE, component=comp, file_name=fn, version=version.seq,
                       digest=version.digest, reason=reason)
        return Result("unpark", comp, fn, True, msg, location="live", version=version, digest=version.digest,
                      park=rec)

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
                self.core.store.end_intent(intent)
                loc = "parked" if src.parent == self.core.layout.parked_dir else "live"
                raise self.scanner.changed_meanwhile(comp, src.name, loc, action, expect_digest, expect_digest, now)
        try:
            fsops.move_noreplace(src, dst)
        except (FsError, LiveFileExists) as exc:
            if src.exists() and not (dst.exists() and os.path.samefile(src, dst)):
                self.core.store.end_intent(intent)
                exc.message += "; nothing was changed"
            raise
