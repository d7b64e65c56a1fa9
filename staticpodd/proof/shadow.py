"""Which file in the manifest directory the kubelet actually runs for one namespace/name.

docs/kubelet-contract.md "Duplicate names across files": pods are keyed by namespace/name; on relist the files
are read in sorted name order and the **lexically last file wins** (``kube-apiserver.yaml.bak``
overrides ``kube-apiserver.yaml``). "Which files are pods": every non-dot entry, no extension
filter, symlinks followed, subdirectories and files over 10 MB skipped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

MAX_CONFIG_LENGTH = 10 * 1024 * 1024  # the kubelet's maxConfigLength: it reads files below it


def pod_key(doc: Any) -> tuple[str, str] | None:
    """(namespace, name) of a decoded Pod document; namespace defaults to ``default``."""
    if not isinstance(doc, Mapping):
        return None
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        return None
    return (str(meta.get("namespace") or "default"), str(meta["name"]))


def _load_first_document(path: Path) -> Any:
    import yaml

    from ..manifest.yamlsafe import FastLoader as loader

    try:
        if path.stat().st_size >= MAX_CONFIG_LENGTH:
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        for doc in yaml.load_all(text, Loader=loader):  # noqa: S506 - a safe loader
            return doc
    except (OSError, yaml.YAMLError, ValueError):
        return None
    return None


class Definer(FrozenRecord):
    """A file in the manifest directory that defines the pod."""

    file_name: Final[str]
    doc: Final[Any]

    def __init__(self, file_name: str, doc: Any) -> None:
        self.file_name = file_name
        self.doc = doc


def files_defining(manifest_dir: Path, namespace: str, name: str) -> list[Definer]:
    """Every file the kubelet reads that defines ``namespace/name``, in the kubelet's order
    (byte-wise sorted names; the last one wins). Unreadable or unparsable files are skipped."""
    try:
        entries = os.listdir(manifest_dir)
    except OSError:
        return []
    out: list[Definer] = []
    for entry in sorted(entries, key=os.fsencode):
        if entry.startswith("."):
            continue
        path = manifest_dir / entry
        if not path.is_file():  # follows symlinks; a dangling link or a directory is skipped
            continue
        doc = _load_first_document(path)
        if pod_key(doc) == (namespace, name):
            out.append(Definer(entry, doc))
    return out


def find_shadowing_file(
    manifest_dir: Path,
    manifest_doc: Mapping[str, Any],
    *,
    manifest_file: str | None = None,
) -> str | None:
    """Name of another file that the kubelet runs instead of ours for the same namespace/name.

    Ours is ``manifest_file`` when given, else any file whose decoded content equals
    ``manifest_doc``. Returns the winning file's name when it is not ours, else None.
    """
    key = pod_key(manifest_doc)
    if key is None:
        return None
    definers = files_defining(manifest_dir, *key)
    if not definers:
        return None
    winner = definers[-1]
    if manifest_file is not None:
        ours = {os.path.basename(manifest_file)}
    else:
        ours = {d.file_name for d in definers if d.doc == manifest_doc}
    if winner.file_name in ours:
        return None
    return winner.file_name


def duplicate_files(manifest_dir: Path, manifest_doc: Mapping[str, Any]) -> list[str]:
    """All files defining the same namespace/name as ``manifest_doc`` (kubelet order)."""
    key = pod_key(manifest_doc)
    return [d.file_name for d in files_defining(manifest_dir, *key)] if key else []
