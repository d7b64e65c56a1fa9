"""Read-only facts about files, names and processes that several verb families need.

Which directory entries are files (one ``scandir``), a file's stat signature (what lets a scan
skip a file whose bytes were already read), whether a name is valid UTF-8, whether a name has a
config-management tool's temp-file shape, whether a pid is alive. Reads only; never writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

#: A file whose ctime was less than this before its bytes were read gets no stored signature: a
#: write in the same timestamp tick as the read would leave the stat unchanged (git's "racy" rule).
_RACY_NS = 2_000_000_000


def wanted_all(names: Iterable[str] | None) -> bool:
    """Whether a scan of ``names`` is a full one (None: every path)."""
    return names is None


def _sig_text(sig: tuple[int, ...]) -> str:
    return ",".join(map(str, sig))


def _stat_sig(path: str | Path) -> tuple[int, ...] | None:
    """``(size, mtime_ns, ino, dev, mode, uid, gid, ctime_ns)`` of what ``path`` points to, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_mode, st.st_uid, st.st_gid, st.st_ctime_ns)


def _entry_is_file(entry: os.DirEntry[str]) -> bool:
    """``entry.is_file()`` (a file or a link to one), False when it cannot be told (OSError)."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _regular_files(directory: Path) -> set[str]:
    """Names in ``directory`` that are files or links to files (``Path.is_file`` for each), from
    one ``os.scandir``: the entry type comes with the listing, a stat is made only for links."""
    out: set[str] = set()
    try:
        with os.scandir(directory) as it:
            for e in it:
                try:
                    if e.is_file():
                        out.add(e.name)
                except OSError:
                    continue
    except OSError:
        pass
    return out


def _is_tool_tempfile(file_name: str) -> bool:
    """Whether ``file_name`` has a config-management or sed temp file's shape (cmpatterns)."""
    from ..manifest.cmpatterns import identify

    left = identify(file_name)
    return left is not None and left.pattern.kind == "tempfile"


def is_utf8_name(name: str) -> bool:
    """False for a file name that is not valid UTF-8 (``os.listdir`` surrogate-escapes its bytes)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (EPERM counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def refused_link(st: Any) -> str | None:
    """Why the symlink whose target's bytes are ``st`` (a :class:`staticpodd.node.fsops.FileState`) is
    not a pod manifest (the kubelet's refusal, :func:`staticpodd.validate.refused.kubelet_refuses`), or
    None when ``st`` is not a symlink or its target is a manifest. Such a link's bytes are never
    recorded (``/etc/shadow``, a kubeconfig with its key): the scan skips it, ``status`` names it."""
    if not st.is_symlink:
        return None
    from ..validate.refused import kubelet_refuses

    return kubelet_refuses(st.data)
