"""Layer 3: the core/v1 Pod schema (placeholder)."""

from __future__ import annotations

from pathlib import Path


def schema_dir() -> Path:
    """Directory holding ``pod-1.NN.json``: $STATICPODD_SCHEMAS or the repo's ``schemas/``."""
    import os

    env = os.environ.get("STATICPODD_SCHEMAS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "schemas"
