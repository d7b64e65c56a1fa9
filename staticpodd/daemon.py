"""staticpodd: the daemon that watches the manifest directory, records every change, enforces parks.

Composition root and lifecycle (DESIGN.md "Shape of the code"): builds the Layout, Config,
Journal, Engine, Watcher and Notifier, then runs one main loop in the main thread.

Start-up: first the exclusive flock on ``<run_dir>/staticpodd.pid`` (one daemon per --root; a
second one exits 1 naming the running pid), config (invalid -> exit 78), recover interrupted
operations (``Engine.recover``), start the inotify watch (on the directory staticPodPath resolves
to), full reconcile, then ``READY=1``. Every full pass judges the live files' current validity,
not only what changed since the last look. Loop: block on the wake-up pipe
(inotify hints, signals) with a timeout = the earliest of the next debounced hint, the next
full rescan (``rescan_interval``, KUBELET.md "When the kubelet looks"), the next watchdog ping,
the next park deadline and the heartbeat interval. Signal handlers only set flags; the
wake-up fd (``signal.set_wakeup_fd``) makes the loop notice them at once.

- SIGHUP: ``RELOADING=1``, re-read the config; keep the old one if the new one is invalid
  (CONFIG_INVALID), then ``READY=1`` again. ``staticpodd --reload`` sends it and waits.
- SIGTERM/SIGINT: ``STOPPING=1``, DAEMON_STOPPING, exit 0.

The heartbeat ``/run/staticpodd/daemon.json`` (``Layout.heartbeat_path``) is rewritten
atomically on every loop; ``staticpodctl status`` reads it (see :func:`read_heartbeat`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import __version__
from .config import Config, load_config
from .errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, ConfigError, StaticpodError
from .journal import ERR, INFO, NOTICE, WARNING, Event, Journal
from .layout import Layout, component_of, under_root
from .notify import Notifier
from .reconcile import (
    Action,
    Plan,
    Report,
    finding_key,
    invalid_sentence,
    is_directory_finding,
    kubelet_drops,
    over_our_limit_only,
    plan_changes,
    plan_expired_parks,
    plan_findings,
    restore_note,
    status_line,
    stray_by_name,
)
from .watch import DIRECTORY, WRITE_STALL, Hints, Watcher, Writer, open_writers


class BackgroundJournal(Journal):
    """A :class:`Journal` whose ``log`` never blocks the main loop.

    ``sd_journal_send`` blocks while journald's socket queue is full (a busy journald, or
    ``net.unix.max_dgram_qlen`` left at the kernel's 10): the daemon must keep watching, pinging
    the watchdog and restoring files meanwhile. Entries go through a bounded FIFO queue to one
    writer thread, in order; when ``maxsize`` entries are waiting, new ones are counted as
    dropped and a single stderr line says so. :meth:`close` flushes (bounded wait).
    """

    def __init__(self, identifier: str, root: str, *, maxsize: int = 10000) -> None:
        super().__init__(identifier, root)
        import queue
        import threading

        self._queue: Any = queue.Queue(maxsize)
        self._full = queue.Full
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="staticpodd-journal", daemon=True)
        self._thread.start()

    def log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        """Queue one entry (see :meth:`Journal.log`); never blocks, never raises."""
        try:
            self._queue.put_nowait((event, message, priority, fields))
        except self._full:
            self.dropped += 1
            if self.dropped == 1:
                try:
                    print("staticpodd: journald is not keeping up; dropping log entries", file=sys.stderr)
                except OSError:
                    pass

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            event, message, priority, fields = item
            try:
                Journal.log(self, event, message, priority=priority, **fields)
            except Exception as exc:  # noqa: BLE001 - one bad entry must not end all logging
                try:
                    print(f"staticpodd: could not log {event.name}: {exc!r}", file=sys.stderr)
                except OSError:
                    pass

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout`` seconds), then stop the writer."""
        try:
            self._queue.put(None, timeout=timeout)
        except self._full:
            return
        self._thread.join(timeout)


HEARTBEAT_FORMAT = 1
#: Longest sleep of the main loop, seconds: the heartbeat is never older than this when healthy.
HEARTBEAT_INTERVAL = 10.0
#: Retry delay after a lock timeout or an unexpected error in one reconcile, seconds.
RETRY_DELAY = 1.0
#: Longest single wait for the lock in the main loop, seconds (see Daemon.lock_wait).
LOCK_WAIT_MAX = 5.0
#: While a restore or quarantine waits for a writer to close the file, it is looked at again this
#: often (seconds), besides the inotify close-write event: a missed event never leaves it waiting.
HOLD_RECHECK = 1.0
#: Pid file under ``Layout.run_dir``: the running daemon holds an exclusive flock on it (one
#: daemon per --root) and writes its pid into it.
PID_FILE = "staticpodd.pid"
#: ``kind: Pod`` at the top level of YAML, or ``"kind": "Pod"`` in JSON: bytes meant as a Pod
#: manifest (however broken otherwise), not a stray.
_DECLARES_POD = re.compile(rb"^kind:[ \t]*[\"']?Pod[\"']?[ \t]*(?:#.*)?$" rb'|"kind"[ \t]*:[ \t]*"Pod"', re.MULTILINE)


def build_parser() -> argparse.ArgumentParser:
    """The ``staticpodd`` command line (also used to generate the man page)."""
    p = argparse.ArgumentParser(
        prog="staticpodd",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 stopped cleanly (SIGTERM/SIGINT), reloaded, or configuration OK;\n"
        "  1 start-up failed (e.g. another staticpodd runs on this root), or no daemon to reload;\n"
        "  6 --reload timed out;\n"
        "  78 invalid configuration (at start, refused by --reload, or --check-config).\n"
        "signals: SIGHUP reloads the configuration (the old one stays when the new one is invalid);\n"
        "  SIGTERM stops.\n"
        "files: <root>/etc/staticpodd/staticpodd.yaml (configuration),\n"
        "  <root>/run/staticpodd/daemon.json (heartbeat read by staticpodctl status),\n"
        "  <root>/run/staticpodd/staticpodd.pid (pid; flocked while the daemon runs).",
        description="Watch the kubelet's static pod manifest directory: record every change,\n"
        "enforce park deadlines, act on invalid writes and stray files by policy.\n"
        "Runs in the foreground as a systemd Type=notify service.",
    )
    p.add_argument("--version", action="version", version=f"staticpodd {__version__}")
    p.add_argument(
        "--root",
        default="/",
        metavar="DIR",
        help="take every path under DIR (manifests, state, run, config); default /",
    )
    p.add_argument(
        "--config", metavar="FILE", help="configuration file (default <root>/etc/staticpodd/staticpodd.yaml)"
    )
    p.add_argument(
        "--manifest-dir",
        metavar="DIR",
        help="the kubelet's staticPodPath (default: from the config, else the kubelet's config)",
    )
    p.add_argument(
        "--reload",
        action="store_true",
        help="ask the running daemon to reload its configuration (SIGHUP) and wait; "
        "exit 0 when reloaded, 78 when it refused the new configuration",
    )
    p.add_argument(
        "--check-config",
        action="store_true",
        help="check the configuration file and exit: 0 when valid, 78 with the key and line when not",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="with --reload: seconds to wait for the daemon (default 30)",
    )
    p.add_argument(
        "--unit",
        metavar="UNIT",
        help="with --reload (the unit's ExecReload=+, outside the sandbox): first bind a metrics "
        "textfile directory created after the daemon started into UNIT's mount namespace "
        "(systemctl bind), so that the reloaded daemon can write it",
    )
    return p


