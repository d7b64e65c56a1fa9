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


class HeartbeatEncoder:
    """``json.dumps(data, sort_keys=True)`` of a heartbeat, byte for byte, re-encoding the
    ``problems`` list only when it changed since the last call.

    A node with thousands of findings has a heartbeat of about 1.5 MB, rewritten every
    :data:`HEARTBEAT_INTERVAL` seconds for its ``last_loop``: encoding it was most of the idle
    daemon's CPU (issue 14). The list is compared (``==``) with the list encoded last; the
    daemon replaces a problem dict when it changes, never edits one in place (no copy is kept:
    1 MB at 3,000 problems).
    """

    def __init__(self) -> None:
        self._problems: list[dict[str, Any]] | None = None
        self._encoded = ""

    def encode(self, data: dict[str, Any]) -> str:
        """The heartbeat ``data`` (a dict with str keys) as JSON text, keys sorted."""
        parts = []
        for key in sorted(data):
            value = data[key]
            if key == "problems" and isinstance(value, list):
                if self._problems is None or value != self._problems:
                    self._encoded = json.dumps(value, sort_keys=True)
                    self._problems = value
                text = self._encoded
            else:
                text = json.dumps(value, sort_keys=True)
            parts.append(f"{json.dumps(key)}: {text}")
        return "{" + ", ".join(parts) + "}"


def write_heartbeat(path: Path, data: dict[str, Any], encoder: HeartbeatEncoder | None = None) -> None:
    """Atomically replace the heartbeat JSON at ``path`` (temp file + rename in the same dir).
    ``encoder``: one kept across calls makes an unchanged problem list free to encode."""
    path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = encoder.encode(data) if encoder is not None else json.dumps(data, sort_keys=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
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
