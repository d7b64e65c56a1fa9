"""Layer 6: node fit -- predict the kubelet's OutOfcpu / OutOfmemory admission failures."""

from __future__ import annotations

from staticpodd.validate.context import Options
from staticpodd.validate.findings import Finding


def directory_fit(pods: dict, options: Options) -> list[Finding]:
    """Placeholder until the node-fit layer lands."""
    return []
