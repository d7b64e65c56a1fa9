"""The whole engine: every family of verbs over one layout (see the package's map).

:class:`Engine` is a facade: it builds the families once, each given the collaborators it
works with, and hands each verb to the family that owns it. Who gets what:

- :class:`~.core.EngineCore` (``core``): the layout, actor, journal, configuration, store,
  flock, hooks, listing and resolving names. Every family is given it.
- :class:`~.recover.Recovery` (``recovery``): ``recover`` and recording what an intent did.
- :class:`~.core.Guard` (``guard``): the flock around a changing verb; runs ``recovery.recover``
  on its first acquisition.
- :class:`~.gate.Gatekeeper` (``gatekeeper``): the gate, pod identities, duplicate and identity
  refusals; its looks read the host-port claims (:func:`~.hostports.ports_kind`).
- :class:`~.hostports.Ports` (``ports``): the host-port refusal (core, gatekeeper).
- :class:`~.scan.Scanner` (``scanner``): drift, adoption, quarantine (core, gatekeeper, guard).
- :class:`~.swap.Swapper` (``swapper``): apply, edit, rollback, restore (core, guard,
  gatekeeper, ports, scanner, recovery).
- :class:`~.park.Parker` (``parker``): park, unpark, discard, ``apply --unpark`` (the same, and
  the swapper).
- :class:`~.query.Query` (``query``): status, history, show, diff (core); with the core, what
  :class:`~.reader.Reader` (the read verbs' facade, which :class:`Engine` extends) builds.
"""

from __future__ import annotations

from .core import Guard
from .gate import Gatekeeper
from .hostports import Ports, ports_kind
from .park import Parker
from .reader import Reader
from .recover import Recovery
from .scan import Scanner
from .swap import ApplyRequest, Swapper

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from contextlib import AbstractContextManager
    from pathlib import Path
    from typing import Any

    from ..errors import StaticpodError
    from ..journal import Event, Journal
    from ..layout import Layout
    from ..node import fsops
    from ..store.versions import Version
    from .model import Actor, Change, Result


