"""Where the shipped data files are, which Kubernetes minors they cover, and the validator's identity;
stdlib only, cheap to import.

JSON Schemas (``pod-1.NN.json``, ``staticpodd-config.schema.json``) are looked for, in order:
``$STATICPODD_SCHEMAS`` (or the older ``$STATICPODD_SCHEMA_DIR``), the source tree's ``schemas/``
(editable installs, tests), ``<sys.prefix>/share/staticpodd/schemas`` (pip), and
``/usr/share/staticpodd/schemas`` (the .deb and .rpm).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

_PKG = Path(__file__).resolve().parent

SUPPORTED_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
"""Kubernetes minors we ship Pod schemas for (oldest first); the newest is the default."""
DEFAULT_VERSION = SUPPORTED_VERSIONS[-1]


def parse_version(text: str) -> str:
    """Normalise ``1.NN`` / ``v1.NN`` / ``1.NN.P`` to ``"1.NN"``; raises ValueError if unsupported."""
    t = text.strip().lstrip("v")
    parts = t.split(".")
    if len(parts) < 2 or parts[0] != "1" or not parts[1].isdigit():
        raise ValueError(f"not a Kubernetes version: {text!r} (expected 1.NN)")
    v = f"1.{int(parts[1])}"
    if v not in SUPPORTED_VERSIONS:
        raise ValueError(f"Kubernetes {v} is not supported; choose one of {', '.join(SUPPORTED_VERSIONS)}")
    return v


def schema_dirs() -> list[Path]:
    """The directories searched for schemas, in order (existing or not)."""
    dirs = [Path(v) for v in (os.environ.get("STATICPODD_SCHEMAS"), os.environ.get("STATICPODD_SCHEMA_DIR")) if v]
    dirs += [
        _PKG.parent / "schemas",
        Path(sys.prefix) / "share" / "staticpodd" / "schemas",
        Path("/usr/share/staticpodd/schemas"),
    ]
    return dirs


def find_schema(name: str) -> Path:
    """Path of the schema file ``name`` in the first directory that has it.

    Raises FileNotFoundError whose message names the file and every directory searched.
    """
    dirs = schema_dirs()
    for d in dirs:
        p = d / name
        if p.is_file():
            return p
    raise FileNotFoundError(f"schema {name} not found; looked in " + ", ".join(map(str, dirs)))


_validator_id: str | None = None


_DECODER = (
    "manifest/positions.py",
    "manifest/decoded.py",
    "manifest/decoding.py",
    "manifest/yamldecode.py",
    "manifest/yamlresolve.py",
    "manifest/jsondecode.py",
    "manifest/hostclaims.py",
)
"""The modules outside ``validate/`` whose change must invalidate cached verdicts, hashed into the
validator id (paths under the package): the YAML and JSON decoders, and ``manifest/hostclaims.py``, the
host-port rule ``validate DIR`` applies outside ``validate/`` (the daemon's kept findings)."""


def validator_id() -> str:
    """An id that changes whenever the validation rules or the Pod schemas change.

    The engine caches gate verdicts by (digest, validator id), so ``unpark`` of bytes that
    already passed need not load the validator. Hashes the sources of ``staticpodd/validate/``
    and of the YAML and JSON decoders (:data:`_DECODER`),
    plus the Pod schemas' names, sizes and first 4 KiB. Cached per process.
    """
    global _validator_id
    if _validator_id is None:
        h = hashlib.sha256()
        vdir = _PKG / "validate"
        for p in sorted(vdir.glob("*.py")) + [_PKG / name for name in _DECODER]:
            h.update(p.name.encode())
            h.update(p.read_bytes())
        sdir = next((d for d in schema_dirs() if any(d.glob("pod-*.json"))), None)
        if sdir is not None:
            for p in sorted(sdir.glob("pod-*.json")):
                h.update(f"{p.name}:{p.stat().st_size}".encode())
                with open(p, "rb") as fh:
                    h.update(fh.read(4096))
        _validator_id = "staticpodd-validate/" + h.hexdigest()[:16]
    return _validator_id