def bind_textfile_dir(layout: Layout, unit: str, *, config_path: str | None = None,
                      out: Any = sys.stderr) -> bool | None:
    """Before a reload under systemd: when ``metrics.textfile_dir`` (of the configuration about
    to be loaded) exists but is read-only in the running daemon's sandbox (it was created after
    the start, e.g. node-exporter installed later; see :mod:`staticpodd.sandbox`), bind it into
    ``unit``'s mount namespace with ``systemctl bind``. Returns True when bound, False when the
    bind failed (said on ``out``; the reload goes on, the daemon reports metrics-write-failed),
    None when there was nothing to do. Needs root outside the sandbox; never raises."""
    from .sandbox import bind_into_unit, read_only_for

    env_pid = os.environ.get("MAINPID", "")
    if not env_pid.isdigit():
        return None
    try:
        cfg = load_config(layout, path=config_path)
    except ConfigError:
        return None  # the daemon refuses it and says why; nothing to bind for it
    if not cfg.metrics.enabled or not cfg.metrics.textfile_dir:
        return None
    directory = under_root(layout.root, cfg.metrics.textfile_dir)
    if not directory.is_dir() or read_only_for(int(env_pid), directory) is not True:
        return None
    ok, message = bind_into_unit(unit, directory)
    print(f"staticpodd: {message}", file=out)
    return ok


# --------------------------------------------------------------------------------------------
# heartbeat


def write_heartbeat(path: Path, data: dict[str, Any]) -> None:
    """Atomically replace the heartbeat JSON at ``path`` (temp file + rename in the same dir)."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (json.dumps(data, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_heartbeat(layout: Layout) -> dict[str, Any] | None:
    """The daemon's heartbeat, or None when absent or unreadable.

    Shape (format 1; times are epoch seconds): ``format, pid, version, root, manifest_dir,
    state ("starting"|"running"|"reloading"|"stopping"|"stopped"), ready, started_at,
    last_loop, last_rescan, heartbeat_interval`` (the daemon rewrites it at least every ``interval``
    seconds while alive: treat ``now - last_loop > 3 * heartbeat_interval`` as unhealthy), ``status``
    (the STATUS= line), ``summary {live, parked, missing, problems}``, ``problems [{code,
    severity, path, component, message}]``, ``parks [ParkRecord.to_dict()]``, ``config {path,
    digest, generation, loaded_at}``, ``reload {seq, status ("ok"|"refused"|null), error, at}``,
    ``watch {watching, generation, error}``.
    """
    try:
        data = json.loads(layout.heartbeat_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _process_is_staticpodd(pid: int) -> bool:
    """True when ``pid`` is alive and runs the daemon: an argv element is the ``staticpodd``
    script or names ``staticpodd.daemon``. Guards a stale heartbeat whose pid was reused: the
    default action of SIGHUP is to terminate, so we must never send it to anything else."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return any(os.path.basename(a) == b"staticpodd" or b"staticpodd.daemon" in a for a in raw.split(b"\0"))


def reload_running(layout: Layout, *, timeout: float, out: Any = sys.stderr) -> int:
    """``staticpodd --reload``: SIGHUP the running daemon (pid from the heartbeat) and wait.

    Returns 0 when the daemon reloaded, 78 when it refused the new configuration (it keeps the
    old one), 6 on timeout, 1 when no daemon is running for this root.
    """
    hb = read_heartbeat(layout)
    pid = hb.get("pid") if hb else None
    if not isinstance(pid, int) or (hb or {}).get("state") == "stopped":
        env_pid = os.environ.get("MAINPID", "")
        pid = int(env_pid) if env_pid.isdigit() else None
    if not pid or not _process_is_staticpodd(pid):
        print(f"staticpodd: no running daemon for {layout.root} (heartbeat {layout.heartbeat_path})", file=out)
        return EXIT_FAILURE
    before = int(((hb or {}).get("reload") or {}).get("seq") or 0)
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        print(f"staticpodd: cannot signal pid {pid}: {exc.strerror}", file=out)
        return EXIT_FAILURE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hb = read_heartbeat(layout) or {}
        rel = hb.get("reload") or {}
        if hb.get("pid") == pid and int(rel.get("seq") or 0) > before:
            if rel.get("status") == "ok":
                return EXIT_OK
            print(
                f"staticpodd: the new configuration was refused, the old one stays: {rel.get('error')}",
                file=out,
            )
            return EXIT_CONFIG
        if not _process_is_staticpodd(pid):
            print(f"staticpodd: daemon pid {pid} exited during the reload", file=out)
            return EXIT_FAILURE
        time.sleep(0.05)
    print(f"staticpodd: daemon pid {pid} did not finish reloading within {timeout:g} s", file=out)
    return EXIT_TIMEOUT


# --------------------------------------------------------------------------------------------
# the daemon


