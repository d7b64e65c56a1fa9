"""Carrying out a plan: log its reports, hold back actions on files being written, act.

:class:`ExecuteMixin` runs a :class:`staticpodd.reconcile.Plan` under the lock: restores
(RESTORED_LAST_GOOD), quarantines (and, after quarantining a stray that defined a running pod, the
touch that makes the kubelet re-add it at once), and deadline unparks, with POLICY_ACTION_HELD
while a writer holds the file and POLICY_ACTION_FAILED (and a problem) when the engine refuses;
a refused restore or unpark is tried again on later passes with back-off, one entry per retry.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..errors import StaticpodError
from ..journal import ERR, NOTICE, WARNING, Event
from ..node.watch import WRITE_STALL, Writer
from ..reconcile import Action, Plan, Report
from .base import HOLD_RECHECK, RETRY_DELAY, DaemonBase
from .problems import _get


class ExecuteMixin(DaemonBase):
    """Carrying out the planned restores, quarantines and unparks."""

    def _execute(self, plan: Plan) -> None:
        """Log the plan's reports, then ask the engine for its actions (lock held).

        A restore or quarantine is held back while the file is not quiet (:meth:`WriterHolds.hold_reason`):
        changed since the scan, or still open for writing by some process. A held file is
        re-checked when the writer closes it (inotify close-write is a hint) and every
        :data:`HOLD_RECHECK` seconds, so it is never forgotten; the wait is logged once per set
        of writers, naming pid and comm, and the report of a held file is not repeated.
        """
        held = self._holds_of(plan)
        self._log_reports(plan, held)
        self._note_held(plan, held)
        # Strays leave first: a leftover copy of a component (etcd.yaml.bak) defines the same pod,
        # and the engine refuses to restore or unpark a file while another one defines its pod.
        # A file being restored is never quarantined (plan_findings' ``protect``).
        self._quarantine_strays(plan, held)
        order = {"quarantine": 0, "restore": 1}
        for a in sorted(plan.actions, key=lambda a: order.get(a.verb, 2)):
            if a.verb == "quarantine":
                continue  # done above
            if a.verb == "restore" and (a.file_name in self.writer_holds.busy_names() or a.file_name in held):
                # written again since we looked, or still open for writing: never act on a file
                # someone is writing; the debounced hint (or the re-check) brings it back here
                continue
            try:
                if a.verb == "restore":
                    # the bytes judged invalid in this pass (the scan's observation): the engine
                    # restores only while the live file still holds exactly them
                    judged = self.engine.store.observed().get(f"live/{a.file_name}")
                    res = self.engine.restore_last_good(a.target, reason=a.reason,
                                                        judged_digest=_get(judged, "digest") or "")
                    self._log_restored(a, res)
                elif a.verb == "unpark":
                    self.engine.unpark(a.target, reason=a.reason)
            except StaticpodError as exc:
                self._action_failed(a, exc)
            else:
                if a.verb == "unpark":
                    self.problems.clear(f"unpark:{a.target}")
                    self.failed_unparks = {k: v for k, v in self.failed_unparks.items() if k[0] != a.target}
                    self.backoff.forget(f"unpark:{a.target}")

    def _holds_of(self, plan: Plan) -> dict[str, tuple[str, list[Writer]]]:
        """``file name -> (why, writers)`` for each planned restore or quarantine that must wait
        (:meth:`WriterHolds.hold_reason`); files no longer held by a writer leave
        :attr:`WriterHolds.held`."""
        held: dict[str, tuple[str, list[Writer]]] = {}
        for a in plan.actions:
            if a.verb in ("restore", "quarantine") and a.file_name and a.file_name not in held:
                hold = self.writer_holds.hold_reason(a.file_name, a.verb)
                if hold is not None:
                    held[a.file_name] = hold
        for name in list(self.writer_holds.held):
            if name not in held or held[name][0] != "writer":
                self.writer_holds.held.pop(name, None)
        return held

    def _log_reports(self, plan: Plan, held: dict[str, tuple[str, list[Writer]]]) -> None:
        """Journal the plan's reports; a held file's says when its action goes ahead, and is not
        repeated while the same writer holds it."""
        for r in plan.reports:
            rname = str(r.fields.get("file_name") or "")
            if rname in held and r.event in (Event.INVALID_LIVE, Event.STRAY_FOUND):
                why, _writers = held[rname]
                if why == "writer" and rname in self.writer_holds.held:
                    continue  # reported when the wait began; the re-checks stay quiet
                note = "; restoring the last good version"
                if r.message.endswith("; quarantining it"):
                    note = "; quarantining it"
                elif note not in r.message:
                    note = ""
                if note:
                    wait = (
                        "once it is closed and unchanged" if why == "writer" else "once it stops changing"
                    )
                    r = Report(r.event, r.priority, r.message.split(note)[0] + note + " " + wait, r.fields)
            self.log(r.event, r.message, priority=r.priority, **r.fields)

    def _note_held(self, plan: Plan, held: dict[str, tuple[str, list[Writer]]]) -> None:
        """Look at each held file again in :data:`HOLD_RECHECK` seconds, and journal
        POLICY_ACTION_HELD once per set of writers holding it (pid and comm, or inotify's word)."""
        for name, (why, writers) in held.items():
            self.retries.later([name], at=time.monotonic() + HOLD_RECHECK)
            if why != "writer":
                continue
            pids = frozenset(w.pid for w in writers)
            if self.writer_holds.held.get(name) == pids:
                continue
            self.writer_holds.held[name] = pids
            verb = next(a.verb for a in plan.actions if a.file_name == name and a.verb in ("restore", "quarantine"))
            if writers:
                who = ", ".join(f"pid {w.pid} ({w.comm})" for w in writers)
                text = f"{who} still {'has' if len(writers) == 1 else 'have'} it open for writing"
            else:
                since = self.hints.writes.since(name) if self.hints is not None else None
                text = (
                    f"it changed {since or 0:.1f} s ago and has not been closed since (inotify; "
                    "the writing process is not visible in /proc)"
                )
            self.log(
                Event.POLICY_ACTION_HELD,
                f"{name}: the {verb} waits for the writer to close the file: {text}; it goes ahead "
                f"after {WRITE_STALL:g} s without a change",
                priority=NOTICE,
                file_name=name,
                held_by_pid=",".join(str(w.pid) for w in writers),
                held_by_comm=",".join(w.comm for w in writers),
                held_by="proc" if writers else "inotify",
                policy_action="wait",
            )

    def _quarantine_strays(self, plan: Plan, held: dict[str, tuple[str, list[Writer]]]) -> None:
        """The planned quarantines of files neither busy nor held, all at once: one lock, one
        scan, one transaction (one each took N² stats); after a stray that defined a pod, the
        live file that defines it now is touched so the kubelet re-adds it at once
        (:meth:`_readd_after_quarantine`)."""
        busy = self.writer_holds.busy_names()
        strays = [a for a in plan.actions if a.verb == "quarantine" and a.file_name not in busy
                  and a.file_name not in held]
        if not strays:
            return
        pods = {a.target: self._pod_defined_by(a.target) for a in strays}
        try:
            done = self.engine.quarantine_many([a.target for a in strays], reason=strays[0].reason,
                                               reasons={a.target: a.reason for a in strays})
        except StaticpodError as exc:
            done = {a.target: exc for a in strays}
        for a in strays:
            result, pod = done.get(a.target), pods[a.target]
            if isinstance(result, StaticpodError):
                self._action_failed(a, result)
            elif result is not None and pod is not None:
                self._readd_after_quarantine(a.target, pod)

    def _log_restored(self, a: Action, res: Any) -> None:
        """RESTORED_LAST_GOOD for the restore ``a`` the engine carried out (``res``, its Result);
        the file is no longer an invalid-live problem, nor a restore that failed."""
        new = _get(_get(res, "version"), "seq")
        source = (_get(res, "extra") or {}).get("restored_version")
        self.problems.clear_invalid(a.file_name or "")
        self.backoff.forget_restore(a.file_name or "")
        self.log(
            Event.RESTORED_LAST_GOOD,
            f"{a.file_name}: restored the last good version of {a.target} (version {source}) "
            f"over an invalid external write; recorded as version {new}",
            priority=WARNING,
            component=a.target,
            file_name=a.file_name,
            version=new,
            restored_version=source,
            digest=_get(res, "digest"),
            reason=a.reason,
        )

    def _action_failed(self, a: Action, exc: StaticpodError) -> None:
        """Say that the engine refused action ``a`` (``exc``), and keep what follows from it: a
        file written again after it was judged is looked at again (never reverted); a failed
        restore is not retried on the same bytes; an expired park that would not end is a problem."""
        if exc.code == "changed-meanwhile" and a.file_name:
            # written again after it was judged: recorded by the engine, never reverted;
            # the next pass judges the new bytes (and restores them only if invalid)
            self._say(f"{a.verb} {a.target} skipped: {exc.message}")
            self.retries.later([a.file_name], at=time.monotonic() + RETRY_DELAY)
            return
        self._say(f"{a.verb} {a.target} failed: {exc}")
        key = f"{a.verb}:{a.file_name if a.verb == 'restore' else a.target}"
        tries, delay = self.backoff.failed(key)
        again = (f" (retry {tries - 1})" if tries > 1 else "") + f"; tried again in {delay:g} s"
        if a.verb == "unpark":
            rec = self.engine.store.park_of(a.target) if hasattr(self.engine.store, "park_of") else None
            until = _get(rec, "until")
            if until is not None:
                self.failed_unparks[(a.target, until)] = exc.code
            if tries == 1:  # counted in staticpodd_failed_unparks_total (per deadline, not per retry)
                try:
                    self.engine.store.record_event(
                        "unpark-failed", component=a.target, file_name=a.file_name, actor="staticpodd",
                        reason=a.reason, details={"error": exc.code, "until": until},
                    )
                except StaticpodError:
                    pass
            self.problems.set(f"unpark:{a.target}", {
                "code": "park-expired-unpark-failed",
                "severity": "error",
                "component": a.target,
                "path": None,
                "message": f"the park of {a.target} expired but unpark failed: {exc.message}",
            })
            self.log(
                Event.POLICY_ACTION_FAILED,
                f"the park of {a.target} expired but unpark failed{again}: {exc.message}",
                priority=ERR,
                component=a.target,
                error=exc.code,
                retry=tries - 1,
            )
            return
        if a.verb == "restore" and a.file_name:
            obs = self.engine.store.observed().get(f"live/{a.file_name}")
            if obs is not None:  # tried again on these bytes only once its back-off is over
                self.backoff.failed_restores[a.file_name] = (obs.digest, frozenset(self.engine.live_names()))
                self.retries.no_later_than(a.file_name, time.monotonic() + delay)
        self.log(
            Event.POLICY_ACTION_FAILED,
            f"{a.file_name or a.target}: {a.verb} of {a.target} failed{again}: {exc.message}",
            priority=ERR,
            component=a.target,
            file_name=a.file_name,
            error=exc.code,
            retry=tries - 1,
        )

    def _pod_defined_by(self, file_name: str) -> tuple[str, str] | None:
        """(namespace, name) of the pod a live file defines, or None (unreadable, not a Pod)."""
        from ..proof.shadow import pod_key
        from ..validate.refused import kubelet_refuses

        try:
            data = (self.layout.manifest_dir / file_name).read_bytes()
        except OSError:
            return None
        if kubelet_refuses(data):
            return None
        import yaml

        from ..manifest.yamlsafe import FastLoader

        try:
            doc = next(iter(yaml.load_all(data, Loader=FastLoader)), None)  # noqa: S506 - a safe loader
        except yaml.YAMLError:
            return None
        return pod_key(doc)

    def _readd_after_quarantine(self, stray: str, pod: tuple[str, str]) -> None:
        """After quarantining ``stray`` that defined ``pod`` (namespace, name): touch the live
        file that defines it now, so the kubelet re-adds that pod at once (inotify IN_ATTRIB ->
        re-read) instead of at its next relist, and say truthfully what the stray already did.

        Seen on a real kubelet 1.34: it reads a new ``x.yaml.bak`` 2-3 ms after the
        ``cp`` and, the ``.bak`` sorting last, kills the running pod to start it under the
        ``.bak``'s UID (the UID hashes the file path); no quarantine can be that fast. Moving the
        stray out is a delete to the kubelet, which removes that pod too; the file it should run
        is re-read only at the next relist (up to fileCheckFrequency, 20 s by default) unless an
        event on it arrives. The touch is that event (docs/kubelet-contract.md "When the kubelet looks";
        consequence 6 forbids touching an unchanged file, except here, where re-reading it is
        exactly what is needed). The live file's bytes, mode and owner are unchanged.
        """
        from ..proof.shadow import files_defining

        ns, name = pod
        definers = files_defining(self.layout.manifest_dir, ns, name)
        if not definers:
            return
        winner = definers[-1].file_name  # the kubelet runs the lexically last file
        try:
            os.utime(self.layout.manifest_dir / winner)
        except OSError as exc:
            self._say(f"cannot touch {winner} after quarantining {stray}: {exc}")
            return
        self.log(
            Event.STRAY_QUARANTINED,
            f"{stray} defined {ns}/{name} like {winner}: the kubelet read it within milliseconds and restarted "
            f"the pod under {stray}'s UID before the quarantine could act; touched {winner} so that the kubelet "
            "re-adds its pod now instead of at its next relist",
            priority=WARNING,
            file_name=stray,
            readded=winner,
            pod=f"{ns}/{name}",
        )
