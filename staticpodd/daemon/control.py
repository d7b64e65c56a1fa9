"""``staticpodd --reload``: the side of a reload that runs outside the daemon.

Finds the running daemon for a ``--root`` (its pid from the heartbeat, or systemd's ``MAINPID``),
makes sure the pid really is staticpodd, sends SIGHUP and waits for the heartbeat to say the
reload was done or refused (:func:`reload_running`). Under systemd's ``ExecReload=+`` it first binds
a metrics textfile directory created after the start into the unit (:func:`bind_textfile_dir`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ..config import load_config
from ..errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, ConfigError
from ..layout import Layout, under_root
from .heartbeat import read_heartbeat


def bind_textfile_dir(layout: Layout, unit: str, *, config_path: str | None = None,
                      out: Any = sys.stderr) -> bool | None:
    """Before a reload under systemd: when ``metrics.textfile_dir`` (of the configuration about
    to be loaded) exists but is read-only in the running daemon's sandbox (it was created after
    the start, e.g. node-exporter installed later; see :mod:`staticpodd.node.sandbox`), bind it into
    ``unit``'s mount namespace with ``systemctl bind``. Returns True when bound, False when the
    bind failed (said on ``out``; the reload goes on, the daemon reports metrics-write-failed),
    None when there was nothing to do. Needs root outside the sandbox; never raises."""
    from ..node.sandbox import bind_into_unit, read_only_for

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
