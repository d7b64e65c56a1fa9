"""staticpodd: the daemon that watches the manifest directory, records every change, enforces parks.

Composition root and lifecycle (docs/development.md, "A map of the code"): builds the Layout, Config,
Journal, Engine, Watcher and Notifier, then runs one main loop in the main thread.

Start-up: first the exclusive flock on ``<run_dir>/staticpodd.pid`` (one daemon per --root; a
second one exits 1 naming the running pid), config (invalid -> exit 78), recover interrupted
operations (``Engine.recover``), start the inotify watch (on the directory staticPodPath resolves
to), full reconcile, then ``READY=1``. Every full pass judges the live files' current validity,
not only what changed since the last look. Loop: block on the wake-up pipe
(inotify hints, signals) with a timeout = the earliest of the next debounced hint, the next
full rescan (``rescan_interval``, docs/kubelet-contract.md "When the kubelet looks"), the next watchdog ping,
the next park deadline and the heartbeat interval. Signal handlers only set flags; the
wake-up fd (``signal.set_wakeup_fd``) makes the loop notice them at once.

- SIGHUP: ``RELOADING=1``, re-read the config; keep the old one if the new one is invalid
  (CONFIG_INVALID), then ``READY=1`` again. ``staticpodd --reload`` sends it and waits.
- SIGTERM/SIGINT: what changed since the last pass and whose writer is done is reconciled at
  once (not after its debounce), then ``STOPPING=1``, DAEMON_STOPPING, exit 0.

The heartbeat ``/run/staticpodd/daemon.json`` (``Layout.heartbeat_path``) is rewritten
atomically on every loop; ``staticpodctl status`` reads it (see :func:`staticpodd.daemon.heartbeat.read_heartbeat`).

The package's modules (each imports only its siblings below it; this file offers
:class:`Daemon`, ``build_parser`` (the man page) and ``main`` (the console script)):

- ``command``: the ``staticpodd`` parser and ``main`` (the console script; ``python -m staticpodd.daemon``).
- ``control``: ``staticpodd --reload`` from outside (find the daemon, SIGHUP, wait).
- ``lifecycle``: :class:`Daemon`: pid lock, start-up to READY=1, signals, stop; installs a
  reloaded configuration.
- ``loop``: the main loop, one reconcile pass, retries, retention pruning.
- ``reload``: :class:`Reloader`: SIGHUP counted, the configuration re-read; the daemon installs it
  (engine, watch).
- ``policies``: planning ``on_invalid`` over the current findings; true strays versus broken manifests.
- ``execute``: carrying a plan out (restore, quarantine, unpark), holds and failures.
- ``writers``: :class:`WriterHolds`: stat snapshots and open writers that hold a restore or
  quarantine back.
- ``findings``: :class:`FindingsCache`: the directory's findings, kept in memory and in the store
  under a key of all they depend on (a restart on an unchanged directory validates nothing).
- ``retries``: :class:`RetryQueue` (names and passes to look at again, and when) and
  :class:`Backoff` (actions the engine refused, tried again after a growing delay).
- ``watching``: :class:`WatchKeeper`: the inotify watch's state changes and the directory's writability.
- ``status``: :class:`StatusReporter`: STATUS= line, summary, metrics textfile, heartbeat payload.
- ``problems``: :class:`Problems`: what is wrong now (runtime, invalid live files, broken parks,
  names taken, directory findings); every part reports to it, the reporter reads it.
- ``base``: the daemon's state (and the parts above it holds), logging, configuration loading,
  engine building, the heartbeat's daemon-kept facts; shared constants.
- ``heartbeat``, ``options``, ``bgjournal``, ``memory``: the heartbeat file, the validator's options,
  the non-blocking journal writer, giving freed heap back after a full pass.
"""

from __future__ import annotations

from .command import build_parser, main
from .lifecycle import Daemon

__all__ = ["Daemon", "build_parser", "main"]
