"""The node's record of the pods pinned by hand (no client import).

``staticpodctl pin`` writes, under the state directory (``<root>/var/lib/staticpodd/pins``, mode
0700, files 0600, written to a temporary name, fsynced, then renamed):

- ``NAMESPACE_NAME.json``: one pinned pod: ``{"namespace", "name", "node", "uid", "pinned_at"
  (ISO 8601 UTC), "actor", "bare" (no ownerReferences), "owners", "warnings" (the rule names
  walked around)}``;
- ``originals/NAMESPACE_NAME-STAMP.json``: the pod exactly as it was read before the delete, so a
  replace that failed half-way can be recovered from it by hand (``kubectl create -f``, after
  removing what :mod:`staticpodd.pin.strip` removes) even when the automatic recreate failed too.

:func:`list_local_pins` is what ``staticpodctl status`` (and the cluster view) read. A file another
user could have written (not owned by root or by us, or writable by group/other) is never trusted.
"""

from __future__ import annotations

import json
import os
import re
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: A namespace and a pod name are DNS names: lower-case letters, digits, '-' and '.'.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def pins_dir(state_dir: str | os.PathLike[str]) -> str:
    """``<state_dir>/pins``."""
    return os.path.join(os.fspath(state_dir), "pins")


def _key(namespace: str, name: str) -> str:
    if not _NAME.match(namespace) or not _NAME.match(name):
        raise ValueError(f"not a namespace/pod name: {namespace!r}/{name!r}")
    return f"{namespace}_{name}"


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _ensure_dir(path: str) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid not in (0, os.geteuid()):
        raise PermissionError(f"{path}: not a directory of root's or ours")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)


def keep_original(state_dir: str | os.PathLike[str], pod: dict[str, Any]) -> str:
    """Write the pod as read (the API server's whole object) to ``pins/originals/``; returns the
    path. Raises OSError (the caller replaces nothing then) or ValueError for a bad name."""
    meta = pod.get("metadata") or {}
    key = _key(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
    base = pins_dir(state_dir)
    _ensure_dir(base)
    _ensure_dir(os.path.join(base, "originals"))
    path = os.path.join(base, "originals", f"{key}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")
    _write(path, (json.dumps(pod, indent=2, sort_keys=True, default=str) + "\n").encode())
    return path


def record_pin(state_dir: str | os.PathLike[str], entry: dict[str, Any]) -> str:
    """Write one pinned pod's record (the module's fields); returns the path. Raises OSError/ValueError."""
    key = _key(str(entry["namespace"]), str(entry["name"]))
    base = pins_dir(state_dir)
    _ensure_dir(base)
    path = os.path.join(base, f"{key}.json")
    _write(path, (json.dumps(entry, indent=2, sort_keys=True) + "\n").encode())
    return path


def _trusted(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    import stat

    from ..node.trust import problem_of

    return stat.S_ISREG(st.st_mode) and problem_of(st) is None


def list_local_pins(state_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The pods this node pinned, oldest first: each record's fields (module docstring) plus
    ``path``. Missing directory: []. Records that do not parse or that another user could have
    written are skipped (never trusted). Never raises for a missing or unreadable directory.

    For the cluster view: a record says what this node did; whether the pod is still there (same
    ``uid``) is for the caller to ask the API server.
    """
    base = pins_dir(state_dir)
    if not _trusted_dir(base):
        return []
    out = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    for n in names:
        path = os.path.join(base, n)
        if not n.endswith(".json") or not _trusted(path):
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("namespace"), str):
            entry["path"] = path
            out.append(entry)
    out.sort(key=lambda e: str(e.get("pinned_at") or ""))
    return out


def _trusted_dir(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    import stat

    from ..node.trust import problem_of

    return stat.S_ISDIR(st.st_mode) and problem_of(st) is None


def forget_pin(state_dir: str | os.PathLike[str], namespace: str, name: str) -> bool:
    """Remove one pin record (the pod is gone or was re-pinned elsewhere); True if there was one."""
    try:
        os.unlink(os.path.join(pins_dir(state_dir), f"{_key(namespace, name)}.json"))
        return True
    except (OSError, ValueError):
        return False
