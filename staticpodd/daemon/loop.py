"""The main loop and one reconcile pass.

:class:`LoopMixin` blocks on the wake-up pipe (inotify hints, signals) until the earliest of the
next debounced hint, full rescan, watchdog ping, park deadline, retry and heartbeat; then
reconciles (all names or the hinted ones: scan, plan, execute, refresh what it reports), prunes
by the retention policy, and retries what a lock timeout or an error left undone. On SIGTERM or
SIGINT it looks once more, at once, at what changed since its last pass (:meth:`LoopMixin.
_record_before_stop`), so that a write just before the stop is recorded by this daemon.
"""

from __future__ import annotations

import select
import sys
import time
from collections.abc import Iterable

from ..errors import StaticpodError
from ..journal import ERR, INFO, WARNING, Event
from ..node import fsops
from ..node.watch import DIRECTORY
from ..reconcile import Plan, finding_key, plan_changes, plan_expired_parks, plan_findings
from .base import RETRY_DELAY, TRIM_QUIET
from .execute import ExecuteMixin
from .heartbeat import HEARTBEAT_INTERVAL
from .memory import release_memory
from .onclose import CloseMixin
from .policies import PlanMixin


class LoopMixin(CloseMixin, PlanMixin, ExecuteMixin):
    """The event loop, reconcile scheduling and retries."""

    def _loop(self) -> None:
        assert self.hints is not None
        wd_interval = self.notifier.watchdog_interval()
        next_ping = time.monotonic()
        next_rescan = time.monotonic() + self.config.rescan_interval
        next_prune: float | None = time.monotonic()  # retention: the first prune right after READY, then every interval
        while True:
            now = time.monotonic()
            if wd_interval is not None and now >= next_ping:
                self.notifier.watchdog()
                next_ping = now + wd_interval
            if self._stop_signal is not None:
                self._record_before_stop()
                return
            if self.reloader.pending():
                self.reloader.reload()
                next_rescan = now  # policies or directory may have changed
            fsops.failpoint("daemon:loop")
            rewatched = self.watch.check()
            if self.exit_status is not None:
                return
            periodic = now >= next_rescan and not rewatched and not self.retries.full
            if rewatched:
                self._quiet_pass = None  # a new watch: events may have been missed, look at everything
            full = now >= next_rescan or rewatched or self.retries.full
            names = self._refused_on_close()  # looked at now, not after the debounce
            if not full:
                due = self.hints.take_due(now)
                if DIRECTORY in due:
                    full = True
                names |= {h.name for h in due if h.name}
                names |= self.retries.take_due(now)
            parks_due = self.next_park_deadline is not None and time.time() >= self.next_park_deadline
            if full and periodic and not names and self._quiet_unchanged():
                self._quiet_rescan()
                next_rescan = time.monotonic() + self.config.rescan_interval
            elif full:
                self.hints.discard(DIRECTORY)
                self._reconcile(full=True)
                next_rescan = time.monotonic() + self.config.rescan_interval
            elif names or parks_due:
                self._reconcile(names=sorted(names))
            if full or names or parks_due:
                self._trim_after = time.monotonic() + TRIM_QUIET
            next_prune = self._prune_if_due(next_prune)
            self.reporter.publish_status()
            self.reporter.heartbeat()
            journal_idle = getattr(self.journal, "idle", lambda: True)()
            if self._trim_due and journal_idle and time.monotonic() >= self._trim_after:
                # after a validation of the directory, once its reports are sent and nothing has
                # been done for TRIM_QUIET: a write that comes meanwhile is served first
                release_memory()
                self._trim_due = False
            # sleep until the next thing to do
            now = time.monotonic()
            wake = [next_rescan, now + HEARTBEAT_INTERVAL]
            if self._trim_due:  # while the journal is still sending, look again a second later
                wake.append(max(self._trim_after, now if journal_idle else now + 1.0))
            if next_prune is not None:
                wake.append(next_prune)
            if wd_interval is not None:
                wake.append(next_ping)
            nd = self.hints.next_deadline()
            if nd is not None:
                wake.append(nd)
            if self.next_park_deadline is not None:
                wake.append(now + max(0.0, self.next_park_deadline - time.time()) + 0.01)
            retry_at = self.retries.wake_at()
            if retry_at is not None:
                wake.append(retry_at)
            if self.watcher is not None and not self.watcher.watching:
                wake.append(now + 1.0)  # directory missing or watch failed: poll it
            timeout = max(0.0, min(wake) - now)
            if self._stop_signal is not None or self.reloader.pending():
                timeout = 0.0
            try:
                select.select([self.hints.fileno()], [], [], timeout)
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
                pass
            self.hints.drain()

    def _record_before_stop(self) -> None:
        """On a stop signal: reconcile, once and without waiting for their debounce, the names
        that changed since the last pass and whose writers are done, so that a write made just
        before ``systemctl stop`` is recorded (a version by ``external``, its journal entries)
        by this daemon, not only by the next one's start-up pass.

        The names are those with a pending hint (an event still inside its debounce, a close, a
        retry) and those whose stat (size, mtime, inode) differs from the snapshot the last pass
        took, or that appeared or went since (an event the watch has not delivered yet when the
        signal is handled). A name someone still holds open for writing (the kernel's read lease
        says so, :func:`staticpodd.node.writelease.open_for_writing`; where it cannot say, inotify saw
        it change and not yet close: a close event may still be on its way when the writer is
        done) is left alone: its bytes may be half written, and the next start-up's full pass
        records them. A pending DIRECTORY hint (the directory replaced) and a full pass being
        retried are left to that pass too. Nothing changed: no pass, no wait. The pass is the
        loop's own (:meth:`_reconcile`: scan, record, act by policy, report); it waits for the
        lock as any pass does (not when the last pass gave up waiting for it: a stop does not
        wait twice for a long staticpodctl operation), and a failure is reported and left to the
        next start."""
        from ..node.writelease import open_for_writing

        assert self.hints is not None
        if "lock" in self.problems:
            return  # the last pass already waited its lock_wait for a staticpodctl: not a second time
        # No hint may arrive during this pass: the late event of a write made just before the
        # signal would make its file look busy to the executor after the policies had judged it
        # (INVALID_LIVE said "restoring", and the stop left the bad bytes live). Changes whose
        # events are not in yet are found by their stat below.
        if self.watcher is not None:
            self.watcher.stop()
        names = {h.name for h in self.hints.take_all() if h.name} | self.hints.take_closed() | self.retries.take_all()
        now = self.writer_holds.live_stats()
        before = self.writer_holds.scan_stats
        names |= {n for n in now.keys() | before.keys() if now.get(n) != before.get(n)}
        ready = set()
        for name in names:
            writing = open_for_writing(self.layout.manifest_dir / name) if name in now else False
            if writing is None:  # the kernel cannot say: what inotify saw (changed, not yet closed)
                writing = self.hints.writes.since(name) is not None
            if not writing:
                ready.add(name)
        if ready:
            self._reconcile(names=sorted(ready))

    def _prune_if_due(self, next_prune: float | None) -> float | None:
        """Prune under the retention policy (``retention:``, :mod:`staticpodd.store.retention`) when
        ``next_prune`` (monotonic) has come; returns the next due time (None: no policy). A
        failure (lock timeout, full disk) is reported and retried at the next interval."""
        from ..store.retention import policy_for, prune

        policy = policy_for(self.config)
        if not policy.active:
            return time.monotonic() + 60.0  # look again (a SIGHUP may set one)
        if next_prune is not None and time.monotonic() < next_prune:
            return next_prune
        try:
            with self.engine.locked():
                res = prune(self.engine, policy, time.time())
            self.problems.clear("prune")
            if res.components:
                self._refresh_summary()
        except StaticpodError as exc:
            self._say(f"prune failed: {exc}")
            self.problems.set("prune", {"code": exc.code, "severity": "warning",
                                        "path": str(self.layout.db_path), "message": exc.message})
        return time.monotonic() + policy.interval

    def _reconcile(self, *, full: bool = False, names: Iterable[str] = (), recover: bool = False) -> None:
        """Scan (all or some names), act by policy, refresh summary/problems. Never raises a
        StaticpodError except on ``recover`` (start-up: the daemon must not say READY)."""
        from ..errors import LockTimeout

        names = list(names)
        if not self.layout.manifest_dir.is_dir():
            # Nothing to scan: the watch reports the missing directory (manifest-dir-missing) and
            # a full rescan follows when it comes back. The engine refuses to work on it meanwhile
            # (recovery of interrupted operations runs at its first lock after that).
            self.reporter.no_files()
            self.finding_keys = set()
            self.last_findings = []
            self.problems.clear("reconcile")
            self.retries.full = False
            if full:
                self.last_rescan = time.time()
            return
        try:
            with self.engine.locked():
                self._reconcile_locked(full, names, recover)
            self.problems.clear("lock")
            self.retries.full = False
            if full:
                self.last_rescan = time.time()
                self._trim_due = True  # a full pass (not a quiet one) read and built much: give it back
                if self.watcher is not None:
                    self.watcher.reset_error()
        except LockTimeout as exc:
            if recover:
                raise
            self._lock_timed_out(exc, full, names)
        except StaticpodError as exc:
            if recover:
                raise
            self._reconcile_failed(exc, full, names)
        except Exception as exc:  # keep serving: a bug in one pass must not stop the watch
            if recover:
                raise
            self._reconcile_crashed(exc, full, names)
        else:
            self.problems.clear("reconcile")

    def _reconcile_locked(self, full: bool, names: list[str], recover: bool) -> None:
        """One pass under the lock: scan, plan by policy (changes, invalid files, findings,
        expired parks), execute, and refresh what the daemon reports."""
        if recover:  # locked() has run Engine.recover() on its first acquisition
            for item in getattr(self.engine, "last_recovery", None) or []:
                self._say(f"recovered an interrupted {item.get('op')} of {item.get('file_name')} "
                          f"({item.get('component')}): {item.get('outcome')}")
        self._quiet_pass = None
        dir_key = None
        if full:
            # Names with events still inside their quiet time are being written right
            # now: reading them would catch a half-written file. Their debounced hint
            # looks at them once the writer is done.
            busy = self.writer_holds.busy_names()
            scope = None if not busy else sorted(self._all_names() - busy)
            dir_key = None if busy else self._dir_key()  # before anything is read
        else:
            scope = names
        self.writer_holds.snapshot()
        changes = self.engine.scan(scope, validate=True, log=False)
        plan = plan_changes(changes, self.config, sizes=self.writer_holds.sizes(),
                            relist=self.writer_holds.relist())
        self._track_changes(changes)
        if full or names or changes:
            found = self.last_findings = self._directory_findings()
            # the live files' current validity, not only what changed: a file that was
            # invalid before we looked (a crash mid-restore, a skipped busy file) gets the
            # on_invalid policy too
            plan.extend(self._plan_invalid_files(found, changes, plan))
            findings = self._true_findings(found, plan)
            plan.extend(plan_findings(findings, self.config, self.finding_keys, protect=self._restoring(plan)))
            self.finding_keys = {finding_key(f) for f in findings}
            self.problems.set_directory(findings)
        expired = self.engine.store.expired_parks(time.time())
        expired = [p for p in expired if (p.component, p.until) not in self.failed_unparks
                   or time.time() >= self.backoff.due(f"unpark:{p.component}", 0.0)]
        plan.extend(plan_expired_parks(expired, time.time()))
        self._execute(plan)
        if plan.actions:  # the directory changed under our hands: refresh what we report
            found = self.last_findings = self._directory_findings()
            findings = self._true_findings(found, Plan())
            self.finding_keys = {finding_key(f) for f in findings}
            self.problems.set_directory(findings)
        self._refresh_summary()
        if full or names or plan.actions:
            self._remove_lone_private_dir()
        if dir_key is not None and not changes and not plan.actions and not self._quiet_blocked():
            # (its reports, if any, said what is new: a second pass would find it known)
            self._quiet_pass = (dir_key, self._store_key())  # the next periodic pass may skip

    def _lock_timed_out(self, exc: StaticpodError, full: bool, names: list[str]) -> None:
        """The lock stayed taken: report it once as a warning and retry the pass later."""
        if "lock" not in self.problems:
            self._say(f"{exc}; retrying every {RETRY_DELAY:g} s")
            self.log(Event.DAEMON_ERROR, f"{exc.message}; retrying every {RETRY_DELAY:g} s", priority=WARNING,
                     error="lock-timeout")
        self.problems.set("lock", {
            "code": "lock-timeout",
            "severity": "warning",
            "path": str(self.layout.lock_path),
            "message": exc.message,
        })
        self._retry_later(full, names)

    def _reconcile_failed(self, exc: StaticpodError, full: bool, names: list[str]) -> None:
        """A pass failed (a full disk …): report it once per message and retry the pass later."""
        if (self.problems.get("reconcile") or {}).get("message") != exc.message:
            # once per failure (a full disk retries every second)
            self._say(f"reconcile failed: {exc}")
            self.log(Event.DAEMON_ERROR, f"reconcile failed: {exc}", priority=ERR, error="reconcile-failed",
                     code=exc.code, path=exc.path)
        self.problems.set("reconcile", {
            "code": exc.code,
            "severity": "error",
            "path": exc.path,
            "message": exc.message,
        })
        self._retry_later(full, names)

    def _reconcile_crashed(self, exc: Exception, full: bool, names: list[str]) -> None:
        """A bug in a pass: log it with its traceback (called inside the ``except``), keep serving,
        and retry the pass later."""
        import traceback

        if not self._stderr_is_journal():
            traceback.print_exc(file=sys.stderr)
        if (self.problems.get("reconcile") or {}).get("code") != "internal-error":
            self.log(Event.DAEMON_ERROR, f"internal error during reconcile (still serving): {type(exc).__name__}: "
                     f"{exc}", priority=ERR, error="internal-error", traceback=traceback.format_exc())
        self.problems.set("reconcile", {
            "code": "internal-error",
            "severity": "error",
            "path": None,
            "message": f"{type(exc).__name__}: {exc}",
        })
        self._retry_later(full, names)

    def _quiet_rescan(self) -> None:
        """A periodic full rescan found to change nothing (:meth:`_quiet_unchanged`): only what a
        full pass always refreshes is refreshed (its time, a failed watch retried, the metrics
        textfile, whose mtime node_exporter exports and users alert on)."""
        self.last_rescan = time.time()
        if self.watcher is not None:
            self.watcher.reset_error()
        if self.config.metrics.enabled:
            try:
                with self.engine.locked():
                    self._refresh_summary()
            except StaticpodError:
                self._quiet_pass = None  # the next pass runs in full and reports what fails

    def _refresh_summary(self) -> None:
        """Under the lock: what the daemon reports (:meth:`StatusReporter.refresh`: summary,
        problems, metrics), then the parks and the next park deadline (a deadline unpark that
        failed is due again when its back-off is over)."""
        self.reporter.refresh(self.last_findings)
        parks = self.engine.store.parks()
        self.parks = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in parks]
        live_keys = {(p.component, p.until) for p in parks}
        self.failed_unparks = {k: v for k, v in self.failed_unparks.items() if k in live_keys}
        deadlines = [
            (p.until if (p.component, p.until) not in self.failed_unparks
             else self.backoff.due(f"unpark:{p.component}", p.until))
            for p in parks if p.until is not None
        ]
        self.next_park_deadline = min(deadlines) if deadlines else None

    def _remove_lone_private_dir(self) -> None:
        """Under the lock: an empty ``.staticpodd/`` that is all the manifest directory holds goes
        (an "is the directory empty" check counts dot-entries; see
        :func:`staticpodd.node.fsops.remove_private_dir_if_alone`)."""
        from ..node import fsops

        if self.parks or not self.layout.private_dir.is_dir():
            return
        if fsops.remove_private_dir_if_alone(self.layout):
            self.log(
                Event.STAGING_SWEPT,
                f"removed the empty {self.layout.private_dir} (nothing else was in the manifest directory; "
                "a check that the directory is empty counts dot-entries)",
                priority=INFO,
                finding="private-dir-removed",
            )

    def _all_names(self) -> set[str]:
        """Every file name a full scan covers: live, parked, and recorded as seen (removals)."""
        names = set(self.engine.live_names()) | set(self.engine.parked_names())
        names |= {o.file_name for o in self.engine.store.observed().values()}
        return names

    def _retry_later(self, full: bool, names: list[str]) -> None:
        self.retries.later(names, at=time.monotonic() + RETRY_DELAY, full=full)
