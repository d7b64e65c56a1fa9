"""What the daemon reports: the STATUS= line, the summary, metrics and the heartbeat.

:class:`StatusReporter` is one part of the daemon, built with its collaborators (the notifier,
getters of the current layout, configuration and engine, the journal's log function, the
daemon's own facts for the heartbeat) and the :class:`~staticpodd.daemon.problems.Problems` board
the other parts report to. From them it makes the sd_notify status line, the heartbeat payload
(format in :mod:`staticpodd.daemon.heartbeat`) and the node_exporter textfile
(:mod:`staticpodd.daemon.metrics`), recomputing ``engine.status()`` only when something it reads
may have changed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Config
from ..errors import StaticpodError
from ..journal import WARNING, Event
from ..layout import Layout, under_root
from ..node.notify import Notifier
from ..reconcile import status_line
from .heartbeat import HEARTBEAT_FORMAT, HEARTBEAT_INTERVAL, HeartbeatEncoder, ProblemList, write_heartbeat
from .problems import Problems

#: What the daemon's ``log`` takes: ``log(event, message, *, priority=..., **fields)``.
LogFn = Callable[..., None]


class StatusReporter:
    """The status line, summary, metrics textfile and heartbeat of one running daemon.

    ``problems``: the board every part reports to (read here, and ``metrics`` set and cleared);
    ``root``: the daemon's --root; ``started_at``: epoch seconds of the daemon's start;
    ``layout``, ``config``, ``engine``: getters of the current ones (a reload replaces them);
    ``facts``: the rest of the heartbeat, which the daemon keeps (``state``, ``ready``,
    ``started_at``, ``last_rescan``, ``parks``, ``config``, ``reload``, ``cluster``, ``watch``);
    ``log``: a journal entry (``log(event, message, priority=..., **fields)``); ``say``: a
    stderr line for a human.
    """

    def __init__(self, *, problems: Problems, notifier: Notifier, root: Path, started_at: float,
                 layout: Callable[[], Layout], config: Callable[[], Config], engine: Callable[[], Any],
                 facts: Callable[[], dict[str, Any]], log: LogFn, say: Callable[[str], None]) -> None:
        self.problems = problems
        self._notifier = notifier
        self._root = root
        self._started_at = started_at
        self._layout = layout
        self._config = config
        self._engine = engine
        self._facts = facts
        self._log = log
        self._say = say
        #: ``{"live": n, "parked": n, "missing": n}`` as of the last :meth:`refresh`
        self.summary: dict[str, Any] = {"live": 0, "parked": 0, "missing": 0}
        self._last_status: str | None = None  # the STATUS= last sent
        self._heartbeat_failed = False  # the last heartbeat write failed (logged once)
        self._encoder = HeartbeatEncoder()  # re-encodes the problem list only when it changed
        self._metrics_snapshot: Any = None
        self._status_cache: tuple[Any, Any] | None = None  # (key, engine.status()) of the last refresh

    def listing(self) -> ProblemList:
        """Every current problem, as dicts (:meth:`Problems.listing`)."""
        return self.problems.listing()

    def status_line(self) -> str:
        """The STATUS= line: one short line of the summary and the problems."""
        return status_line(self.summary, self.listing())

    def publish_status(self) -> None:
        """Send STATUS= when the line changed since the last one sent."""
        status = self.status_line()
        if status != self._last_status:
            self._notifier.status(status)
            self._last_status = status

    def ready(self, status: str) -> None:
        """Send READY=1 with the STATUS= line ``status`` (as :meth:`status_line` made it)."""
        self._notifier.ready(status)
        self._last_status = status

    def no_files(self) -> None:
        """The manifest directory is missing: nothing live, parked or missing, and no problem
        about a file in it."""
        self.problems.directory_gone()
        self.summary = {"live": 0, "parked": 0, "missing": 0}

    def heartbeat_data(self) -> dict[str, Any]:
        """The heartbeat's payload (format :data:`HEARTBEAT_FORMAT`): ours, then the daemon's facts."""
        problems = self.listing()
        config = self._config()
        return {
            "format": HEARTBEAT_FORMAT,
            "pid": os.getpid(),
            "version": __version__,
            "root": str(self._root),
            "manifest_dir": str(self._layout().manifest_dir),
            "last_loop": time.time(),
            "heartbeat_interval": min(HEARTBEAT_INTERVAL, config.rescan_interval),
            "status": self.status_line(),
            "summary": {**self.summary, "problems": len(problems)},
            "problems": problems,
            **self._facts(),
        }

    def heartbeat(self) -> None:
        """Rewrite the heartbeat file atomically. A failed write is said and journalled once
        (until one succeeds again), never raised."""
        data = self.heartbeat_data()
        path = self._layout().heartbeat_path
        try:
            write_heartbeat(path, data, self._encoder)
        except OSError as exc:
            if not self._heartbeat_failed:
                self._say(f"cannot write heartbeat {path}: {exc.strerror}")
                self._log(Event.DAEMON_ERROR, f"cannot write the heartbeat {path}: {exc.strerror}",
                          priority=WARNING, error="heartbeat-write-failed", path=str(path))
            self._heartbeat_failed = True
        else:
            self._heartbeat_failed = False

    def write_metrics(self, status: dict[str, Any], findings: list[Any]) -> None:
        """node_exporter textfile (``metrics.enabled``), from ``status`` (``engine.status()`` as a
        dict) and the directory's last ``findings``. A failed write is the problem ``metrics``
        (said and journalled when it starts), never raised."""
        config = self._config()
        metrics_cfg = config.metrics
        if not metrics_cfg.enabled or not metrics_cfg.textfile_dir:
            self.problems.clear("metrics")
            return
        from . import metrics

        directory = under_root(self._root, metrics_cfg.textfile_dir)
        try:
            snap = metrics.snapshot_from_status(
                status,
                findings,
                started_at=self._started_at,
                now=time.time(),
                previous=self._metrics_snapshot,
                history=metrics.store_counters(self._layout().db_path),
            )
            metrics.write_textfile(directory, metrics.render(snap))
        except StaticpodError as exc:
            if "metrics" not in self.problems:
                self._say(f"cannot write metrics: {exc}")
                self._log(Event.DAEMON_ERROR, f"cannot write the node_exporter textfile in {directory}: {exc.message}",
                          priority=WARNING, error="metrics-write-failed", path=str(directory))
            self.problems.set("metrics", {
                "code": "metrics-write-failed",
                "severity": "warning",
                "path": str(directory),
                "message": f"cannot write the node_exporter textfile: {exc.message}",
            })
            return
        self._metrics_snapshot = snap
        self.problems.clear("metrics")

    def engine_status(self) -> Any:
        """``engine.status()``, recomputed only when something it reads may have changed: the
        manifest and parked directories' listings and stats (:mod:`staticpodd.node.dirprint`), the
        store (our own commits: ``total_changes``; anyone else's: ``PRAGMA data_version``), and
        the liveness of the processes behind recorded intents. An idle rescan of a large node
        then reads no file a second time."""
        from ..engine.fsfacts import pid_alive
        from ..node.dirprint import fingerprint
        from .findings import hashed

        engine = self._engine()
        layout = self._layout()
        store = engine.store
        try:
            key: Any = hashed((fingerprint(layout.manifest_dir, {}), fingerprint(layout.parked_dir, {}),
                               store._db.total_changes, store._db.execute("PRAGMA data_version").fetchone()[0],
                               tuple((i.id, pid_alive(i.pid)) for i in store.intents()),
                               tuple(sorted(engine.untrackable))))
        except Exception:  # noqa: BLE001 - a key we cannot build just means: compute it
            key = None
        cached = self._status_cache
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        status = engine.status()
        self._status_cache = (key, status) if key is not None else None
        return status

    def refresh(self, findings: list[Any]) -> None:
        """Under the lock: ``engine.status()`` (:meth:`engine_status`) into the metrics textfile
        (with the directory's last ``findings``), the summary, and the problems it shows (broken
        parks, live files named like another file's component)."""
        status = self.engine_status()
        data = status.to_dict() if hasattr(status, "to_dict") else dict(status)
        self.write_metrics(data, findings)
        comps = data.get("components") or []
        counts = {"live": 0, "parked": 0, "missing": 0}
        for c in comps:
            st = c.get("state")
            if st in counts:
                counts[st] += 1
        self.summary = counts
        layout = self._layout()
        broken_parks = {
            c["file_name"]: {
                "code": "park-broken",
                "severity": "error",
                "component": c.get("component"),
                "path": str(layout.live_path(c["file_name"])),
                "message": f"{c['file_name']} is live again while {c.get('component')} is parked",
            }
            for c in comps
            if c.get("park_broken")
        }
        # a warning: what such a file does to a pod (refused, a twin) is the findings' to say
        names_taken = {
            t["file_name"]: {
                "code": "name-taken",
                "severity": "warning",
                "component": None,
                "path": str(layout.live_path(t["file_name"])),
                "message": f"{t['file_name']}: {t['reason']}; the kubelet reads it but staticpodd does not track it "
                           f"({t['hint']})",
            }
            for t in data.get("names_taken") or []
            if t.get("location") == "live"
        }
        self.problems.set_from_status(broken_parks=broken_parks, names_taken=names_taken)