class Engine(Reader):
    """The verbs over one :class:`~staticpodd.layout.Layout`.

    ``config`` is the loaded daemon/CLI configuration (attribute access) or None for defaults;
    ``config_loader`` loads it lazily instead (fast verbs never pay for it).
    """

    def __init__(self, layout: Layout, *, actor: Actor, journal: Journal, config: Any = None,
                 config_loader: Callable[[], Any] | None = None, lock_timeout: float | None = None,
                 notify: Any = None) -> None:
        super().__init__(layout, actor=actor, journal=journal, config=config, config_loader=config_loader,
                         lock_timeout=lock_timeout, notify=notify)
        core = self.core
        self.recovery = Recovery(core)
        self.guard = Guard(core, self.recovery.recover)
        self.gatekeeper = Gatekeeper(core, look_fact_kind=ports_kind)
        self.ports = Ports(core, self.gatekeeper)
        self.scanner = Scanner(core, self.gatekeeper, self.guard)
        self.swapper = Swapper(core, self.guard, self.gatekeeper, self.ports, self.scanner, self.recovery)
        self.parker = Parker(core, self.guard, self.gatekeeper, self.ports, self.scanner, self.recovery,
                             self.swapper)

    @property
    def last_recovery(self) -> list[dict[str, Any]]:
        """What the last :meth:`recover` did (one dict per interrupted operation)."""
        return self.recovery.last_recovery

    def locked(self) -> AbstractContextManager[None]:
        """Hold the staticpodd flock (re-entrant); the first acquisition runs :meth:`recover`
        (:meth:`Guard.locked`). Raises LockTimeout, FsError."""
        return self.guard.locked()

    def check_manifest_dir(self) -> None:
        """Raise FsError unless the manifest directory is a directory (:meth:`EngineCore.check_manifest_dir`)."""
        self.core.check_manifest_dir()

    def nothing_changed_on_error(self) -> AbstractContextManager[None]:
        """Say that nothing reached the kubelet on a StoreError or FsError
        (:meth:`EngineCore.nothing_changed_on_error`)."""
        return self.core.nothing_changed_on_error()

    def log(self, event: Event, message: str, *, priority: int, **fields: Any) -> None:
        """Journal ``event`` with this engine's actor (:meth:`EngineCore.log`)."""
        self.core.log(event, message, priority=priority, **fields)

    # -- the gate ---------------------------------------------------------------------------------------

    def validate_options(self) -> Any:
        """``staticpodd.validate.Options`` from the configuration (:meth:`Gatekeeper.validate_options`)."""
        return self.gatekeeper.validate_options()

    def gate(self, data: bytes, display_path: str, *, component: str | None = None) -> tuple[Any, list[Any]]:
        """Run the validation gate (:meth:`Gatekeeper.gate`)."""
        return self.gatekeeper.gate(data, display_path, component=component)

    def verdict(self, data: bytes, path: str, component: str) -> tuple[bool, list[Any]]:
        """``(passes, findings)`` of ``data``, nothing logged nor cached (:meth:`Gatekeeper.verdict`)."""
        return self.gatekeeper.verdict(data, path, component)

    def judged_key(self, options: Any) -> str:
        """The store's verdict-cache key of a restore's judgement (:meth:`Gatekeeper.judged_key`)."""
        return self.gatekeeper.judged_key(options)

    def judge_recorded(self, data: bytes, display_path: str) -> tuple[Any, list[Any]] | None:
        """The gate's verdict on recorded bytes (:meth:`Gatekeeper.judge_recorded`)."""
        return self.gatekeeper.judge_recorded(data, display_path)

    def pod_identity(self, data: bytes) -> tuple[str, str] | None:
        """``(namespace, name)`` the bytes define (:meth:`Gatekeeper.pod_identity`)."""
        return self.gatekeeper.pod_identity(data)

    def files_defining(self, ident: tuple[str, str], *, besides: str) -> list[str]:
        """Live files other than ``besides`` that define pod ``ident`` (:meth:`Gatekeeper.files_defining`)."""
        return self.gatekeeper.files_defining(ident, besides=besides)

    # -- drift, recovery ---------------------------------------------------------------------------------

    def recover(self) -> list[dict[str, Any]]:
        """Finish or undo interrupted operations (:meth:`Recovery.recover`); under the lock."""
        return self.recovery.recover()

    def scan(self, names: Iterable[str] | None = None, *, validate: bool = False, log: bool = True,
             synced: bool = True) -> list[Change]:
        """Record the directory's drift (:meth:`Scanner.scan`); under the lock."""
        return self.scanner.scan(names, validate=validate, log=log, synced=synced)

    def quarantine(self, file_name: str, *, reason: str) -> Path:
        """Move a stray out of the kubelet's sight (:meth:`Scanner.quarantine`)."""
        return self.scanner.quarantine(file_name, reason=reason)

    def quarantine_many(self, file_names: list[str], *, reason: str,
                        reasons: dict[str, str] | None = None) -> dict[str, Path | StaticpodError]:
        """:meth:`quarantine` for many strays at once (:meth:`Scanner.quarantine_many`)."""
        return self.scanner.quarantine_many(file_names, reason=reason, reasons=reasons)

    # -- the changing verbs ------------------------------------------------------------------------------

    def apply(self, data: bytes, *, source: str, component: str | None = None, reason: str | None = None,
              check: bool = False, unpark: bool = False, action: str = "apply", expect_digest: str | None = None,
              rename: bool = False, restoring: Version | None = None, gated: tuple[Any, list[Any]] | None = None,
              unrecorded: fsops.FileState | None = None) -> Result:
        """Validate ``data`` and swap it in atomically as the new version of a component.

        ``source`` is where the bytes came from (for messages and the default component name);
        ``component`` (``--as``) overrides it. A parked component gets its parked copy updated and
        stays parked unless ``unpark``. Identical bytes change nothing on disk (no rename, chmod or
        touch: docs/kubelet-contract.md consequence 6) and return ``changed=False``. ``check``: change nothing,
        report what would happen (no lock, no store writes). ``expect_digest``: refuse with
        Conflict when the current bytes differ (used by ``edit``).

        Refused with Conflict, before anything changes: new bytes that define another pod
        (namespace/name) than the component's current file, unless ``rename`` (the kubelet would
        stop one pod and start another: docs/kubelet-contract.md "Identity and restarts"); rollback and
        restore put recorded bytes back and never ask. A live file whose pod is parked under
        another component (it would start the parked pod again behind the park's back).
        Raises InvalidManifest, Conflict, UsageError, HookFailed, LockTimeout, FsError.

        ``action="restore"`` (:meth:`restore_last_good`, the daemon's): ``restoring`` is the
        recorded version put back and ``gated`` its verdict from :meth:`judge_recorded` (the
        bytes are not validated again); there is no drift scan of the directory (the daemon
        records drift in its own passes): the file's own bytes are recorded before they are
        judged (:meth:`Scanner.settled_state`), as for every verb, unless the caller read and judged them
        itself: ``unrecorded`` is then the live file as the caller read it (under this lock;
        ``expect_digest`` its digest), recorded as a version by ``external`` only after the rename,
        in the transaction that records the restore. Crash-safe: its bytes are stored with the
        intent, committed before the rename, and :meth:`recover` records them from there (then the
        restore); when the rename does not happen they are recorded before the error is raised
        (``details["external_version"]``), so they are in history whatever happens. Its
        ``result.extra["external_version"]`` is their version (None: they were the newest version
        already, an event says they came back).

        The swap is :meth:`Swapper.apply`; with ``unpark`` (not ``check``) the parker runs it and
        then the unpark (:meth:`Parker.apply_unparking`).
        """
        req = ApplyRequest(data, source=source, component=component, reason=reason, check=check, unpark=unpark,
                           action=action, expect_digest=expect_digest, rename=rename, restoring=restoring,
                           gated=gated, unrecorded=unrecorded)
        if unpark and not check:
            return self.parker.apply_unparking(req)
        return self.swapper.apply(req)

    def rollback(self, name: str, *, to: int | None = None, reason: str | None = None, check: bool = False,
                 rename: bool = False) -> Result:
        """Put an earlier version back, as a new version (:meth:`Swapper.rollback`)."""
        return self.swapper.rollback(name, to=to, reason=reason, check=check, rename=rename)

    def restore_last_good(self, name: str, *, reason: str, judged_digest: str | None = None,
                          unrecorded: fsops.FileState | None = None) -> Result:
        """Put back the newest recorded version that passes the gate (:meth:`Swapper.restore_last_good`)."""
        return self.swapper.restore_last_good(name, reason=reason, judged_digest=judged_digest,
                                              unrecorded=unrecorded)

    def park(self, name: str, *, until: float | None = None, reason: str | None = None,
             force: bool = False) -> Result:
        """Take a component out of the kubelet's directory, keeping its manifest (:meth:`Parker.park`)."""
        return self.parker.park(name, until=until, reason=reason, force=force)

    def unpark(self, name: str, *, reason: str | None = None) -> Result:
        """Put a parked component back at the same path (:meth:`Parker.unpark`)."""
        return self.parker.unpark(name, reason=reason)

    def discard_park(self, name: str, *, reason: str | None = None) -> Result:
        """End a park without starting anything (:meth:`Parker.discard_park`)."""
        return self.parker.discard_park(name, reason=reason)

    def parks_bypassed(self) -> list[tuple[str, str]]:
        """Parked components whose pod another live file runs (:meth:`Parker.parks_bypassed`)."""
        return self.parker.parks_bypassed()

