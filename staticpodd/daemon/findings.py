"""The directory's findings: made once per state of the directory, and kept across restarts.

The daemon's directory findings (:func:`staticpodd.validate.validate_directory`: each live file's
own findings, strays, duplicates, host ports, node fit, symlinks, modes and owners) depend only on

- the manifest directory's path, listing and each entry's stat and bytes
  (:func:`staticpodd.node.dirprint.fingerprint`: the bytes enter through the sha256 digests the scan
  has just recorded, with size, mtime, ctime and inode, so any write, rename or chmod changes it);
- the validation options (``kubernetes_version``, ``max_manifest_bytes``, ``node_name``,
  ``node_capacity`` …: :func:`staticpodd.daemon.options.validate_options`);
- the validator's code and Pod schemas (:func:`staticpodd.resources.validator_id`) and the
  config-management file names that make a stray (``manifest/cmpatterns.py``);
- what the options leave to the host: its node name, CPU count and ``MemTotal`` (the node-fit
  check reads /proc when ``node_capacity`` is not set), and its boot (``boot_id``): the
  ``hostpath-missing`` warnings look at paths outside the directory, which nothing here
  watches; a reboot, or a SIGHUP (:meth:`staticpodd.daemon.reload.Reloader.reload`), has
  them looked at again.

:func:`findings_key` hashes all of it into one sha256 hex key. The daemon's
:class:`FindingsCache` keeps the findings under that key in memory and in the version store
(table ``dirfindings``, one row: :meth:`staticpodd.store.versions.VersionStore.set_dir_findings`), so
that a periodic rescan *and a restart* on an unchanged directory parse and validate nothing
(READY on restart at 1,000 manifests). The scan before it still reads every file whose stat
changed while the daemon was down, and such a file's digest and stat change the key: nothing
written meanwhile is missed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..engine.kept import FIELDS, FORMAT, code_id, decode, encode, findings_key, hashed, host_facts
from ..store.versions import VersionStore

__all__ = ["FIELDS", "FORMAT", "FindingsCache", "code_id", "decode", "encode", "findings_key", "hashed",
           "host_facts"]

class FindingsCache:
    """The directory's findings as last made, under their :func:`findings_key`, in memory and in
    the version store; and each live file's own findings by digest
    (:class:`staticpodd.validate.podfacts.FileMemo`), so that a pass validates only the files
    that changed.

    ``store()``: the version store the findings are kept in; ``manifest_dir()``: the directory
    they are about (both as the daemon has them now: a reload replaces them).
    """

    def __init__(self, *, store: Callable[[], VersionStore], manifest_dir: Callable[[], Path]) -> None:
        self._store = store
        self._manifest_dir = manifest_dir
        self._kept: tuple[str, list[Any]] | None = None
        # the store is looked at once, for what an earlier run kept
        self._store_unread = True
        self._file_memo: Any = None

    def file_memo(self) -> Any:
        """Each live file's own findings from the last validation, by digest (made on first use)."""
        if self._file_memo is None:
            from ..validate.podfacts import FileMemo

            self._file_memo = FileMemo()
        return self._file_memo

    def known(self, key: str | None) -> list[Any] | None:
        """The findings kept under ``key``: in memory, or (at the first look after a start) in
        the store, as an earlier run left them; None when none are (the caller validates)."""
        if key is None:
            return None
        if self._kept is not None and self._kept[0] == key:
            return self._kept[1]
        if not self._store_unread:
            return None  # the store holds nothing memory does not (this process wrote it last)
        self._store_unread = False
        from ..errors import StaticpodError

        try:
            kept = self._store().dir_findings(str(self._manifest_dir()), key)
        except StaticpodError:
            return None  # a cache: the pass validates, and reports what fails there
        found = decode(kept) if kept is not None else None
        if found is not None:
            self._kept = (key, found)
        return found

    def keep(self, key: str, found: list[Any]) -> None:
        """Keep ``found`` under ``key`` in memory and in the store, for the next start (best
        effort: a store that cannot be written keeps nothing, and the next start validates)."""
        from ..errors import StaticpodError

        self._kept = (key, found)
        self._store_unread = False
        try:
            self._store().set_dir_findings(str(self._manifest_dir()), key, encode(found))
        except StaticpodError:
            pass

    def forget(self) -> None:
        """Drop everything kept (a reload: the options may have changed, and it is how to have
        what the key cannot cover, such as a hostPath created since, looked at again): the
        whole directory, and every file, is judged anew."""
        self._kept = None
        self._store_unread = False
        self._file_memo = None