class Daemon:
    """One running staticpodd. ``run()`` returns the process exit status."""

    def __init__(self, args: argparse.Namespace, *, notifier: Notifier | None = None) -> None:
        self.args = args
        self.root = Path(os.path.abspath(args.root))
        self.notifier = notifier or Notifier()
        self.journal: Journal = BackgroundJournal("staticpodd", str(self.root))
        self.config: Config = Config.default()
        self.layout: Layout = Layout.build(self.root, args.manifest_dir)
        self.config_generation = 0
        self.config_loaded_at: float | None = None
        self.engine: Any = None
        self.hints: Hints | None = None
        self.watcher: Watcher | None = None
        # signal flags (set by handlers, consumed by the main loop)
        self._stop_signal: int | None = None
        self._hup_requests = 0
        self._hup_handled = 0
        self.reload_state: dict[str, Any] = {"seq": 0, "status": None, "error": None, "at": None}
        # observed state
        self.state = "starting"
        self.ready = False
        self.started_at = time.time()
        self.last_rescan: float | None = None
        self.summary: dict[str, Any] = {"live": 0, "parked": 0, "missing": 0}
        self.parks: list[dict[str, Any]] = []
        self.next_park_deadline: float | None = None  # epoch seconds
        self.finding_keys: set[tuple[str, str, str]] = set()
        self.dir_problems: list[dict[str, Any]] = []
        self.invalid_live: dict[str, dict[str, Any]] = {}  # file_name -> problem
        self.broken_parks: dict[str, dict[str, Any]] = {}
        self.runtime_problems: dict[str, dict[str, Any]] = {}  # e.g. lock timeout, watch error
        self.failed_unparks: dict[tuple[str, float], str] = {}
        self._retry_names: set[str] = set()
        self._retry_full = False
        self._retry_at: float | None = None
        self._last_status: str | None = None
        self.last_findings: list[Any] = []  # everything validate_directory found last time
        self._metrics_snapshot: Any = None
        self._pid_fd: int | None = None  # the flocked pid file (one daemon per --root)
        # file_name -> (digest, live names) when its restore failed: not retried until the bytes or
        # the directory's names change (or a reload)
        self._restore_failed: dict[str, tuple[str, frozenset[str]]] = {}
        self._valid_digests: dict[str, bool] = {}  # digest -> passes validation (memo)
        # file_name -> (size, mtime_ns, st_ino) of the live files just before the last scan: a
        # restore or quarantine acts only on a file that has not changed since (see _hold_reason)
        self._scan_stats: dict[str, tuple[int, int, int]] = {}
        # file_name -> pids whose open-for-writing descriptor holds back its restore/quarantine
        # (logged once per set of pids, an empty set when only inotify knows of the writer;
        # re-checked on close-write and every HOLD_RECHECK)
        self._held: dict[str, frozenset[int]] = {}
        # file names whose writer stalled (WRITE_STALL without a change): logged once each
        self._stalled: set[str] = set()
        # whether /proc/PID/fd of some process was denied to us (no CAP_SYS_PTRACE): logged once
        self._proc_limited = False
        # set when the daemon must exit with this status (EXIT_SANDBOX: the manifest directory
        # appeared read-only in our sandbox; systemd restarts us into one that binds it)
        self.exit_status: int | None = None
        self._heartbeat_failed = False  # the last heartbeat write failed (logged once)

    # -- set-up ---------------------------------------------------------------------------------
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
        from .engine import Actor, Engine

        return Engine(
            self.layout,
            actor=Actor.daemon(),
            journal=self.journal,
            config=self.config,
            lock_timeout=self.lock_wait(),
        )

    def _install_signals(self) -> None:
        def on_stop(signum: int, _frame: Any) -> None:
            self._stop_signal = signum

        def on_hup(_signum: int, _frame: Any) -> None:
            self._hup_requests += 1

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGHUP, on_hup)
        assert self.hints is not None
        signal.set_wakeup_fd(self.hints.wakeup_fd, warn_on_full_buffer=False)

    # -- logging --------------------------------------------------------------------------------
    def log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        """One journald entry from the daemon (actor staticpodd unless given)."""
        fields.setdefault("actor", "staticpodd")
        fields.setdefault("manifest_dir", str(self.layout.manifest_dir))
        self.journal.log(event, message, priority=priority, **fields)

    def _say(self, text: str) -> None:
        """A plain stderr line, for a human running the daemon by hand. Left out when stderr is
        itself the journal (systemd's ``JOURNAL_STREAM``) and entries reach journald natively:
        every such line has its native entry (MESSAGE_ID, priority), and the copy would land in
        the journal again as a bare priority-6 line (issue 12.5)."""
        if self._stderr_is_journal():
            return
        from .termsafe import one_line

        try:
            print(f"staticpodd: {one_line(text)}", file=sys.stderr, flush=True)  # names: no forged lines
        except OSError:
            pass

    _stderr_journal: bool | None = None

    def _stderr_is_journal(self) -> bool:
        if self._stderr_journal is None:
            from .journal import journal_status

            stream = os.environ.get("JOURNAL_STREAM", "")
            try:
                st = os.fstat(sys.stderr.fileno())
                same = bool(stream) and stream == f"{st.st_dev}:{st.st_ino}"
            except (OSError, ValueError, AttributeError):
                same = False
            self._stderr_journal = same and journal_status()[0] and os.environ.get("STATICPODD_NO_JOURNAL") != "1"
        return self._stderr_journal

    # -- lifecycle ------------------------------------------------------------------------------
    def _take_pid_lock(self) -> tuple[str, str, int | None] | None:
        """Take the exclusive, non-blocking flock on ``<run_dir>/staticpodd.pid`` and write our pid.

        Returns None when this process now holds it (kept until exit), else ``(code, message,
        pid)``: code ``already-running`` (pid: the daemon holding it, None when unreadable) or
        ``pid-file`` (the file cannot be opened or locked: no start without the guarantee).
        """
        import errno
        import fcntl

        path = self.layout.run_dir / PID_FILE
        from .lock import open_private

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
        self.config_generation = 1
        self.config_loaded_at = time.time()
        self.hints = Hints(self.config.debounce)
        self._install_signals()
        try:
            self.engine = self._build_engine()
            self.watcher = Watcher(self.layout.manifest_dir, self.hints)
            self._heartbeat()
            self._check_watch(initial=True)
            if not self._first_reconcile():
                self._shutdown()
                return EXIT_OK  # stopped while waiting for the lock
        except StaticpodError as exc:
            self._say(f"cannot start: {exc}")
            self.log(Event.DAEMON_START_FAILED, f"staticpodd cannot start: {exc}", priority=ERR, error=exc.code)
            self._shutdown(status=f"failed: {exc}")
            return exc.exit_status if exc.exit_status != EXIT_OK else EXIT_FAILURE
        self.state = "running"
        self.ready = True
        status = self._status_line()
        self._heartbeat()  # before READY=1: whoever waits for READY sees a current heartbeat
        self.notifier.ready(status)
        self._last_status = status
        denied: set[int] = set()
        open_writers("/", denied=denied)  # probe (any path that exists): may we see writers in /proc?
        self.log(
            Event.DAEMON_STARTED,
            f"staticpodd {__version__} watching {self.layout.manifest_dir}: {status}",
            priority=NOTICE,
            pid=os.getpid(),
            config_path=self.config.source,
            watchdog_usec=self.notifier.watchdog_usec,
            writer_inspection="inotify" if denied else "proc+inotify",
        )
        self._note_proc_denied(denied)
        self._heartbeat()
        try:
            self._loop()
        finally:
            self._shutdown(status=None if self.exit_status is None else "restarting: sandbox out of date")
        return EXIT_OK if self.exit_status is None else self.exit_status

    def _first_reconcile(self) -> bool:
        """Recover and reconcile once before READY=1, waiting for the lock as long as it takes
        (a long staticpodctl operation at boot). Returns False when asked to stop meanwhile.
        Raises StaticpodError other than LockTimeout (start-up fails)."""
        from .errors import LockTimeout

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
                self._heartbeat()
            if self._stop_signal is not None:
                return False
            select.select([self.hints.fileno()], [], [], RETRY_DELAY)
            self.hints.drain()
            if self._stop_signal is not None:
                return False

    def lock_wait(self) -> float:
        """Seconds one lock attempt of the daemon may block: ``lock_timeout``, but at most
        :data:`LOCK_WAIT_MAX` and half the watchdog interval, so that a long staticpodctl
        operation never starves the watchdog; the daemon retries every :data:`RETRY_DELAY`."""
        wait = min(float(self.config.lock_timeout), LOCK_WAIT_MAX)
        wd = self.notifier.watchdog_interval()
        if wd is not None:
            wait = min(wait, max(0.1, wd / 2))
        return wait

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
        self.state = "stopped"
        self.ready = False
        try:
            self._heartbeat()
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

    # -- main loop ------------------------------------------------------------------------------
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
                return
            if self._hup_requests != self._hup_handled:
                self._reload()
                next_rescan = now  # policies or directory may have changed
            rewatched = self._check_watch()
            if self.exit_status is not None:
                return
            full = now >= next_rescan or rewatched or self._retry_full
            names = self._refused_on_close()  # looked at now, not after the debounce (issue 10)
            if not full:
                due = self.hints.take_due(now)
                if DIRECTORY in due:
                    full = True
                names |= {h.name for h in due if h.name}
                if self._retry_names and (self._retry_at is None or now >= self._retry_at):
                    names |= self._retry_names
                    self._retry_names = set()
            parks_due = self.next_park_deadline is not None and time.time() >= self.next_park_deadline
            if full:
                self.hints.discard(DIRECTORY)
                self._reconcile(full=True)
                next_rescan = time.monotonic() + self.config.rescan_interval
            elif names or parks_due:
                self._reconcile(names=sorted(names))
            next_prune = self._prune_if_due(next_prune)
            self._publish_status()
            self._heartbeat()
            # sleep until the next thing to do
            now = time.monotonic()
            wake = [next_rescan, now + HEARTBEAT_INTERVAL]
            if next_prune is not None:
                wake.append(next_prune)
            if wd_interval is not None:
                wake.append(next_ping)
            nd = self.hints.next_deadline()
            if nd is not None:
                wake.append(nd)
            if self.next_park_deadline is not None:
                wake.append(now + max(0.0, self.next_park_deadline - time.time()) + 0.01)
            if self._retry_names and self._retry_at is not None:
                wake.append(self._retry_at)
            if self.watcher is not None and not self.watcher.watching:
                wake.append(now + 1.0)  # directory missing or watch failed: poll it
            timeout = max(0.0, min(wake) - now)
            if self._stop_signal is not None or self._hup_requests != self._hup_handled:
                timeout = 0.0
            try:
                select.select([self.hints.fileno()], [], [], timeout)
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for safety
                pass
            self.hints.drain()

    def _refused_on_close(self) -> set[str]:
        """Live files a writer just closed whose bytes the kubelet refuses, under
        ``on_invalid: restore``: their pending hints are dropped so that this pass of the loop
        looks at them (and restores them) at once instead of after the debounce.

        The kubelet keeps the old pod only until its next relist (KUBELET.md "What a broken file
        does to a running pod"): with the 0.3 s debounce a 20 s relist fell inside the window 1
        time in 10 (issue 10); acting on the close shrinks the window to the restore itself.
        The cheap check (:func:`staticpodd.refused.kubelet_refuses`) decides only when to look;
        whether to restore stays the gate's verdict in the reconcile.
        """
        assert self.hints is not None
        closed = self.hints.take_closed()
        if not closed or getattr(self.config, "on_invalid", "alert") != "restore":
            return set()
        from .refused import kubelet_refuses
        from .watch import Hint

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

    def _restore_now(self, names: set[str]) -> None:
        """Scan ``names`` and carry out what :func:`plan_changes` decides for them (the restore),
        before the directory-wide findings: those cost a validation of every live file and are
        refreshed by the reconcile of the same names that follows in this pass of the loop.
        Any failure is left to that reconcile (it retries and reports)."""
        try:
            with self.engine.locked():
                self._scan_stats = self._live_stats()
                changes = self.engine.scan(sorted(names), validate=True, log=False)
                plan = plan_changes(changes, self.config, sizes=self._sizes())
                self._track_changes(changes)
                self._execute(plan)
        except StaticpodError as exc:
            self._say(f"restore on close of {', '.join(sorted(names))} deferred: {exc}")

    def _pod_defined_by(self, file_name: str) -> tuple[str, str] | None:
        """(namespace, name) of the pod a live file defines, or None (unreadable, not a Pod)."""
        from .proof.shadow import pod_key
        from .refused import kubelet_refuses

        try:
            data = (self.layout.manifest_dir / file_name).read_bytes()
        except OSError:
            return None
        if kubelet_refuses(data):
            return None
        import yaml

        try:
            doc = next(iter(yaml.load_all(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))), None)
        except yaml.YAMLError:
            return None
        return pod_key(doc)

    def _readd_after_quarantine(self, stray: str, pod: tuple[str, str]) -> None:
        """After quarantining ``stray`` that defined ``pod`` (namespace, name): touch the live
        file that defines it now, so the kubelet re-adds that pod at once (inotify IN_ATTRIB ->
        re-read) instead of at its next relist, and say truthfully what the stray already did.

        Seen on a real kubelet 1.34 (issue 10): it reads a new ``x.yaml.bak`` 2-3 ms after the
        ``cp`` and, the ``.bak`` sorting last, kills the running pod to start it under the
        ``.bak``'s UID (the UID hashes the file path); no quarantine can be that fast. Moving the
        stray out is a delete to the kubelet, which removes that pod too; the file it should run
        is re-read only at the next relist (up to fileCheckFrequency, 20 s by default) unless an
        event on it arrives. The touch is that event (KUBELET.md "When the kubelet looks";
        consequence 6 forbids touching an unchanged file, except here, where re-reading it is
        exactly what is needed). The live file's bytes, mode and owner are unchanged.
        """
        from .proof.shadow import files_defining

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

    def _publish_status(self) -> None:
        status = self._status_line()
        if status != self._last_status:
            self.notifier.status(status)
            self._last_status = status

    # -- watching -------------------------------------------------------------------------------
    def _check_watch(self, *, initial: bool = False) -> bool:
        """(Re)create the inotify watch if needed; True when a full rescan should follow."""
        assert self.watcher is not None
        what = self.watcher.ensure()
        if what is None:
            if not (initial and not self.watcher.watching and self.watcher.identity is None):
                return False
            what = "missing"  # missing at start: say so once, then poll for it
        ident = self.watcher.identity
        if what == "started":
            self.runtime_problems.pop("watch", None)
            if initial:
                self._check_writable(initial=True)
                return False
            what = "created"  # it was missing at start and has appeared
        if what == "missing":
            self.runtime_problems["watch"] = {
                "code": "manifest-dir-missing",
                "severity": "error",
                "path": str(self.layout.manifest_dir),
                "message": "the manifest directory is missing: the kubelet removes every static pod",
            }
            self.log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} is missing; the kubelet removes every "
                "file-sourced pod; waiting for it to come back",
                priority=ERR,
                finding="manifest-dir-missing",
            )
            return True
        if what == "failed":
            self.runtime_problems["watch"] = {
                "code": "watch-failed",
                "severity": "error",
                "path": str(self.layout.manifest_dir),
                "message": self.watcher.error or "cannot watch the manifest directory",
            }
            self.log(
                Event.DIRECTORY_PROBLEM,
                self.watcher.error or "cannot watch the manifest directory",
                priority=ERR,
                finding="watch-failed",
            )
            return True
        self.runtime_problems.pop("watch", None)
        if not initial:
            self.log(
                Event.DIRECTORY_REWATCHED,
                f"manifest directory {self.layout.manifest_dir} was {what}; watching it again and rescanning",
                priority=WARNING,
                change=what,
                dev=ident[0] if ident else None,
                inode=ident[1] if ident else None,
            )
        self._check_writable(initial=initial, change=what)
        return True

    def _check_writable(self, *, initial: bool, change: str | None = None) -> None:
        """Is the (now watched) manifest directory writable for us, as far as the mount goes?

        Under the unit's sandbox (``ProtectSystem=strict``), a directory that did not exist at
        start or was deleted and recreated since is read-only to the daemon (no bind mount for
        it: :mod:`staticpodd.sandbox`). Then every quarantine, restore and deadline unpark would
        fail with EROFS while systemd sees an active service (issue 12.1, 12.3). So when it
        *appears* read-only under a service manager, the daemon says so (DIRECTORY_PROBLEM,
        priority err) and exits :data:`~staticpodd.sandbox.EXIT_SANDBOX` (75): Restart=on-failure
        starts it again in a sandbox that binds the directory. A directory read-only from the
        start (a read-only file system, or a staticPodPath the unit does not grant) is reported
        as the problem ``manifest-dir-read-only`` instead: exiting would only loop.
        """
        from .sandbox import EXIT_SANDBOX, read_only_mount, under_service_manager

        if not read_only_mount(self.layout.manifest_dir):
            self.runtime_problems.pop("read-only", None)
            return
        if not initial and under_service_manager():
            self.log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} was {change or 'created'} after staticpodd "
                "started and is read-only in its sandbox (the unit binds it writable only at start); exiting "
                f"{EXIT_SANDBOX} so that systemd restarts staticpodd with the directory bound",
                priority=ERR,
                finding="manifest-dir-read-only",
                change=change,
                exit_status=EXIT_SANDBOX,
            )
            self._say(f"manifest directory {self.layout.manifest_dir} is read-only in this sandbox: exiting "
                      f"{EXIT_SANDBOX} for a restart")
            self.exit_status = EXIT_SANDBOX
            return
        if "read-only" not in self.runtime_problems:
            self.log(
                Event.DIRECTORY_PROBLEM,
                f"manifest directory {self.layout.manifest_dir} is read-only for staticpodd: no restore, "
                "quarantine or deadline unpark can happen (a read-only mount, or a staticPodPath the unit's "
                "ReadWritePaths= does not grant: see `systemctl edit staticpodd`)",
                priority=ERR,
                finding="manifest-dir-read-only",
            )
        self.runtime_problems["read-only"] = {
            "code": "manifest-dir-read-only",
            "severity": "error",
            "path": str(self.layout.manifest_dir),
            "message": "the manifest directory is read-only for staticpodd: restores, quarantines and "
            "deadline unparks fail",
        }

    def _prune_if_due(self, next_prune: float | None) -> float | None:
        """Prune under the retention policy (``retention:``, :mod:`staticpodd.retention`) when
        ``next_prune`` (monotonic) has come; returns the next due time (None: no policy). A
        failure (lock timeout, full disk) is reported and retried at the next interval."""
        from .retention import policy_for, prune

        policy = policy_for(self.config)
        if not policy.active:
            return time.monotonic() + 60.0  # look again (a SIGHUP may set one)
        if next_prune is not None and time.monotonic() < next_prune:
            return next_prune
        try:
            with self.engine.locked():
                res = prune(self.engine, policy, time.time())
            self.runtime_problems.pop("prune", None)
            if res.components:
                self._refresh_summary()
        except StaticpodError as exc:
            self._say(f"prune failed: {exc}")
            self.runtime_problems["prune"] = {"code": exc.code, "severity": "warning",
                                              "path": str(self.layout.db_path), "message": exc.message}
        return time.monotonic() + policy.interval

    # -- reconcile ------------------------------------------------------------------------------
    def _reconcile(self, *, full: bool = False, names: Iterable[str] = (), recover: bool = False) -> None:
        """Scan (all or some names), act by policy, refresh summary/problems. Never raises a
        StaticpodError except on ``recover`` (start-up: the daemon must not say READY)."""
        from .errors import LockTimeout

        names = list(names)
        if not self.layout.manifest_dir.is_dir():
            # Nothing to scan: the watch reports the missing directory (manifest-dir-missing) and
            # a full rescan follows when it comes back. The engine refuses to work on it meanwhile
            # (recovery of interrupted operations runs at its first lock after that).
            self.invalid_live.clear()
            self.dir_problems = []
            self.finding_keys = set()
            self.last_findings = []
            self.summary = {"live": 0, "parked": 0, "missing": 0}
            self.runtime_problems.pop("reconcile", None)
            self._retry_full = False
            if full:
                self.last_rescan = time.time()
            return
        try:
            with self.engine.locked():
                if recover:  # locked() has run Engine.recover() on its first acquisition
                    for item in getattr(self.engine, "last_recovery", None) or []:
                        self._say(f"recovered interrupted operation: {item}")
                if full:
                    # Names with events still inside their quiet time are being written right
                    # now: reading them would catch a half-written file. Their debounced hint
                    # looks at them once the writer is done.
                    busy = self._busy_names()
                    scope = None if not busy else sorted(self._all_names() - busy)
                else:
                    scope = names
                self._scan_stats = self._live_stats()
                changes = self.engine.scan(scope, validate=True, log=False)
                plan = plan_changes(changes, self.config, sizes=self._sizes())
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
                    self.dir_problems = [_problem_of(f) for f in findings if _get(f, "severity") != "info"]
                expired = self.engine.store.expired_parks(time.time())
                expired = [p for p in expired if (p.component, p.until) not in self.failed_unparks]
                plan.extend(plan_expired_parks(expired, time.time()))
                self._execute(plan)
                if plan.actions:  # the directory changed under our hands: refresh what we report
                    found = self.last_findings = self._directory_findings()
                    findings = self._true_findings(found, Plan())
                    self.finding_keys = {finding_key(f) for f in findings}
                    self.dir_problems = [_problem_of(f) for f in findings if _get(f, "severity") != "info"]
                self._refresh_summary()
                if full or names or plan.actions:
                    self._remove_lone_private_dir()
            self.runtime_problems.pop("lock", None)
            self._retry_full = False
            if full:
                self.last_rescan = time.time()
                if self.watcher is not None:
                    self.watcher.reset_error()
        except LockTimeout as exc:
            if recover:
                raise
            if "lock" not in self.runtime_problems:
                self._say(f"{exc}; retrying every {RETRY_DELAY:g} s")
                self.log(Event.DAEMON_ERROR, f"{exc.message}; retrying every {RETRY_DELAY:g} s", priority=WARNING,
                         error="lock-timeout")
            self.runtime_problems["lock"] = {
                "code": "lock-timeout",
                "severity": "warning",
                "path": str(self.layout.lock_path),
                "message": exc.message,
            }
            self._retry_later(full, names)
        except StaticpodError as exc:
            if recover:
                raise
            if (self.runtime_problems.get("reconcile") or {}).get("message") != exc.message:
                # once per failure (a full disk retries every second)
                self._say(f"reconcile failed: {exc}")
                self.log(Event.DAEMON_ERROR, f"reconcile failed: {exc}", priority=ERR, error="reconcile-failed",
                         code=exc.code, path=exc.path)
            self.runtime_problems["reconcile"] = {
                "code": exc.code,
                "severity": "error",
                "path": exc.path,
                "message": exc.message,
            }
            self._retry_later(full, names)
        except Exception as exc:  # keep serving: a bug in one pass must not stop the watch
            if recover:
                raise
            import traceback

            if not self._stderr_is_journal():
                traceback.print_exc(file=sys.stderr)
            if (self.runtime_problems.get("reconcile") or {}).get("code") != "internal-error":
                self.log(Event.DAEMON_ERROR, f"internal error during reconcile (still serving): {type(exc).__name__}: "
                         f"{exc}", priority=ERR, error="internal-error", traceback=traceback.format_exc())
            self.runtime_problems["reconcile"] = {
                "code": "internal-error",
                "severity": "error",
                "path": None,
                "message": f"{type(exc).__name__}: {exc}",
            }
            self._retry_later(full, names)
        else:
            self.runtime_problems.pop("reconcile", None)

    def _remove_lone_private_dir(self) -> None:
        """Under the lock: an empty ``.staticpodd/`` that is all the manifest directory holds goes
        (an "is the directory empty" check counts dot-entries; see
        :func:`staticpodd.fsops.remove_private_dir_if_alone`)."""
        from . import fsops

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

    def _live_stats(self) -> dict[str, tuple[int, int, int]]:
        """``(size, mtime_ns, st_ino)`` of every regular file (symlinks followed) in the manifest
        directory, by name; entries that vanish meanwhile (a race with a writer) are left out."""
        out: dict[str, tuple[int, int, int]] = {}
        try:
            entries = list(os.scandir(self.layout.manifest_dir))
        except OSError:
            return out
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                st = e.stat()
            except OSError:
                continue
            out[e.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return out

    def _sizes(self) -> dict[str, int]:
        """Live file sizes in bytes from the last stat snapshot (see :meth:`_live_stats`)."""
        return {name: st[0] for name, st in self._scan_stats.items()}

    def _hold_reason(self, file_name: str, verb: str = "restore") -> tuple[str, list[Writer]] | None:
        """Why a ``verb`` (restore or quarantine) of live ``file_name`` must wait, or None to go.

        ``("changed", [])``: its stat (size, mtime_ns, inode) differs from the one taken before
        the scan, so the bytes judged are not the bytes on disk (someone is writing; the new
        event or the re-check brings it back). ``("writer", writers)``: a slow, non-atomic write
        is in progress: a process still holds it open for writing (``writers``, from
        :func:`staticpodd.watch.open_writers`), or inotify saw it change and not yet closed
        (:class:`staticpodd.watch.OpenWrites`; ``writers`` is then empty: without CAP_SYS_PTRACE
        /proc does not show other processes' descriptors). Renaming a version over it then would
        leave the writer writing into an unlinked inode, and its complete bytes would never reach
        the disk nor the history. A writer that has not changed the file for
        :data:`staticpodd.watch.WRITE_STALL` seconds is taken as stalled (logged once): the
        ``verb`` goes ahead, so a hung writer never blocks the policy forever.
        """
        path = self.layout.manifest_dir / file_name
        try:
            st = os.stat(path)
        except OSError:
            return None  # gone: the engine's own checks report it
        if self._scan_stats.get(file_name) != (st.st_size, st.st_mtime_ns, st.st_ino):
            return "changed", []
        denied: set[int] = set()
        writers = open_writers(path, denied=denied)
        self._note_proc_denied(denied)
        since = self.hints.writes.since(file_name) if self.hints is not None else None
        if not writers and since is None:
            self._stalled.discard(file_name)
            return None
        age = since if since is not None else max(0.0, time.time() - st.st_mtime)
        if age < WRITE_STALL:
            self._stalled.discard(file_name)
            return "writer", writers
        if file_name not in self._stalled:
            self._stalled.add(file_name)
            who = ", ".join(f"pid {w.pid} ({w.comm})" for w in writers) or "its writer (seen by inotify)"
            self.log(
                Event.INVALID_LIVE if verb == "restore" else Event.STRAY_FOUND,
                f"{file_name}: {who} has not changed it for {age:.0f} s and has not closed it: taking "
                f"the write as stalled (limit {WRITE_STALL:g} s); the {verb} goes ahead",
                priority=WARNING,
                file_name=file_name,
                held_by_pid=",".join(str(w.pid) for w in writers),
                held_by_comm=",".join(w.comm for w in writers),
                policy_action="stalled-writer",
            )
        return None

    def _note_proc_denied(self, denied: set[int]) -> None:
        """Log once that /proc/PID/fd of some processes is closed to us (``denied``: their
        pids), so open-for-writing descriptors are seen through inotify only."""
        if not denied or self._proc_limited:
            return
        self._proc_limited = True
        sample = ",".join(str(p) for p in sorted(denied)[:10])
        self.log(
            Event.WRITER_INSPECTION_LIMITED,
            f"writer inspection via /proc is limited: /proc/PID/fd of {len(denied)} process(es) "
            f"(pid {sample}{', ...' if len(denied) > 10 else ''}) is not readable without CAP_SYS_PTRACE; "
            "files being written are recognised by inotify (changed and not yet closed) instead, "
            "which misses only a writer that opened the file before staticpodd started and has "
            "not written since",
            priority=NOTICE,
            finding="writer-inspection-limited",
            denied_pids=sample,
        )

    def _busy_names(self) -> set[str]:
        return self.hints.pending_names() if self.hints is not None else set()

    def _all_names(self) -> set[str]:
        """Every file name a full scan covers: live, parked, and recorded as seen (removals)."""
        names = set(self.engine.live_names()) | set(self.engine.parked_names())
        names |= {o.file_name for o in self.engine.store.observed().values()}
        return names

    def _retry_later(self, full: bool, names: list[str]) -> None:
        if full:
            self._retry_full = True
        self._retry_names.update(names)
        self._retry_at = time.monotonic() + RETRY_DELAY

    def _track_changes(self, changes: Iterable[Any]) -> None:
        """Keep the invalid-live problem list in step with the live changes just observed."""
        for ch in changes:
            file_name = _get(ch, "file_name")
            if _get(ch, "location") != "live":
                continue
            if _get(ch, "valid") is False and _get(ch, "kind") != "removed":
                size = self._sizes().get(file_name)
                ours_only = over_our_limit_only(_get(ch, "findings") or [], size)
                refused = kubelet_drops(_get(ch, "findings") or [], size)
                text, _prio = invalid_sentence(
                    file_name, "", ours_only=ours_only, limit=self.config.max_manifest_bytes, refused=refused
                )
                self.invalid_live[file_name] = {
                    "code": "invalid-live",
                    "severity": "error" if refused else "warning",
                    "component": _get(ch, "component"),
                    "path": str(self.layout.live_path(file_name)),
                    "message": text.replace(" (see staticpodctl validate)", ""),
                }
            else:
                self.invalid_live.pop(file_name, None)

    @staticmethod
    def _restoring(plan: Plan) -> set[str]:
        """File names a ``restore`` action of ``plan`` puts back."""
        return {a.file_name for a in plan.actions if a.verb == "restore" and a.file_name}

    def _plan_invalid_files(self, found: list[Any], changes: list[Any], plan: Plan) -> Plan:
        """Live files whose *current* contents fail validation (per-file error findings) become
        problems and get the ``on_invalid`` policy, whether or not they changed in this pass.

        A file reported through a Change in this pass is left to :func:`plan_changes` (reported
        and restored there). One that was invalid before the daemon looked (recorded earlier: a
        daemon killed mid-restore, a run under ``alert``, a restore skipped while it was being
        written) is reported as INVALID_LIVE once and, under ``on_invalid: restore``, restored
        when the store has an earlier version to go back to. Never restored: a stray by its name,
        a parked component (a write-back breaks the park, PARK_BROKEN), a file being written, or
        bytes whose restore already failed (no retry loop: a new write is tried again).
        KUBELET.md "What a broken file does to a running pod" (the pod dies at the next relist).
        """
        out = Plan()
        mdir = self.layout.manifest_dir
        bad: dict[str, list[Any]] = {}
        for f in found:
            if _get(f, "severity") != "error" or is_directory_finding(f):
                continue
            path = Path(str(_get(f, "path") or ""))
            if path.parent != mdir:
                continue
            bad.setdefault(path.name, []).append(f)
        changed = {_get(c, "file_name") for c in changes}
        busy = self._busy_names()  # being written now: judged after their quiet time
        bad = {name: fs for name, fs in bad.items() if name not in busy}
        for name in list(self.invalid_live):
            if name not in bad and name not in busy:
                self.invalid_live.pop(name, None)
        for name in list(self._restore_failed):
            if name not in bad:
                self._restore_failed.pop(name, None)
        restore_policy = getattr(self.config, "on_invalid", "alert") == "restore"
        restoring = self._restoring(plan)
        observed = self.engine.store.observed() if restore_policy and bad else {}
        sizes = self._sizes()
        limit = self.config.max_manifest_bytes
        for name, fs in bad.items():
            codes = ", ".join(sorted({str(_get(f, "code")) for f in fs}))
            stray = stray_by_name(name)
            component = None if stray else component_of(name)
            new = name not in self.invalid_live
            ours_only = over_our_limit_only(fs, sizes.get(name))
            refused = kubelet_drops(fs, sizes.get(name))  # only what the kubelet refuses is restored over
            text, prio = invalid_sentence(name, codes, ours_only=ours_only, limit=limit, refused=refused)
            if new:
                self.invalid_live[name] = {
                    "code": "invalid-live",
                    "severity": "error" if refused else "warning",
                    "component": component,
                    "path": str(mdir / name),
                    "message": text,
                }
            if name in changed or name in restoring:
                continue  # plan_changes reported it (and decided about a restore) in this pass
            parked = component is not None and self.engine.store.park_of(component) is not None
            restore = (
                restore_policy
                and refused
                and component is not None
                and not parked
                and self._may_restore(name, component, observed)
            )
            if not (new or restore):
                continue
            if restore:
                policy_note = restore_note(ours_only)
            elif not restore_policy:
                policy_note = "; policy on_invalid=alert"
            elif not refused:
                policy_note = (
                    "; not restored: the kubelet runs this file (on_invalid=restore acts only on files the "
                    "kubelet refuses)"
                )
            elif component is None:
                policy_note = "; a stray is never restored (on_stray decides)"
            elif parked:
                policy_note = (
                    f"; not restored: {component} is parked, and on_invalid=restore does not apply to a parked "
                    "component's live path (putting a version back would end the park)"
                )
            else:
                policy_note = f"; not restored: no earlier version passes validation (staticpodctl history {component})"
            out.reports.append(
                Report(
                    Event.INVALID_LIVE,
                    prio,
                    text + policy_note,
                    {
                        "component": component,
                        "file_name": name,
                        "findings": codes,
                        "policy": "restore" if restore_policy else "alert",
                        "policy_action": "restore" if restore else "none",
                        "location": "live",
                        "size": ours_only,
                        "kubelet": "refuses" if refused else "accepts",
                    },
                )
            )
            if restore:
                assert component is not None
                out.actions.append(
                    Action("restore", component, f"on_invalid=restore: {name} fails validation", file_name=name)
                )
        return out

    def _may_restore(self, name: str, component: str, observed: dict[str, Any]) -> bool:
        """Whether ``on_invalid: restore`` should put back an earlier version of a live file that
        is invalid now (see :meth:`_plan_invalid_files`)."""
        store = self.engine.store
        if store.park_of(component) is not None:
            return False
        obs = observed.get(f"live/{name}")
        digest = _get(obs, "digest")
        if not digest:
            return False
        failed = self._restore_failed.get(name)
        if failed is not None and failed == (digest, frozenset(self.engine.live_names())):
            return False
        # only when there is something to go back to: a version that passes validation (else the
        # engine refuses with Conflict, and a true stray would be "restored" instead of quarantined)
        seen = {digest}
        for v in reversed(store.history(component)):  # newest first, as restore_last_good looks
            if v.digest in seen:
                continue
            seen.add(v.digest)
            if self._digest_valid(v.digest, v.file_name):
                return True
        return False

    def _true_findings(self, found: list[Any], plan: Plan) -> list[Any]:
        """The directory findings, minus "stray" findings about a component's manifest.

        The validator calls any file that does not decode to a complete Pod "stray file: not a
        Pod manifest". For the daemon, a true stray is a name that is stray by itself
        (``x.yaml.bak``, ``x~``, ``4913``, ``notes.txt``:
        ``staticpodd.validate.directory.stray_reason``), or a name without a manifest suffix
        (``README``) that is no known component. A manifest-named file that fails to decode
        (an empty or truncated ``etcd.yaml``, ``kind: Pod`` alone, a Deployment) is an invalid
        manifest: reported as INVALID_LIVE and restored under ``on_invalid: restore``, never
        quarantined by ``on_stray``. A file restored in this very pass is never a stray.
        """
        restoring = self._restoring(plan)
        out = []
        for f in found:
            if not is_directory_finding(f):
                continue
            if _get(f, "code") == "stray":
                name = os.path.basename(str(_get(f, "path") or "").rstrip("/"))
                if name in restoring:
                    continue
                if not stray_by_name(name) and (component_of(name) != name or self._is_component_file(name)):
                    continue
            out.append(f)
        return out

    def _is_component_file(self, name: str) -> bool:
        """True when live file ``name`` (no manifest suffix) is a component's manifest: its bytes
        declare ``kind: Pod``, or the component is parked, was changed by a staticpodd verb, or
        has a recorded version that passes validation (see :meth:`_true_findings`)."""
        try:
            with open(self.layout.live_path(name), "rb") as fh:
                head = fh.read(1 << 20)
        except OSError:
            head = b""
        if _DECLARES_POD.search(head):
            return True
        component = component_of(name)
        store = self.engine.store
        if store.park_of(component) is not None:
            return True
        history = [v for v in store.history(component, limit=50) if v.file_name == name]
        if any(v.action != "external" for v in history):
            return True
        return any(self._digest_valid(v.digest, name) for v in reversed(history))

    def _digest_valid(self, digest: str, name: str) -> bool:
        """Whether recorded bytes ``digest`` pass validation (memoised for the daemon's life)."""
        if digest not in self._valid_digests:
            try:
                from .validate import has_errors, validate_bytes  # type: ignore[attr-defined]
            except ImportError:
                return False
            data = self.engine.store.data(digest)
            findings = validate_bytes(data, str(self.layout.live_path(name)), self._validate_options())
            self._valid_digests[digest] = not has_errors(findings)
        return self._valid_digests[digest]

    def _directory_findings(self) -> list[Any]:
        """Directory-level findings from the validator (strays, duplicates, subdirectories,
        symlinks, loose modes/owners). [] when the validator is not available."""
        try:
            from .validate import validate_directory  # type: ignore[attr-defined]
        except ImportError:
            return []
        if not self.layout.manifest_dir.is_dir():
            return []
        from .dirprint import fingerprint
        from .engine import is_utf8_name

        # An unchanged directory (same names, stats and recorded digests, same options) has the
        # same findings: the periodic rescan then parses and validates nothing (issue 14).
        options = self._validate_options()
        digests = {o.file_name: o.digest for o in self.engine.store.observed().values() if o.location == "live"}
        key = fingerprint(self.layout.manifest_dir, digests, repr(options))
        cached = getattr(self, "_dir_findings_cache", None)
        if key is not None and cached is not None and cached[0] == key:
            return list(cached[1])
        # A file whose name is not valid UTF-8 cannot be tracked, restored or quarantined by name
        # (the store keys by name as text); Engine.scan reports it once (name-not-utf8) and
        # `staticpodctl status`/`doctor` name it. Its other findings stay with `staticpodctl validate`.
        found = [f for f in validate_directory(self.layout.manifest_dir, options)
                 if is_utf8_name(os.path.basename(str(_get(f, "path") or "")))]
        if key is not None and key == fingerprint(self.layout.manifest_dir, digests, repr(options)):
            self._dir_findings_cache = (key, found)  # nothing moved while we validated
        return list(found)

    def _validate_options(self) -> Any:
        return validate_options(self.config)

    def _execute(self, plan: Plan) -> None:
        """Log the plan's reports, then ask the engine for its actions (lock held).

        A restore or quarantine is held back while the file is not quiet (:meth:`_hold_reason`):
        changed since the scan, or still open for writing by some process. A held file is
        re-checked when the writer closes it (inotify close-write is a hint) and every
        :data:`HOLD_RECHECK` seconds, so it is never forgotten; the wait is logged once per set
        of writers, naming pid and comm, and the report of a held file is not repeated.
        """
        held: dict[str, tuple[str, list[Writer]]] = {}
        for a in plan.actions:
            if a.verb in ("restore", "quarantine") and a.file_name and a.file_name not in held:
                hold = self._hold_reason(a.file_name, a.verb)
                if hold is not None:
                    held[a.file_name] = hold
        for name in list(self._held):
            if name not in held or held[name][0] != "writer":
                self._held.pop(name, None)
        for r in plan.reports:
            rname = str(r.fields.get("file_name") or "")
            if rname in held and r.event in (Event.INVALID_LIVE, Event.STRAY_FOUND):
                why, _writers = held[rname]
                if why == "writer" and rname in self._held:
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
        for name, (why, writers) in held.items():
            self._retry_names.add(name)
            self._retry_at = time.monotonic() + HOLD_RECHECK
            if why != "writer":
                continue
            pids = frozenset(w.pid for w in writers)
            if self._held.get(name) == pids:
                continue
            self._held[name] = pids
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
        restored: set[str] = set()
        # Strays leave first: a leftover copy of a component (etcd.yaml.bak) defines the same pod,
        # and the engine refuses to restore or unpark a file while another one defines its pod.
        # A file being restored is never quarantined (plan_findings' ``protect``, and below).
        order = {"quarantine": 0, "restore": 1}
        for a in sorted(plan.actions, key=lambda a: order.get(a.verb, 2)):
            if a.verb in ("restore", "quarantine") and (a.file_name in self._busy_names() or a.file_name in held):
                # written again since we looked, or still open for writing: never act on a file
                # someone is writing; the debounced hint (or the re-check) brings it back here
                continue
            if a.verb == "quarantine" and a.file_name in restored:
                continue  # a component's manifest just put back: never moved out of sight
            try:
                if a.verb == "restore":
                    # the bytes judged invalid in this pass (the scan's observation): the engine
                    # restores only while the live file still holds exactly them (issue 11 item 2)
                    judged = self.engine.store.observed().get(f"live/{a.file_name}")
                    res = self.engine.restore_last_good(a.target, reason=a.reason,
                                                        judged_digest=_get(judged, "digest") or "")
                    new = _get(_get(res, "version"), "seq")
                    source = (_get(res, "extra") or {}).get("restored_version")
                    restored.add(a.file_name or "")
                    self.invalid_live.pop(a.file_name or "", None)
                    self._restore_failed.pop(a.file_name or "", None)
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
                elif a.verb == "quarantine":
                    pod = self._pod_defined_by(a.target)
                    self.engine.quarantine(a.target, reason=a.reason)
                    if pod is not None:
                        self._readd_after_quarantine(a.target, pod)
                elif a.verb == "unpark":
                    self.engine.unpark(a.target, reason=a.reason)
            except StaticpodError as exc:
                if exc.code == "changed-meanwhile" and a.file_name:
                    # written again after it was judged: recorded by the engine, never reverted;
                    # the next pass judges the new bytes (and restores them only if invalid)
                    self._say(f"{a.verb} {a.target} skipped: {exc.message}")
                    self._retry_names.add(a.file_name)
                    self._retry_at = time.monotonic() + RETRY_DELAY
                    continue
                self._say(f"{a.verb} {a.target} failed: {exc}")
                if a.verb == "unpark":
                    rec = self.engine.store.park_of(a.target) if hasattr(self.engine.store, "park_of") else None
                    until = _get(rec, "until")
                    if until is not None:
                        self.failed_unparks[(a.target, until)] = exc.code
                    try:  # counted in staticpodd_failed_unparks_total (from the store: survives a restart)
                        self.engine.store.record_event(
                            "unpark-failed", component=a.target, file_name=a.file_name, actor="staticpodd",
                            reason=a.reason, details={"error": exc.code, "until": until},
                        )
                    except StaticpodError:
                        pass
                    self.runtime_problems[f"unpark:{a.target}"] = {
                        "code": "park-expired-unpark-failed",
                        "severity": "error",
                        "component": a.target,
                        "path": None,
                        "message": f"the park of {a.target} expired but unpark failed: {exc.message}",
                    }
                    self.log(
                        Event.POLICY_ACTION_FAILED,
                        f"the park of {a.target} expired but unpark failed: {exc.message}",
                        priority=ERR,
                        component=a.target,
                        error=exc.code,
                    )
                else:
                    if a.verb == "restore" and a.file_name:
                        obs = self.engine.store.observed().get(f"live/{a.file_name}")
                        if obs is not None:  # not retried on these bytes in this directory
                            self._restore_failed[a.file_name] = (obs.digest, frozenset(self.engine.live_names()))
                    self.log(
                        Event.POLICY_ACTION_FAILED,
                        f"{a.file_name or a.target}: {a.verb} of {a.target} failed: {exc.message}",
                        priority=ERR,
                        component=a.target,
                        file_name=a.file_name,
                        error=exc.code,
                    )
            else:
                if a.verb == "unpark":
                    self.runtime_problems.pop(f"unpark:{a.target}", None)

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
        manifest and parked directories' listings and stats (:mod:`staticpodd.dirprint`), the
        store (our own commits: ``total_changes``; anyone else's: ``PRAGMA data_version``), and
        the liveness of the processes behind recorded intents. An idle rescan of a large node
        then reads no file a second time (issue 14)."""
        from .dirprint import fingerprint
        from .engine import pid_alive

        store = self.engine.store
        try:
            key: Any = (fingerprint(self.layout.manifest_dir, {}), fingerprint(self.layout.parked_dir, {}),
                        store._db.total_changes, store._db.execute("PRAGMA data_version").fetchone()[0],
                        tuple((i.id, pid_alive(i.pid)) for i in store.intents()), sorted(self.engine.untrackable))
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
        parks = self.engine.store.parks()
        self.parks = [p.to_dict() if hasattr(p, "to_dict") else dict(p) for p in parks]
        live_keys = {(p.component, p.until) for p in parks}
        self.failed_unparks = {k: v for k, v in self.failed_unparks.items() if k in live_keys}
        deadlines = [
            p.until for p in parks if p.until is not None and (p.component, p.until) not in self.failed_unparks
        ]
        self.next_park_deadline = min(deadlines) if deadlines else None

    # -- reload ---------------------------------------------------------------------------------
    def _reload(self) -> None:
        target = self._hup_requests
        self.state = "reloading"
        self._restore_failed.clear()  # a reload is a reason to try failed restores again
        self.notifier.reloading()
        self._heartbeat()
        try:
            cfg = self._load_config()
            layout = self._layout_for(cfg)
        except ConfigError as exc:
            self._say(f"reload refused, keeping the previous configuration: {exc}")
            self.log(
                Event.CONFIG_INVALID,
                f"new configuration refused, keeping the previous one (generation {self.config_generation}): {exc}",
                priority=ERR,
                config_path=exc.path,
                line=exc.line,
                field=exc.field,
                hint=exc.hint,
            )
            self.reload_state = {"seq": target, "status": "refused", "error": str(exc), "at": time.time()}
        else:
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
                self.invalid_live.clear()
                self.broken_parks.clear()
            else:
                self.layout = layout
            if hasattr(self.engine, "close"):
                try:
                    self.engine.close()
                except Exception:
                    pass
            self.engine = self._build_engine()
            if layout.manifest_dir != old_dir:
                self._check_watch(initial=True)
            self.log(
                Event.CONFIG_RELOADED,
                f"configuration reloaded (generation {self.config_generation})",
                priority=NOTICE,
                config_path=cfg.source,
                config_digest=cfg.digest,
                generation=self.config_generation,
            )
            self.reload_state = {"seq": target, "status": "ok", "error": None, "at": time.time()}
        self._hup_handled = target
        self.state = "running"
        status = self._status_line()
        self.notifier.ready(status)
        self._last_status = status
        self._heartbeat()

    # -- status ---------------------------------------------------------------------------------
    def problems(self) -> list[dict[str, Any]]:
        """Every current problem: runtime, invalid live files, broken parks, directory findings."""
        out = list(self.runtime_problems.values())
        out += list(self.invalid_live.values())
        out += list(self.broken_parks.values())
        out += [p for p in self.dir_problems if p.get("severity") in ("error", "warning")]
        return out

    def _status_line(self) -> str:
        return status_line(self.summary, self.problems())

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
            "watch": {
                "watching": bool(self.watcher and self.watcher.watching),
                "generation": self.watcher.generation if self.watcher else 0,
                "error": self.watcher.error if self.watcher else None,
            },
        }
        try:
            write_heartbeat(self.layout.heartbeat_path, data)
        except OSError as exc:
            if not self._heartbeat_failed:
                self._say(f"cannot write heartbeat {self.layout.heartbeat_path}: {exc.strerror}")
                self.log(Event.DAEMON_ERROR, f"cannot write the heartbeat {self.layout.heartbeat_path}: {exc.strerror}",
                         priority=WARNING, error="heartbeat-write-failed", path=str(self.layout.heartbeat_path))
            self._heartbeat_failed = True
        else:
            self._heartbeat_failed = False


def validate_options(config: Config) -> Any:
    """``staticpodd.validate.Options`` for a Config (None when the validator is not installed).

    Raises ConfigError (field ``kubernetes_version``) when the validator does not support the
    configured Kubernetes minor.
    """
    try:
        from .validate import Options  # type: ignore[attr-defined]
    except ImportError:
        return None
    import inspect

    params = inspect.signature(Options).parameters
    kw: dict[str, Any] = {}
    cap = config.node_capacity
    version = config.kubernetes_version
    if version is not None:
        try:
            from .validate.context import parse_version

            version = parse_version(version)
        except ImportError:
            pass
        except ValueError as exc:
            raise ConfigError(f"kubernetes_version: {exc}", path=config.source, field="kubernetes_version") from None
    for name, value in (
        ("kubernetes_version", version),
        ("max_bytes", config.max_manifest_bytes),
        ("node_name", config.node_name),
        ("cpu_capacity_millis", cap.cpu_millis if cap else None),
        ("memory_capacity_bytes", cap.memory_bytes if cap else None),
    ):
        if name in params and value is not None:
            kw[name] = value
    return Options(**kw)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``staticpodd`` console script. Returns the exit status.

    Exit statuses: 0 clean stop (SIGTERM/SIGINT) or reload done; 78 invalid configuration
    (at start, or refused by ``--reload``); 1 start-up failure; 6 ``--reload`` timed out.
    """
    args = build_parser().parse_args(argv)
    if args.reload:
        try:
            layout = Layout.build(args.root, args.manifest_dir)
        except ConfigError as exc:
            print(f"staticpodd: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        if args.unit:
            bind_textfile_dir(layout, args.unit, config_path=args.config)
        return reload_running(layout, timeout=args.timeout)
    if args.check_config:
        try:
            layout = Layout.build(args.root, args.manifest_dir)
            cfg = load_config(layout, path=args.config)
            validate_options(cfg)
        except ConfigError as exc:
            print(f"staticpodd: invalid configuration: {exc}", file=sys.stderr)
            if exc.hint:
                print(f"hint: {exc.hint}", file=sys.stderr)
            return EXIT_CONFIG
        print(f"configuration OK: {cfg.source or f'{layout.config_path} (absent: all defaults)'}")
        return EXIT_OK
    try:
        daemon = Daemon(args)
    except ConfigError as exc:
        print(f"staticpodd: refusing to start: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return daemon.run()
    finally:
        close = getattr(daemon.journal, "close", None)
        if close is not None:
            close()


if __name__ == "__main__":
    sys.exit(main())
