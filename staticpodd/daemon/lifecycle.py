"""The daemon's lifecycle: one daemon per --root, start-up to READY=1, signals, stop.

:class:`Daemon` takes the pid-file flock, loads the configuration (invalid: exit 78), installs
the signal handlers (flags only; the wake-up fd makes the loop notice them), builds the engine
and the watch, recovers and reconciles once (waiting for the lock as long as it takes), says
READY=1 and DAEMON_STARTED, serves (:mod:`staticpodd.daemon.loop`) and says STOPPING=1 and
DAEMON_STOPPING on the way out.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import time
from typing import Any

from .. import __version__
from ..config import Config
from ..errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, ConfigError, StaticpodError
from ..journal import ERR, NOTICE, WARNING, Event
from ..layout import Layout
from ..node.notify import Notifier
from ..node.watch import Hints, Watcher, hidden_from_proc
from .base import PID_FILE, RETRY_DELAY, TRIM_QUIET
from .loop import LoopMixin
from .reload import Reloader


class Daemon(LoopMixin):
    """One running staticpodd. ``run()`` returns the process exit status.

    Composed of one mixin per part of the loop (all over the state declared in
    :class:`~staticpodd.daemon.base.DaemonBase`): the loop and reconcile
    (:mod:`~staticpodd.daemon.loop`), policy planning (:mod:`~staticpodd.daemon.policies`) and
    execution (:mod:`~staticpodd.daemon.execute`); the lifecycle is here. The parts with state
    of their own are objects it holds, each behind its own methods and built with its
    collaborators: ``problems`` (:class:`~staticpodd.daemon.problems.Problems`), ``reporter``
    (:class:`~staticpodd.daemon.status.StatusReporter`: STATUS=, heartbeat, metrics),
    ``reloader`` (:class:`~staticpodd.daemon.reload.Reloader`: SIGHUP; built here, since what it
    loads is installed by :meth:`_install_config`, which moves the watch), ``writer_holds``
    (:class:`~staticpodd.daemon.writers.WriterHolds`), ``findings_cache``
    (:class:`~staticpodd.daemon.findings.FindingsCache`), ``retries`` and ``backoff``
    (:class:`~staticpodd.daemon.retries.RetryQueue`, :class:`~staticpodd.daemon.retries.Backoff`),
    ``publishing`` (:class:`~staticpodd.daemon.publishing.ClusterPublishing`), ``watch``
    (:class:`~staticpodd.daemon.watching.WatchKeeper`: the watch's state changes).
    """

    def __init__(self, args: argparse.Namespace, *, notifier: Notifier | None = None) -> None:
        super().__init__(args, notifier=notifier)
        self.reloader = Reloader(
            load=self._read_config, install=self._install_config, forget=self._forget_verdicts,
            set_state=self._set_state, generation=lambda: self.config_generation, reporter=self.reporter,
            notifier=self.notifier, log=lambda *a, **kw: self.log(*a, **kw), say=lambda text: self._say(text))

    def _set_state(self, state: str) -> None:
        self.state = state

    def _read_config(self) -> tuple[Config, Layout]:
        """The configuration and the layout it names; raises ConfigError when it is invalid."""
        cfg = self._load_config()
        return cfg, self._layout_for(cfg)

    def _forget_verdicts(self) -> None:
        """Before a reload: what was judged under the old configuration is judged anew."""
        self.backoff.due_now()  # a reload is a reason to try failed restores again, and at once
        self._valid_digests.clear()  # verdicts depend on kubernetes_version, max_manifest_bytes …
        # the directory findings too (their key covers the options; a reload is also how to have
        # what it cannot cover, such as a hostPath created since, looked at again), and every
        # file's: a reload judges the whole directory anew
        self.findings_cache.forget()

    def _install_config(self, cfg: Config, layout: Layout) -> None:
        """Make the reloaded ``cfg`` (and the ``layout`` it names) the daemon's: a new generation,
        a new engine, and the watch moved when the manifest directory did."""
        old_dir = self.layout.manifest_dir
        self.config = cfg
        self.config_generation += 1
        self.config_loaded_at = time.time()
        assert self.hints is not None
        self.hints.set_debounce(cfg.debounce)
        if layout.manifest_dir != old_dir:
            assert self.watcher is not None
            self.watcher.stop()
            self.layout = layout
            self.watcher = Watcher(layout.manifest_dir, self.hints)
            self.finding_keys = set()
            self.problems.directory_moved()
        else:
            self.layout = layout
        if hasattr(self.engine, "close"):
            try:
                self.engine.close()
            except Exception:
                pass
        self.engine = self._build_engine()
        self.publishing.configure(layout, cfg)
        if layout.manifest_dir != old_dir:
            self.watch.check(initial=True)

    def _install_signals(self) -> None:
        def on_stop(signum: int, _frame: Any) -> None:
            self._stop_signal = signum

        def on_hup(_signum: int, _frame: Any) -> None:
            self.reloader.request()

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGHUP, on_hup)
        assert self.hints is not None
        signal.set_wakeup_fd(self.hints.wakeup_fd, warn_on_full_buffer=False)

    def _take_pid_lock(self) -> tuple[str, str, int | None] | None:
        """Take the exclusive, non-blocking flock on ``<run_dir>/staticpodd.pid`` and write our pid.

        Returns None when this process now holds it (kept until exit), else ``(code, message,
        pid)``: code ``already-running`` (pid: the daemon holding it, None when unreadable) or
        ``pid-file`` (the file cannot be opened or locked: no start without the guarantee).
        """
        import errno
        import fcntl

        path = self.layout.run_dir / PID_FILE
        from ..node.lock import open_private

        try:  # 0600: flock works on a read-only fd, so a readable pid file lets anyone block our start
            fd = open_private(path, what="pid file")
        except StaticpodError as exc:
            return "pid-file", exc.message + f" ({path})", None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                return "pid-file", f"cannot lock the pid file {path}: {exc.strerror}", None
            pid = None
            deadline = time.monotonic() + 1.0  # the holder writes its pid right after locking
            while pid is None and time.monotonic() < deadline:
                raw = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                pid = int(raw) if raw.isdigit() else None
                if pid is None:
                    time.sleep(0.05)
            os.close(fd)
            return (
                "already-running",
                f"another staticpodd (pid {pid if pid is not None else 'unknown'}) is already running for "
                f"{self.root} (it holds {path}); stop it first",
                pid,
            )
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a full /run: the flock is the guarantee, the pid text a courtesy
        self._pid_fd = fd
        return None

    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, stop. Returns the exit status.

        First of all, takes the pid-file lock: a second daemon on the same root exits 1
        (DAEMON_START_FAILED) naming the running one's pid, and touches nothing.
        """
        busy = self._take_pid_lock()
        if busy is not None:
            code, message, holder = busy
            self._say(f"refusing to start: {message}")
            self.journal.log(
                Event.DAEMON_START_FAILED,
                f"staticpodd cannot start: {message}",
                priority=ERR,
                error=code,
                running_pid=holder,
                pid=os.getpid(),
            )
            return EXIT_FAILURE
        status = self._start_with_config()
        if status is None:
            status = self._start_engine()
        if status is not None:
            return status
        self._announce_ready()
        return self._serve()

    def _start_with_config(self) -> int | None:
        """Load the configuration and the layout it names; EXIT_CONFIG (said and journalled)
        when it is invalid, else None."""
        try:
            self.config = self._load_config()
            self.layout = self._layout_for(self.config)
        except ConfigError as exc:
            self._say(f"refusing to start: invalid configuration: {exc}")
            if exc.hint:
                self._say(f"hint: {exc.hint}")
            self.journal.log(
                Event.CONFIG_INVALID,
                f"refusing to start: invalid configuration: {exc}",
                priority=ERR,
                config_path=exc.path,
                line=exc.line,
                field=exc.field,
                hint=exc.hint,
            )
            return EXIT_CONFIG
        return None

    def _start_engine(self) -> int | None:
        """Build the engine, the watch and the first pass; the exit status when start-up
        fails (or is stopped while waiting for the lock), else None."""
        self.config_generation = 1
        self.config_loaded_at = time.time()
        self.hints = Hints(self.config.debounce)
        self._install_signals()
        from ..validate import isolated

        # a big file's decode is a peak of some 40 times its size: in a child that exits, not
        # in the daemon's heap, which glibc rarely gives back (staticpodd/validate/isolated.py)
        isolated.enable()
        try:
            self.engine = self._build_engine()
            self.publishing.configure(self.layout, self.config)
            self.watcher = Watcher(self.layout.manifest_dir, self.hints)
            self.reporter.heartbeat()
            self.watch.check(initial=True)
            if not self._first_reconcile():
                self._shutdown()
                return EXIT_OK  # stopped while waiting for the lock
        except StaticpodError as exc:
            self._say(f"cannot start: {exc}")
            self.log(Event.DAEMON_START_FAILED, f"staticpodd cannot start: {exc}", priority=ERR, error=exc.code)
            self._shutdown(status=f"failed: {exc}")
            return exc.exit_status if exc.exit_status != EXIT_OK else EXIT_FAILURE
        except Exception as exc:  # a bug during start-up: say so in the journal, not only on stderr
            import traceback

            what = f"{type(exc).__name__}: {exc}"[:500]
            self._say(f"cannot start: internal error: {what}")
            self.log(Event.DAEMON_ERROR, f"staticpodd cannot start: internal error: {what}", priority=ERR,
                     error="internal-error",
                     traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            self._shutdown(status=f"failed: internal error: {type(exc).__name__}")
            return EXIT_FAILURE
        return None

    def _announce_ready(self) -> None:
        """Say READY=1 to systemd with a current heartbeat, and journal that the daemon started."""
        # before READY=1, so that a write right after it is served at once: may we see writers in
        # /proc (asked once, cheaply), and what a restore on a writer's close needs, imported
        denied = hidden_from_proc()
        try:
            self._prepare_close_path()
        except Exception:  # pragma: no cover - a bug there shows again, and is reported, on the first close
            pass
        self.state = "running"
        self.ready = True
        status = self.reporter.status_line()
        self.reporter.heartbeat()  # before READY=1: whoever waits for READY sees a current heartbeat
        self.reporter.ready(status)
        self.log(
            Event.DAEMON_STARTED,
            f"staticpodd {__version__} watching {self.layout.manifest_dir}: {status}",
            priority=NOTICE,
            pid=os.getpid(),
            config_path=self.config.source,
            watchdog_usec=self.notifier.watchdog_usec,
            writer_inspection="inotify" if denied else "proc+inotify",
        )
        self.writer_holds.note_proc_denied(denied)
        # what the first pass parsed is given back once the daemon has been quiet for a moment
        # (the loop's trim): a write that comes right after READY=1 is not kept waiting for it
        self._trim_due = True
        self._trim_after = time.monotonic() + TRIM_QUIET

    def _serve(self) -> int:
        """Serve until told to stop, then shut down; returns the exit status."""
        stop_status = None
        try:
            self._loop()
        except Exception as exc:  # a bug: say so in the journal, then exit for systemd to restart us
            import traceback

            self.exit_status = EXIT_FAILURE
            stop_status = f"failed: internal error: {type(exc).__name__}"
            self._say(f"internal error, stopping: {type(exc).__name__}: {exc}")
            self.log(Event.DAEMON_ERROR, f"internal error, stopping (systemd restarts the daemon): "
                     f"{type(exc).__name__}: {exc}", priority=ERR, error="internal-error",
                     traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        finally:
            if stop_status is None and self.exit_status is not None:
                stop_status = "restarting: sandbox out of date"
            self._shutdown(status=stop_status)
        return EXIT_OK if self.exit_status is None else self.exit_status

    def _first_reconcile(self) -> bool:
        """Recover and reconcile once before READY=1, waiting for the lock as long as it takes
        (a long staticpodctl operation at boot). Returns False when asked to stop meanwhile.
        Raises StaticpodError other than LockTimeout (start-up fails)."""
        from ..errors import LockTimeout

        assert self.hints is not None
        wd_interval = self.notifier.watchdog_interval()
        told = False
        while True:
            try:
                self._reconcile(full=True, recover=True)
                return True
            except LockTimeout as exc:
                if not told:
                    self._say(f"waiting for the lock before start-up: {exc.message}")
                    self.log(Event.DAEMON_ERROR, f"waiting for the lock before start-up: {exc.message}",
                             priority=WARNING, error="lock-timeout")
                    told = True
                self.notifier.status(f"starting: waiting for the lock ({exc.message})")
                if wd_interval is not None:
                    self.notifier.watchdog()
                self.reporter.heartbeat()
            if self._stop_signal is not None:
                return False
            select.select([self.hints.fileno()], [], [], RETRY_DELAY)
            self.hints.drain()
            if self._stop_signal is not None:
                return False

    def _shutdown(self, status: str | None = None) -> None:
        if self.state != "stopped":
            self.state = "stopping"
            self.notifier.stopping(status or "stopping")
            if self._stop_signal is not None or status is None:
                sig = signal.Signals(self._stop_signal).name if self._stop_signal else None
                self.log(
                    Event.DAEMON_STOPPING,
                    f"staticpodd stopping{f' on {sig}' if sig else ''}",
                    priority=NOTICE,
                    signal=sig,
                    pid=os.getpid(),
                )
        if self.watcher is not None:
            self.watcher.stop()
        self.publishing.stop()
        self.state = "stopped"
        self.ready = False
        try:
            self.reporter.heartbeat()
        except OSError:
            pass
        try:
            signal.set_wakeup_fd(-1)
        except (ValueError, OSError):
            pass
        if self.engine is not None and hasattr(self.engine, "close"):
            try:
                self.engine.close()
            except Exception:
                pass

