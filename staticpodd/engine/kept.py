"""The directory's findings kept under a key of all they depend on: the key and the encoding.

Shared by the daemon (:class:`staticpodd.daemon.findings.FindingsCache` keeps them in memory and
in the store) and ``staticpodctl doctor`` (which takes what the daemon kept for the directory as
it is now instead of validating a 9.5 MB pod again). What the key covers is said in
:mod:`staticpodd.daemon.findings`.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

from ..node.dirprint import fingerprint
from ..store.versions import digest_of

#: Bumped whenever what the key covers or how findings are encoded changes: a kept row made by
#: other code is then simply not found.
FORMAT = 1

#: The fields of a ``staticpodd.validate.Finding``, in the order :func:`encode` writes them.
FIELDS = ("code", "severity", "path", "line", "column", "field", "message", "hint", "kubelet")

_code_id: str | None = None


def hashed(value: Any) -> str:
    """sha256 hex of ``repr(value)``: a 64-character stand-in for a large key (a fingerprint of
    a thousand entries is some 200 KB of tuples) that is equal exactly when the values'
    representations are. ``value``: built of str, int, None and tuples (a stable ``repr``)."""
    return digest_of(repr(value).encode("utf-8", "surrogateescape"))


def code_id() -> str:
    """The validator's id (:func:`staticpodd.resources.validator_id`) together with the source of
    ``staticpodd/manifest/cmpatterns.py`` (which file names are strays): changes whenever the code that
    makes the directory findings does. Cached per process."""
    global _code_id
    if _code_id is None:
        from ..resources import validator_id

        src = Path(__file__).resolve().parents[1] / "manifest/cmpatterns.py"
        try:
            extra = digest_of(src.read_bytes())
        except OSError:
            extra = "no-cmpatterns"
        _code_id = f"{validator_id()}+{extra[:16]}"
    return _code_id


def host_facts() -> tuple[str, int | None, str, str]:
    """``(node name, CPUs, MemTotal line, boot_id)`` of this host: what the validation reads of
    the host when the options leave it open (see the module docstring). Missing files give ""."""

    def first(path: str, prefix: str = "") -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.startswith(prefix):
                        return line.strip()
        except OSError:
            pass
        return ""

    return (os.uname().nodename.strip().lower(), os.cpu_count(), first("/proc/meminfo", "MemTotal:"),
            first("/proc/sys/kernel/random/boot_id"))


def findings_key(directory: Path, digests: dict[str, str], options: Any) -> str | None:
    """The key the directory findings of ``directory`` are kept under (sha256 hex), or None when
    the directory cannot be listed (then nothing is kept or looked up: the caller validates).

    ``digests``: file name -> sha256 of its bytes as the scan last recorded them (the store's
    ``observed`` rows of live files); ``options``: the ``staticpodd.validate.Options`` the
    findings are made with (its ``repr`` enters the key).
    """
    fp = fingerprint(directory, digests, repr(options))
    if fp is None:
        return None
    return hashed((FORMAT, str(directory), code_id(), host_facts(), fp))


def encode(findings: list[Any]) -> bytes:
    """``findings`` (``staticpodd.validate.Finding`` objects, or dicts with the same keys) as
    compact bytes for the store: zlib-compressed JSON, one list of :data:`FIELDS` per finding
    (about 25 KB for the 3,000 findings of a 1,000-manifest node)."""
    rows = [[f.get(name) if isinstance(f, dict) else getattr(f, name, None) for name in FIELDS] for f in findings]
    return zlib.compress(json.dumps(rows, separators=(",", ":")).encode("ascii"), 6)  # JSON escapes non-ASCII


def decode(payload: bytes) -> list[Any] | None:
    """The findings :func:`encode` made, as ``staticpodd.validate.Finding`` objects equal to the
    ones encoded; None when ``payload`` cannot be read back (then the caller validates)."""
    try:
        from ..validate.findings import Finding

        rows = json.loads(zlib.decompress(payload))
        # one string object per distinct value, not one per finding: codes, hints, paths and many
        # messages ("mode 0644 lets others read it …") repeat across files
        seen: dict[Any, Any] = {}
        return [Finding(*(seen.setdefault(v, v) if isinstance(v, str) else v for v in row)) for row in rows]
    except (ValueError, TypeError, zlib.error, ImportError):
        return None
