"""The daemon's health as the CLI sees it: its heartbeat file and its pid file's lock.

``status``, ``park`` (is anybody there to end a timed park?) and ``doctor`` read it; nothing here
writes.
"""

from __future__ import annotations

import json
import os
import time

from .output import ago

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


def heartbeat(layout: Any) -> dict[str, Any]:
    """The daemon's health from its heartbeat file (written under /run/staticpodd every loop)."""
    path = layout.heartbeat_path
    try:
        raw = path.read_text(encoding="utf-8")
        st = path.stat()
    except FileNotFoundError:
        return {"running": False, "healthy": False, "detail": "not running (no heartbeat)"}
    except OSError as exc:
        return {"running": False, "healthy": False, "detail": f"heartbeat unreadable: {exc.strerror}"}
    try:
        hb = json.loads(raw)
    except ValueError:
        hb = {}
    pid = hb.get("pid")
    alive = daemon_holds_pidfile(layout)
    if alive is None:  # no pid file to ask (an older daemon): fall back to the pid
        from ..engine.fsfacts import pid_alive

        alive = isinstance(pid, int) and hb.get("state") != "stopped" and pid_alive(pid)
    age = time.time() - st.st_mtime
    interval = hb.get("heartbeat_interval") or hb.get("rescan_interval") or 20
    stale_after = max(3 * float(interval), 30.0)
    healthy = alive and age <= stale_after and not hb.get("problems")
    if not alive:
        detail = f"not running (last heartbeat {ago(age)} ago, pid {pid} gone)"
    elif age > stale_after:
        detail = f"running (pid {pid}) but STUCK: last heartbeat {ago(age)} ago"
    else:
        detail = f"running (pid {pid}), heartbeat {ago(age)} ago"
        if hb.get("problems"):
            detail += f", {len(hb['problems'])} problem(s)"
    return {"running": alive, "healthy": healthy, "stuck": bool(alive and age > stale_after),
            "heartbeat_age": round(age, 1), "pid": pid,
            "detail": detail, "summary": hb.get("summary"),
            # a dead daemon's last problems are history, not the state of the node
            "problems": (hb.get("problems") or []) if alive else [],
            "cluster": (hb.get("cluster") or {}) if alive else {}}


def daemon_holds_pidfile(layout: Any) -> bool | None:
    """Whether a staticpodd holds its exclusive flock on ``<run>/staticpodd.pid`` (immune to pid
    reuse); None when there is no pid file."""
    import fcntl

    try:
        fd = os.open(layout.run_dir / "staticpodd.pid", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
