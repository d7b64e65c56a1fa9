"""What every file-level rule receives: the decoded document, positions and options."""

from __future__ import annotations

import os

from staticpodd.manifest.decoded import DEFAULT_MAX_BYTES
from staticpodd.resources import DEFAULT_VERSION
from staticpodd.validate.findings import Finding, make

from ..record import FrozenRecord, Record

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

class Options(FrozenRecord):
    """How to validate.

    ``kubernetes_version``: the kubelet minor to judge against, ``"1.NN"``.
    ``strict``: unknown fields are errors instead of warnings.
    ``max_bytes``: size cap for one file (the kubelet's own is 10 MB).
    ``node_name``: the kubelet's node name (appended to pod names); None -> this host's name.
    ``cpu_capacity_millis`` / ``memory_capacity_bytes``: node capacity; None -> /proc.
    ``cpu_reserved_millis`` / ``memory_reserved_bytes``: the kubelet's kubeReserved plus
    systemReserved (default 0, as the kubelet's). ``memory_eviction_hard``: its evictionHard
    ``memory.available`` threshold, a quantity (``"100Mi"``, the kubelet's default) or a
    percentage of capacity (``"5%"``). Pods are admitted against allocatable = capacity minus
    those (docs/kubelet-contract.md "What the kubelet refuses"; pkg/kubelet/cm/helpers.go).
    ``check_host``: check hostPath paths on this machine (False when validating for another node).
    """

    kubernetes_version: Final[str]
    strict: Final[bool]
    max_bytes: Final[int]
    node_name: Final[str | None]
    cpu_capacity_millis: Final[int | None]
    memory_capacity_bytes: Final[int | None]
    check_host: Final[bool]
    cpu_reserved_millis: Final[int]
    memory_reserved_bytes: Final[int]
    memory_eviction_hard: Final[str]

    def __init__(self, kubernetes_version: str = DEFAULT_VERSION, strict: bool = False,
                 max_bytes: int = DEFAULT_MAX_BYTES, node_name: str | None = None,
                 cpu_capacity_millis: int | None = None, memory_capacity_bytes: int | None = None,
                 check_host: bool = True, cpu_reserved_millis: int = 0, memory_reserved_bytes: int = 0,
                 memory_eviction_hard: str = "100Mi") -> None:
        self.kubernetes_version = kubernetes_version
        self.strict = strict
        self.max_bytes = max_bytes
        self.node_name = node_name
        self.cpu_capacity_millis = cpu_capacity_millis
        self.memory_capacity_bytes = memory_capacity_bytes
        self.check_host = check_host
        self.cpu_reserved_millis = cpu_reserved_millis
        self.memory_reserved_bytes = memory_reserved_bytes
        self.memory_eviction_hard = memory_eviction_hard

    def resolved_node_name(self) -> str:
        """The node name the kubelet would use: ``node_name`` or the lower-cased host name."""
        if self.node_name:
            return self.node_name
        return os.uname().nodename.strip().lower()

    def minor(self) -> int:
        """The minor number of ``kubernetes_version`` (``"1.34"`` -> 34)."""
        return int(self.kubernetes_version.split(".")[1])


class Context(Record):
    """One file being validated: rules read ``doc``/``spec`` and call :meth:`add`."""

    doc: dict
    positions: dict
    path: str
    options: Options
    findings: list[Finding]

    def __init__(self, doc: dict, positions: dict, path: str, options: Options,
                 findings: list[Finding] | None = None) -> None:
        self.doc = doc
        self.positions = positions
        self.path = path
        self.options = options
        self.findings = [] if findings is None else findings

    @property
    def spec(self) -> dict:
        spec = self.doc.get("spec")
        return spec if isinstance(spec, dict) else {}

    def add(self, code: str, severity: str, field_path: str | None, message: str, hint: str | None = None) -> None:
        """Record a finding located at ``field_path``."""
        self.findings.append(make(code, severity, self.path, self.positions, field_path, message, hint))

    def containers(self, *, init: bool = True, regular: bool = True) -> list[tuple[str, dict]]:
        """``(field path, container)`` for initContainers then containers (dicts only)."""
        out: list[tuple[str, dict]] = []
        keys = (["initContainers"] if init else []) + (["containers"] if regular else [])
        for key in keys:
            items = self.spec.get(key)
            if isinstance(items, list):
                for i, c in enumerate(items):
                    if isinstance(c, dict):
                        out.append((f"spec.{key}[{i}]", c))
        return out


def as_list(value: Any) -> list:
    """``value`` if it is a list, else an empty list (rules never crash on wrong types)."""
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict:
    """``value`` if it is a dict, else an empty dict."""
    return value if isinstance(value, dict) else {}
