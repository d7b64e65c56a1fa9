"""What the prover reports: progress while it waits, one look at the runtime, and the outcome.

:class:`Progress` (one report to a :data:`ProgressCallback`), :class:`PodObservation` (the pod's
sandboxes and containers at one moment) and :class:`Outcome` (what a wait proved, with its
``--json`` and journal shapes and the :class:`~staticpodd.errors.WaitTimeout` it raises).
Records only: :mod:`.prover` and :mod:`.looking` produce them; ``staticpodd.proof`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import WaitTimeout
from ..record import FrozenRecord, Record
from .runtime import Container, Sandbox

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final


class Progress(FrozenRecord):
    """One progress report. ``phase``: stopping | sandbox | containers | health | relist | done.

    ``message``: what is being waited for, in words. ``elapsed``/``timeout``: seconds.
    """

    phase: Final[str]
    message: Final[str]
    elapsed: Final[float]
    timeout: Final[float]
    done: Final[bool]

    def __init__(self, phase: str, message: str, elapsed: float, timeout: float, done: bool = False) -> None:
        self.phase = phase
        self.message = message
        self.elapsed = elapsed
        self.timeout = timeout
        self.done = done


ProgressCallback = Callable[[Progress], None]


class PodObservation(FrozenRecord):
    """What the runtime showed for one pod at ``taken_at`` (wall-clock seconds)."""

    pod_name: Final[str]
    namespace: Final[str]
    taken_at: Final[float]
    sandboxes: Final[tuple[Sandbox, ...]]
    containers: Final[tuple[Container, ...]]
    similar_names: Final[tuple[str, ...]]  # ready static pods named <base>-<other node name>

    def __init__(self, pod_name: str, namespace: str, taken_at: float, sandboxes: tuple[Sandbox, ...] = (),
                 containers: tuple[Container, ...] = (), similar_names: tuple[str, ...] = ()) -> None:
        self.pod_name = pod_name
        self.namespace = namespace
        self.taken_at = taken_at
        self.sandboxes = sandboxes
        self.containers = containers
        self.similar_names = similar_names

    @property
    def ready_sandboxes(self) -> list[Sandbox]:
        return [s for s in self.sandboxes if s.ready]

    @property
    def running_containers(self) -> list[Container]:
        return [c for c in self.containers if c.running]

    @property
    def ready_hashes(self) -> set[str]:
        """config.hash of the sandboxes that were ready (the version that ran)."""
        return {s.config_hash for s in self.ready_sandboxes if s.config_hash}

    @property
    def sandbox_ids(self) -> set[str]:
        return {s.id for s in self.sandboxes}

    @property
    def config_hash(self) -> str | None:
        """config.hash of the newest ready sandbox, else of the newest sandbox, else None."""
        pool = self.ready_sandboxes or list(self.sandboxes)
        pool = sorted(pool, key=lambda s: s.created_ns)
        return pool[-1].config_hash if pool else None

    def containers_of(self, sandbox_id: str) -> list[Container]:
        return [c for c in self.containers if c.pod_sandbox_id == sandbox_id]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": f"{self.namespace}/{self.pod_name}",
            "config_hash": self.config_hash,
            "sandboxes": [s.to_dict() for s in self.sandboxes],
            "containers": [c.to_dict() for c in self.containers],
            **({"similar_names": list(self.similar_names)} if self.similar_names else {}),
        }


class Outcome(Record):
    """The result of a wait.

    ``ok``: the node did what was asked. ``state``: stopped | running (ok) | still-running |
    name-mismatch | never-started | crash-looping | unchanged | shadowed | unhealthy | dropped |
    not-relisted | not-ready (the kubelet did not report the pod Ready) | runtime-unavailable.
    ``message``: what was observed, one or two sentences. ``details``: for
    ``--json``. ``shadowing_file``: the other file that defines the same namespace/name and wins.
    """

    ok: bool
    state: str
    message: str
    elapsed: float
    details: dict[str, Any]
    shadowing_file: str | None
    hint: str | None

    def __init__(self, ok: bool, state: str, message: str, elapsed: float = 0.0, details: dict[str, Any] | None = None,
                 shadowing_file: str | None = None, hint: str | None = None) -> None:
        self.ok = ok
        self.state = state
        self.message = message
        self.elapsed = elapsed
        self.details = {} if details is None else details
        self.shadowing_file = shadowing_file
        self.hint = hint

    @property
    def rollback_advised(self) -> bool:
        """Whether the node showed that the new version does not work (never-started,
        crash-looping, unhealthy, unchanged, shadowed, dropped). False when ok, and when nothing could be
        observed about the pod (runtime-unavailable, name-mismatch, not-relisted): rolling back blind would be a
        second change nobody can confirm either."""
        return not self.ok and self.state not in ("runtime-unavailable", "name-mismatch", "not-relisted")

    def to_dict(self) -> dict[str, Any]:
        """The ``wait`` member of a ``--json`` reply."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "rollback_advised": self.rollback_advised,
            "state": self.state,
            "message": self.message,
            "elapsed": round(self.elapsed, 3),
        }
        if self.shadowing_file:
            out["shadowing_file"] = self.shadowing_file
        if self.hint:
            out["hint"] = self.hint
        out["details"] = self.details
        return out

    def journal_fields(self) -> dict[str, Any]:
        """Upper-case journal fields (``Journal.log(..., **outcome.journal_fields())``)."""
        return {
            "WAIT_STATE": self.state,
            "WAIT_ELAPSED": f"{self.elapsed:.1f}",
            "CONFIG_HASH": self.details.get("config_hash"),
            "SHADOWING_FILE": self.shadowing_file,
        }

    def error(self) -> WaitTimeout:
        """The WaitTimeout (code ``wait-timeout``, exit 6) that reports this failed outcome."""
        return WaitTimeout(self.message, hint=self.hint, details=self.to_dict())

    def raise_for_failure(self) -> None:
        """Raise :meth:`error` unless ``ok``."""
        if not self.ok:
            raise self.error()
