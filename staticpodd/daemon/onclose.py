"""The restore on a writer's close: bytes the kubelet refuses are put back before the debounce.

Under ``on_invalid: restore``, a live file whose writer has just closed it (inotify
IN_CLOSE_WRITE) and whose bytes the kubelet refuses is restored in the same pass of the loop,
without waiting for the debounce: every millisecond the bad bytes stay is a chance for the
kubelet's relist to read them and kill the pod (docs/kubelet-contract.md "What a broken file does to a running
pod"). :class:`CloseMixin` does it with as little as possible before the rename: the bytes are
read, judged and held back from history until the restore is in place
(:meth:`~CloseMixin._restore_unrecorded`; the engine stores them with the restore's intent, so a
crash in between loses nothing), and what the restore reports is logged after it. Anything out of
the plain case (a new or parked file, a writer still at work, a file that changed since) goes
the general way: scan, plan and execute, as every other pass does.
"""

from __future__ import annotations

from typing import Any

from ..errors import StaticpodError
from ..journal import ERR, Event
from ..reconcile import plan_changes, stray_by_name
from ..store.versions import digest_of
from .execute import ExecuteMixin
from .policies import PlanMixin

#: A minimal valid static pod: judging it once before READY=1 imports every layer of the validator.
_WARM_UP_POD = (b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: warm-up\n  namespace: kube-system\n"
                b"spec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n")


