"""What the daemon reports: problems, the STATUS= line, the summary, metrics and the heartbeat.

:class:`StatusMixin` turns the daemon's observed state into the current problem list
(:meth:`~StatusMixin.problems`), the sd_notify status line, the heartbeat payload (format in
:mod:`staticpodd.daemon.heartbeat`) and the node_exporter textfile (:mod:`staticpodd.daemon.metrics`),
recomputing ``engine.status()`` only when something it reads may have changed.
"""

from __future__ import annotations

import os
import time
from typing import Any

from .. import __version__
from ..errors import StaticpodError
from ..journal import WARNING, Event
from ..layout import under_root
from ..reconcile import status_line
from .base import DaemonBase, _get
from .heartbeat import HEARTBEAT_FORMAT, HEARTBEAT_INTERVAL, ProblemList, write_heartbeat


class StatusMixin(DaemonBase):
    """Problems, status line, summary, metrics and heartbeat of the running daemon."""

    def problems(self) -> ProblemList:
        """Every current problem, as dicts (``code, severity, path, component, message``): runtime,
        invalid live files, broken parks, live files named like another file's component (not
        tracked), then the directory findings that are errors or warnings (made into dicts by
        :func:`_problem_of` only when read)."""
        head = list(self.runtime_problems.values())
        head += list(self.invalid_live.values())
        head += list(self.broken_parks.values())
        head += list(self.names_taken.values())
        return ProblemList(head, self.dir_problems, _problem_of)

    def _status_line(self) -> str:
        return status_line(self.summary, self.problems())

    def _publish_status(self) -> None:
        status = self._status_line()
        if status != self._last_status:
            self.notifier.status(status)
            self._last_status = status

    def _heartbeat(self) -> None:
        problems = self.problems()
        data = {
            "format": HEARTBEAT_FORMAT,
            "pid": os.getpid(),
            "version": __version__,
            "root": str(self.root),
            "manifest_dir": str(self.layout.manifest_dir),
            "state": self.state,
            "ready": self.ready,
            "started_at": self.started_at,
            "last_loop": time.time(),
            "last_rescan": self.last_rescan,
            "heartbeat_interval": min(HEARTBEAT_INTERVAL, self.config.rescan_interval),
            "status": self._status_line(),
            "summary": {**self.summary, "problems": len(problems)},
            "problems": problems,
            "parks": self.parks,
            "config": {
                "path": self.config.source,
                "digest": self.config.digest,
                "generation": self.config_generation,
                "loaded_at": self.config_loaded_at,
            },
            "reload": self.reload_state,
            "cluster": self.publishing.state,
            "watch": {
                "watching": bool(self.watcher and self.watcher.watching),
                "generation": self.watcher.generation if self.watcher else 0,
                "error": self.watcher.error if self.watcher else None,
            },
        }
        try:
            write_heartbeat(self.layout.heartbeat_path, data, self._hb_encoder)
        except OSError as exc:
            if not self._heartbeat_failed:
                self._say(f"cannot write heartbeat {self.layout.heartbeat_path}: {exc.strerror}")
                self.log(Event.DAEMON_ERROR, f"cannot write the heartbeat {self.layout.heartbeat_path}: {exc.strerror}",
                         priority=WARNING, error="heartbeat-write-failed", path=str(self.layout.heartbeat_path))
            self._heartbeat_failed = True
        else:
            self._heartbeat_failed = False

    def _write_metrics(self, status: dict[str, Any]) -> None:
        """node_exporter textfile (``metrics.enabled``), from the status just computed."""
        metrics_cfg = self.config.metrics
        if not metrics_cfg.enabled or not metrics_cfg.textfile_dir:
            self.runtime_problems.pop("metrics", None)
            return
        from . import metrics

        directory = under_root(self.root, metrics_cfg.textfile_dir)
        try:
            snap = metrics.snapshot_from_status(
                status,
                self.last_findings,
                started_at=self.started_at,
                now=time.time(),
                previous=self._metrics_snapshot,
                history=metrics.store_counters(self.layout.db_path),
            )
            metrics.write_textfile(directory, metrics.render(snap))
        except StaticpodError as exc:
            if "metrics" not in self.runtime_problems:
                self._say(f"cannot write metrics: {exc}")
                self.log(Event.DAEMON_ERROR, f"cannot write the node_exporter textfile in {directory}: {exc.message}",
                         priority=WARNING, error="metrics-write-failed", path=str(directory))
            self.runtime_problems["metrics"] = {
                "code": "metrics-write-failed",
                "severity": "warning",
                "path": str(directory),
                "message": f"cannot write the node_exporter textfile: {exc.message}",
            }
            return
        self._metrics_snapshot = snap
        self.runtime_problems.pop("metrics", None)

    def _status_memo(self) -> Any:
        """``engine.status()``, recomputed only when something it reads may have changed: the
        manifest and parked directories' listings and stats (:mod:`staticpodd.node.dirprint`), the
        store (our own commits: ``total_changes``; anyone else's: ``PRAGMA data_version``), and
        the liveness of the processes behind recorded intents. An idle rescan of a large node
        then reads no file a second time."""
        from ..engine.fsfacts import pid_alive
        from ..node.dirprint import fingerprint
        from .findings import hashed

        store = self.engine.store
        try:
            key: Any = hashed((fingerprint(self.layout.manifest_dir, {}), fingerprint(self.layout.parked_dir, {}),
                               store._db.total_changes, store._db.execute("PRAGMA data_version").fetchone()[0],
                               tuple((i.id, pid_alive(i.pid)) for i in store.intents()),
                               tuple(sorted(self.engine.untrackable))))
        except Exception:  # noqa: BLE001 - a key we cannot build just means: compute it
            key = None
        cached = getattr(self, "_status_cache", None)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        status = self.engine.status()
        self._status_cache = (key, status) if key is not None else None
        return status

    def _refresh_summary(self) -> None:
        status = self._status_memo()
        data = status.to_dict() if hasattr(status, "to_dict") else dict(status)
        self._write_metrics(data)
        comps = data.get("components") or []
        counts = {"live": 0, "parked": 0, "missing": 0}
        for c in comps:
            st = c.get("state")
            if st in counts:
                counts[st] += 1
        self.summary = counts
        self.broken_parks = {
            c["file_name"]: {
                "code": "park-broken",
                "severity": "error",
                "component": c.get("component"),
                "path": str(self.layout.live_path(c["file_name"])),
                "message": f"{c['file_name']} is live again while {c.get('component')} is parked",
            }
            for c in comps
            if c.get("park_broken")
        }
        # a warning: what such a file does to a pod (refused, a twin) is the findings' to say
        self.names_taken = {
            t["file_name"]: {
                "code": "name-taken",
                "severity": "warning",
                "component": None,
                "path": str(self.layout.live_path(t["file_name"])),
                "message": f"{t['file_name']}: {t['reason']}; the kubelet reads it but staticpodd does not track it "
                           f"({t['hint']})",
            }
            for t in data.get("names_taken") or []
            if t.get("location") == "live"
        }
        parks = self.engine.store.parks()
        self.parks = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in parks]
        live_keys = {(p.component, p.until) for p in parks}
        self.failed_unparks = {k: v for k, v in self.failed_unparks.items() if k in live_keys}
        # a deadline unpark that failed is due again when its back-off is over
        deadlines = [
            (p.until if (p.component, p.until) not in self.failed_unparks
             else self.backoff.due(f"unpark:{p.component}", p.until))
            for p in parks if p.until is not None
        ]
        self.next_park_deadline = min(deadlines) if deadlines else None


def _problem_of(finding: Any) -> dict[str, Any]:
    """A directory finding as a heartbeat problem; the message starts with the file it is about."""
    path = str(_get(finding, "path") or "")
    message = str(_get(finding, "message") or "")
    name = os.path.basename(path.rstrip("/"))
    return {
        "code": _get(finding, "code"),
        "severity": _get(finding, "severity"),
        "path": path or None,
        "component": None,
        "message": f"{name}: {message}" if name else message,
    }
