"""Helpers for the validator's tests: options that do not depend on this machine, pod builders."""

from __future__ import annotations

import json
from typing import Any

import pytest

from staticpodd.validate import Finding, Options

# A fixed node so results never depend on the test machine (name, CPUs, memory, host paths).
NODE = Options(node_name="cp-1", cpu_capacity_millis=4000, memory_capacity_bytes=8 * 2**30, check_host=False)


def pod(
    spec: dict | None = None,
    *,
    name: str = "web",
    namespace: str | None = "kube-system",
    meta: dict | None = None,
    **top: Any,
) -> bytes:
    """JSON bytes of a minimal valid Pod, with ``spec`` keys merged over one nginx container."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata.update(meta or {})
    full_spec: dict[str, Any] = {"containers": [{"name": "main", "image": "nginx:1.27"}]}
    full_spec.update(spec or {})
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": full_spec, **top}
    return json.dumps(doc, indent=2).encode()


def container(**fields: Any) -> dict:
    """A container dict: name main, image nginx:1.27, plus ``fields``."""
    c: dict[str, Any] = {"name": "main", "image": "nginx:1.27"}
    c.update(fields)
    return c


def codes(findings: list[Finding], severity: str | None = None) -> list[str]:
    """The codes of ``findings`` (optionally only one severity), in order."""
    return [f.code for f in findings if severity is None or f.severity == severity]


@pytest.fixture
def node() -> Options:
    return NODE
