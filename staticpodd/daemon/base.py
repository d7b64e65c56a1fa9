"""The state one running daemon keeps, and what every part of it needs.

:class:`DaemonBase` declares every attribute of :class:`staticpodd.daemon.Daemon` (so that each
mixin in its own module is type-checked against the same state), builds the parts that keep
state of their own (the problem board, the status reporter, the watch keeper, writer holds, the
findings cache, the retry queue and back-off: each an object behind its own methods, given its
collaborators; the reloader is built by ``Daemon``), and holds the few methods all of them call:
logging to the journal and to stderr, loading the configuration, and building the engine from
it. The loop's timing constants shared by several parts live here too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..cluster.hook import ClusterHook
from ..config import Config, load_config
from ..journal import INFO, Event, Journal
from ..layout import Layout, under_root
from ..node.notify import Notifier
from ..node.watch import Hints, Watcher
from .bgjournal import BackgroundJournal
from .findings import FindingsCache
from .options import validate_options
from .problems import Problems
from .publishing import ClusterPublishing
from .reload import Reloader
from .retries import Backoff, RetryQueue
from .status import StatusReporter
from .watching import WatchKeeper
from .writers import WriterHolds

#: Retry delay after a lock timeout or an unexpected error in one reconcile, seconds.
RETRY_DELAY = 1.0
#: A restore or a deadline unpark the engine refused is tried again on a later pass after this
#: many seconds, doubled after each failed retry up to :data:`BACKOFF_MAX` (a full disk frees up,
#: a duplicate or a port clash goes away): never only when the daemon restarts.
BACKOFF_FIRST = 2.0
BACKOFF_MAX = 300.0
#: Longest single wait for the lock in the main loop, seconds (see Daemon.lock_wait).
LOCK_WAIT_MAX = 5.0
#: While a restore or quarantine waits for a writer to close the file, it is looked at again this
#: often (seconds), besides the inotify close-write event: a missed event never leaves it waiting.
HOLD_RECHECK = 1.0
#: Seconds without work before the loop gives freed memory back (``release_memory``: a garbage
#: collection and ``malloc_trim``, about 9 ms): never while a write may be waiting for a restore.
TRIM_QUIET = 1.0
#: Pid file under ``Layout.run_dir``: the running daemon holds an exclusive flock on it (one
#: daemon per --root) and writes its pid into it.
PID_FILE = "staticpodd.pid"


class DaemonBase:
    """The daemon's state (see :class:`staticpodd.daemon.Daemon`) and its shared helpers."""

    #: the SIGHUP reload (:mod:`staticpodd.daemon.reload`): built by ``Daemon``, which installs
    #: what it loads (the watch is the daemon's)
    reloader: Reloader

    def __init__(self, args: argparse.Namespace, *, notifier: Notifier | None = None) -> None:
        self.args = args
        self.root = Path(os.path.abspath(args.root))
        self.notifier = notifier or Notifier()
        self.journal: Journal = BackgroundJournal("staticpodd", str(self.root))
        # the cluster view (cluster.publish): what this daemon logs is queued for the Node, and one
        # thread of its own publishes it (staticpodd.daemon.publishing)
        self.journal.observers.append(ClusterHook(lambda: self.layout, lambda: self.config))
        self.publishing = ClusterPublishing(self.log, self._say)
        self.config: Config = Config.default()
        self.layout: Layout = Layout.build(self.root, args.manifest_dir)
        self.config_generation = 0
        self.config_loaded_at: float | None = None
        self.engine: Any = None
        self.hints: Hints | None = None
        self.watcher: Watcher | None = None
        # signal flags (set by handlers, consumed by the main loop)
        self._stop_signal: int | None = None
        # observed state
        self.state = "starting"
        self.ready = False
        self.started_at = time.time()
        self.last_rescan: float | None = None
        self.parks: list[dict[str, Any]] = []
        self.next_park_deadline: float | None = None  # epoch seconds
        self.finding_keys: set[tuple[str, str, str]] = set()
        # what is wrong now (staticpodd.daemon.problems): every part reports to it and clears from it
        self.problems = Problems()
        # the STATUS= line, the summary, the metrics textfile and the heartbeat (daemon.status)
        self.reporter = StatusReporter(
            problems=self.problems, notifier=self.notifier, root=self.root, started_at=self.started_at,
            layout=lambda: self.layout, config=lambda: self.config, engine=lambda: self.engine,
            facts=self._heartbeat_facts, log=lambda *a, **kw: self.log(*a, **kw), say=lambda text: self._say(text))
        self.failed_unparks: dict[tuple[str, float], str] = {}
        # names (or a full pass) to look at again, and when (staticpodd.daemon.retries)
        self.retries = RetryQueue()
        self.last_findings: list[Any] = []  # everything validate_directory found last time
        # the directory's findings as last validated, also kept in the store, and each live file's
        # own findings by digest: a pass validates the files that changed (daemon.findings)
        self.findings_cache = FindingsCache(store=lambda: self.engine.store,
                                            manifest_dir=lambda: self.layout.manifest_dir)
        self._pid_fd: int | None = None  # the flocked pid file (one daemon per --root)
        # the back-off of an action the engine refused, and the restores that failed on the bytes
        # now live (see ExecuteMixin._action_failed)
        self.backoff = Backoff(first=BACKOFF_FIRST, most=BACKOFF_MAX)
        self._valid_digests: dict[str, bool] = {}  # digest -> passes validation (memo)
        # the live files' stats before the last scan, and the writers that hold a restore or
        # quarantine back (staticpodd.daemon.writers)
        self.writer_holds = WriterHolds(layout=lambda: self.layout, hints=lambda: self.hints,
                                        log=lambda *a, **kw: self.log(*a, **kw))
        # set when the daemon must exit with this status (EXIT_SANDBOX: the manifest directory
        # appeared read-only in our sandbox; systemd restarts us into one that binds it)
        self.exit_status: int | None = None
        # the inotify watch's state changes and the directory's writability (daemon.watching)
        self.watch = WatchKeeper(watcher=lambda: self.watcher, layout=lambda: self.layout, problems=self.problems,
                                 log=lambda *a, **kw: self.log(*a, **kw), say=lambda text: self._say(text),
                                 exit=self._exit_after_pass)
        # set after work that leaves freed memory behind (a validation of the directory, a full
        # pass, the start-up); the loop gives it back once the journal has sent what it queued
        self._trim_due = False
        self._trim_after = 0.0  # monotonic time before which the loop does not trim (TRIM_QUIET)

    def _exit_after_pass(self, status: int) -> None:
        """Have the loop return after this pass, and the daemon exit with ``status``."""
        self.exit_status = status

    def _heartbeat_facts(self) -> dict[str, Any]:
        """The heartbeat's entries the daemon keeps (:meth:`StatusReporter.heartbeat_data` adds its own)."""
        return {
            "state": self.state,
            "ready": self.ready,
            "started_at": self.started_at,
            "last_rescan": self.last_rescan,
            "parks": self.parks,
            "config": {
                "path": self.config.source,
                "digest": self.config.digest,
                "generation": self.config_generation,
                "loaded_at": self.config_loaded_at,
            },
            "reload": self.reloader.state,
            "cluster": self.publishing.state,
            "watch": {
                "watching": bool(self.watcher and self.watcher.watching),
                "generation": self.watcher.generation if self.watcher else 0,
                "error": self.watcher.error if self.watcher else None,
            },
        }

    def _layout_for(self, cfg: Config) -> Layout:
        if self.args.manifest_dir:
            return Layout.build(self.root, self.args.manifest_dir)
        if cfg.manifest_dir:
            return Layout.build(self.root, under_root(self.root, cfg.manifest_dir))
        return Layout.build(self.root)

    def _load_config(self) -> Config:
        if self.args.config:
            cfg = load_config(path=self.args.config)
        else:
            cfg = load_config(self.layout)  # config_path does not depend on the manifest directory
        validate_options(cfg)  # refuses an unsupported kubernetes_version now, not at first use
        return cfg

    def _build_engine(self) -> Any:
        from ..engine import Actor, Engine

        return Engine(
            self.layout,
            actor=Actor.daemon(),
            journal=self.journal,
            config=self.config,
            lock_timeout=self.lock_wait(),
        )

    def lock_wait(self) -> float:
        """Seconds one lock attempt of the daemon may block: ``lock_timeout``, but at most
        :data:`LOCK_WAIT_MAX` and half the watchdog interval, so that a long staticpodctl
        operation never starves the watchdog; the daemon retries every :data:`RETRY_DELAY`."""
        wait = min(float(self.config.lock_timeout), LOCK_WAIT_MAX)
        wd = self.notifier.watchdog_interval()
        if wd is not None:
            wait = min(wait, max(0.1, wd / 2))
        return wait

    def log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        """One journald entry from the daemon (actor staticpodd unless given)."""
        fields.setdefault("actor", "staticpodd")
        fields.setdefault("manifest_dir", str(self.layout.manifest_dir))
        self.journal.log(event, message, priority=priority, **fields)

    def _say(self, text: str) -> None:
        """A plain stderr line, for a human running the daemon by hand. Left out when stderr is
        itself the journal (systemd's ``JOURNAL_STREAM``) and entries reach journald natively:
        every such line has its native entry (MESSAGE_ID, priority), and the copy would land in
        the journal again as a bare priority-6 line."""
        if self._stderr_is_journal():
            return
        from ..termsafe import one_line

        try:
            print(f"staticpodd: {one_line(text)}", file=sys.stderr, flush=True)  # names: no forged lines
        except OSError:
            pass

    _stderr_journal: bool | None = None

    def _stderr_is_journal(self) -> bool:
        if self._stderr_journal is None:
            from ..journal import journal_status

            stream = os.environ.get("JOURNAL_STREAM", "")
            try:
                st = os.fstat(sys.stderr.fileno())
                same = bool(stream) and stream == f"{st.st_dev}:{st.st_ino}"
            except (OSError, ValueError, AttributeError):
                same = False
            self._stderr_journal = same and journal_status()[0] and os.environ.get("STATICPODD_NO_JOURNAL") != "1"
        return self._stderr_journal
