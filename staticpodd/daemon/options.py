"""The validator's options for a daemon configuration (:func:`validate_options`).

Used when the configuration is loaded (at start, on SIGHUP, by ``--check-config``: an unsupported
``kubernetes_version`` is refused then, not at first use) and for every validation the daemon runs.
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..errors import ConfigError


def validate_options(config: Config) -> Any:
    """``staticpodd.validate.Options`` for a Config (None when the validator is not installed).

    Raises ConfigError (field ``kubernetes_version``) when the validator does not support the
    configured Kubernetes minor.
    """
    try:
        from ..validate import Options  # type: ignore[attr-defined]
    except ImportError:
        return None
    import inspect

    params = inspect.signature(Options).parameters
    kw: dict[str, Any] = {}
    cap = config.node_capacity
    version = config.kubernetes_version
    if version is not None:
        try:
            from ..resources import parse_version

            version = parse_version(version)
        except ImportError:
            pass
        except ValueError as exc:
            raise ConfigError(f"kubernetes_version: {exc}", path=config.source, field="kubernetes_version") from None
    for name, value in (
        ("kubernetes_version", version),
        ("max_bytes", config.max_manifest_bytes),
        ("node_name", config.node_name),
        ("cpu_capacity_millis", cap.cpu_millis if cap else None),
        ("memory_capacity_bytes", cap.memory_bytes if cap else None),
    ):
        if name in params and value is not None:
            kw[name] = value
    return Options(**kw)
