"""A cheap fingerprint of the manifest directory, so the daemon's periodic full rescan of an
unchanged directory does no YAML parsing or validation.

The directory-level findings (:func:`staticpodd.validate.validate_directory`: duplicates, host
ports, node fit, strays, symlinks, modes) depend only on the directory's own mode and owner,
each non-dot entry's name, type, mode, owner, size and bytes, where symlinks point, and the
validation options. :func:`fingerprint` captures all of that without reading a file: the bytes
enter through the sha256 digest the engine's scan just recorded for each live file (the store's
``observed`` table) together with ``st_size``, ``st_mtime_ns``, ``st_ctime_ns`` and ``st_ino`` from
``lstat`` (any write, rename or chmod changes ctime), so a file replaced or edited after the scan
read it changes the fingerprint too. The kubelet itself decides by listing and stat at each 20 s
relist (docs/kubelet-contract.md "When the kubelet looks").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


def fingerprint(directory: Path, digests: dict[str, str], extra: Any = None) -> tuple[Any, ...] | None:
    """A hashable value that changes whenever the directory-level findings could.

    ``digests``: file name -> sha256 of its bytes as last read (may lack names). ``extra``: any
    hashable the findings also depend on (the validation options). None when the directory
    cannot be listed (the caller then validates, and reports what that says).
    """
    try:
        dst = os.stat(directory)
        names = sorted(os.listdir(directory))
    except OSError:
        return None
    entries: list[tuple[Any, ...]] = []
    for name in names:
        if name.startswith("."):
            continue  # the kubelet never reads dot-names
        p = os.path.join(directory, name)
        try:
            st = os.lstat(p)
        except OSError:
            entries.append((name, None))
            continue
        item: tuple[Any, ...] = (name, st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns,
                                 st.st_ctime_ns, st.st_ino, digests.get(name))
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(p)
                t = os.stat(p)
                item += (target, t.st_mode, t.st_uid, t.st_gid, t.st_size, t.st_mtime_ns, t.st_ctime_ns, t.st_ino)
            except OSError:
                item += (None,)
        entries.append(item)
    return (dst.st_mode, dst.st_uid, dst.st_gid, dst.st_ino, dst.st_mtime_ns, tuple(entries), extra)