class CloseMixin(PlanMixin, ExecuteMixin):
    """Looking at a file as soon as its writer closes it, and restoring it then."""

    def _refused_on_close(self) -> set[str]:
        """Live files a writer just closed whose bytes the kubelet refuses, under
        ``on_invalid: restore``: their pending hints are dropped so that this pass of the loop
        looks at them (and restores them) at once instead of after the debounce.

        The kubelet keeps the old pod only until its next relist (docs/kubelet-contract.md "What a broken file
        does to a running pod"): with the 0.3 s debounce a 20 s relist fell inside the window 1
        time in 10; acting on the close shrinks the window to the restore itself.
        The cheap check (:func:`staticpodd.validate.refused.kubelet_refuses`) decides only when to look;
        whether to restore stays the verdict of :func:`staticpodd.reconcile.plan_changes`.
        """
        assert self.hints is not None
        closed = self.hints.take_closed()
        if not closed or getattr(self.config, "on_invalid", "alert") != "restore":
            return set()
        from ..node.watch import Hint
        from ..validate.refused import kubelet_refuses

        out: set[str] = set()
        for name in closed:
            if name.startswith(".") or stray_by_name(name) or self.hints.writes.since(name) is not None:
                continue
            try:
                data = (self.layout.manifest_dir / name).read_bytes()
            except OSError:
                continue
            if kubelet_refuses(data):
                self.hints.discard(Hint("file", name))
                out.add(name)
        if out:
            self._restore_now(out)
        return out

    def _prepare_close_path(self) -> None:
        """Under ``on_invalid: restore``, import and set up before READY=1 what the first restore
        on a writer's close needs before its rename: the decoder's first stage, the stray rules,
        the validator's layers and Pod schema (to judge the version put back when no verdict on
        it is kept yet) and the restore's verdict key: about 4-10 ms at start, so that a write
        right after READY=1 is not kept waiting for them. A daemon whose directory is unchanged
        since its last run validates nothing at start, so nothing else would have
        imported them. Judges two made-up manifests; changes nothing on disk or in the store."""
        if getattr(self.config, "on_invalid", "alert") != "restore":
            return
        from ..engine import Change
        from ..validate.refused import kubelet_refuses

        kubelet_refuses(b"")
        stray_by_name("warm-up.yaml")
        self.engine.verdict(_WARM_UP_POD, "warm-up.yaml", "warm-up")
        _ok, findings = self.engine.verdict(b"", "warm-up.yaml", "warm-up")
        plan_changes([Change("warm-up", "warm-up.yaml", "live", "modified", "", None, False, findings)], self.config,
                     sizes={}, relist=self.writer_holds.relist())
        self.engine.judged_key(self.engine.validate_options())

    def _restore_now(self, names: set[str]) -> None:
        """Restore ``names`` (refused on close) now, before the directory-wide findings: those
        cost a validation of every live file and are refreshed by the reconcile of the same
        names that follows in this pass of the loop. Any failure is left to that reconcile (it
        retries and reports).

        Each name goes through :meth:`_restore_unrecorded` when it can; the others are scanned,
        planned and executed as in any pass, with the scan that records the refused bytes
        committed without an fsync of its own (``synced=False``): the restore's intent, committed
        synced before the rename, syncs the store's log with it, so the bad bytes are durable in
        history before the rename replaces them."""
        try:
            with self.engine.locked():
                self.writer_holds.snapshot()
                rest = sorted(n for n in names if not self._restore_unrecorded(n))
                if rest:
                    changes = self.engine.scan(rest, validate=True, log=False, synced=False)
                    plan = plan_changes(changes, self.config, sizes=self.writer_holds.sizes(),
                                        relist=self.writer_holds.relist())
                    self._track_changes(changes)
                    self._execute(plan)
        except StaticpodError as exc:
            self._say(f"restore on close of {', '.join(sorted(names))} deferred: {exc}")
        except Exception as exc:  # a bug: reported, and the reconcile that follows still runs
            self.log(Event.DAEMON_ERROR, f"internal error in the restore on close of {', '.join(sorted(names))} "
                     f"(left to the reconcile; still serving): {type(exc).__name__}: {exc}", priority=ERR,
                     error="internal-error")

    def _restore_unrecorded(self, name: str) -> bool:
        """Restore live ``name`` with its refused bytes recorded after the rename (lock held;
        :attr:`WriterHolds.scan_stats` just taken). True when handled (restored, or refused by the engine
        and reported as :meth:`_execute` would); False, with nothing changed or recorded, when
        it must go the general way.

        The plain case only: a regular file (not a link) within ``max_manifest_bytes``, seen
        before at this path (so the change is ``modified``), of a component that is not parked,
        with no event inside its debounce and no writer holding it
        (:meth:`~staticpodd.daemon.writers.WriterHolds.hold_reason`). Whether to restore is
        :func:`plan_changes`' verdict on a change built from the bytes read here, under the lock:
        the same one the general way reaches after its scan. The engine restores only while the
        file still holds exactly these bytes (compared right before the rename), records them
        as a version by ``external`` with the restore (after a crash, :meth:`Engine.recover`
        does), and the reports the general way logs before the restore (the change, INVALID_LIVE)
        are logged after it, with the version the bytes got.
        """
        from ..engine import Change
        from ..node import fsops

        engine = self.engine
        path = self.layout.manifest_dir / name
        try:
            st = fsops.read_state(path)
        except StaticpodError:
            return False
        if st is None or st.is_symlink or len(st.data) > self.config.max_manifest_bytes:
            return False
        obs = engine.store.observed().get(f"live/{name}")
        digest = digest_of(st.data)
        if obs is None or obs.digest == digest or engine.store.park_of(obs.component) is not None:
            return False
        if name in self.writer_holds.busy_names() or self.writer_holds.scan_stats.get(name) is None:
            return False
        _ok, findings = engine.verdict(st.data, str(path), obs.component)
        change = Change(obs.component, name, "live", "modified", digest, None, False, findings)
        plan = plan_changes([change], self.config, sizes=self.writer_holds.sizes(), relist=self.writer_holds.relist())
        action = next((a for a in plan.actions if a.verb == "restore" and a.file_name == name), None)
        if action is None or self.writer_holds.hold_reason(name) is not None:
            return False
        try:
            res = engine.restore_last_good(name, reason=action.reason, unrecorded=st)
        except StaticpodError as exc:
            self._report_unrecorded(change, exc.details.get("external_version"))
            self._track_changes([change])  # still invalid: a problem until the file is fixed
            self._action_failed(action, exc)
            return True
        self._report_unrecorded(change, (res.extra or {}).get("external_version"))
        self._log_restored(action, res)
        return True

    def _report_unrecorded(self, change: Any, version: int | None) -> None:
        """Log what :func:`plan_changes` reports about ``change`` (a Change), now that its bytes
        are recorded as ``version`` (None: not as a version of their own)."""
        change.version = version
        holds = self.writer_holds
        for r in plan_changes([change], self.config, sizes=holds.sizes(), relist=holds.relist()).reports:
            self.log(r.event, r.message, priority=r.priority, **r.fields)

