"""What the systemd sandbox lets the daemon write, and how a directory that appeared later gets in.

The unit (``systemd/staticpodd.service``) runs the daemon with ``ProtectSystem=strict``: the
whole file system is read-only in its mount namespace except the ``ReadWritePaths=`` bind
mounts, which systemd sets up once, at start. A granted directory that did not exist then (the
``-`` prefix skips it), or that was deleted and recreated since (the bind mount of the old one
went away with it), is visible to the daemon but read-only (EROFS). Two ways back:

* the manifest directory: the daemon exits :data:`EXIT_SANDBOX` and ``Restart=on-failure``
  starts it in a new sandbox that binds the directory ;
* the metrics textfile directory: ``systemctl reload`` (``ExecReload=+…``, outside the
  sandbox) binds it into the running daemon's namespace with ``systemctl bind`` (12.7).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

EXIT_SANDBOX = 75  # EX_TEMPFAIL: restart me (Restart=on-failure), the sandbox is out of date


def read_only_mount(path: Path | str) -> bool:
    """True when ``path`` exists and lies on a mount that is read-only *for this process*
    (``statvfs`` ``ST_RDONLY``: the per-mount flag of a ``ProtectSystem=`` bind as well as a
    read-only file system). False when it is writable as far as the mount goes, or missing."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def under_service_manager() -> bool:
    """True when systemd started this process as a service (``INVOCATION_ID`` or
    ``NOTIFY_SOCKET`` is set): an exit with :data:`EXIT_SANDBOX` is then followed by a restart."""
    return bool(os.environ.get("INVOCATION_ID") or os.environ.get("NOTIFY_SOCKET"))


def read_only_for(pid: int, path: Path | str) -> bool | None:
    """Whether ``path`` is read-only in the mount namespace of process ``pid``, seen through
    ``/proc/PID/root`` (needs root, outside that process's sandbox). None when unknown (the
    process is gone or the path is missing there)."""
    inside = Path(f"/proc/{pid}/root") / str(path).lstrip("/")
    try:
        return bool(os.statvfs(inside).f_flag & os.ST_RDONLY)
    except OSError:
        return None


def bind_into_unit(unit: str, path: Path | str, *, timeout: float = 30) -> tuple[bool, str]:
    """``systemctl bind UNIT PATH``: bind-mount ``path`` (read-write) into the running unit's
    mount namespace (systemd >= 248; the unit needs a mount namespace of its own, which
    ``ProtectSystem=`` gives it). Returns ``(ok, message)``; never raises."""
    try:
        r = subprocess.run(["systemctl", "bind", unit, str(path)], capture_output=True, text=True,
                           timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"systemctl bind {unit} {path}: {exc}"
    if r.returncode != 0:
        return False, f"systemctl bind {unit} {path} failed ({r.returncode}): {(r.stderr or r.stdout).strip()}"
    return True, f"bound {path} into {unit}'s sandbox"


_network: bool | None = None


def network_available() -> bool:
    """Whether this process may open an IP socket at all (cached). False under the unit's
    default sandbox (``RestrictAddressFamilies=AF_UNIX``: socket(AF_INET) fails with
    EAFNOSUPPORT) -- and so for every hook the daemon runs, which inherits it."""
    global _network
    if _network is None:
        import socket

        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
            _network = True
        except OSError:
            _network = False
    return _network


NO_NETWORK_NOTE = ("hooks run by staticpodd have no network (the unit's sandbox: PrivateNetwork=yes, "
                   "RestrictAddressFamilies=AF_UNIX); give them network with the drop-in in README "
                   "'Run as a service', or notify through a local socket")
