"""The heartbeat file ``/run/staticpodd/daemon.json`` (``Layout.heartbeat_path``).

The running daemon rewrites it atomically on every pass of its loop (:func:`write_heartbeat`);
``staticpodctl status`` and ``staticpodd --reload`` read it (:func:`read_heartbeat`). Its format
and its interval are defined here; what goes into it is built by
:meth:`staticpodd.daemon.status.StatusMixin._heartbeat`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..layout import Layout

HEARTBEAT_FORMAT = 1
#: Longest sleep of the main loop, seconds: the heartbeat is never older than this when healthy.
HEARTBEAT_INTERVAL = 10.0


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
