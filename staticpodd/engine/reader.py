"""The read verbs alone (status, history, show, diff): the core and the query family.

A read verb never changes the directory or the store's history, never takes the lock and never
runs recovery, so it has no use for the gate, drift adoption, swaps or parks; importing them cost
every ``staticpodctl status`` about a tenth of its start-up. :class:`Reader` is the facade over
the two; :class:`staticpodd.engine.Engine` adds the other families to it.
"""

from __future__ import annotations

from .core import EngineCore
from .query import Query

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..journal import Journal
    from ..layout import Layout
    from ..store.versions import Version, VersionStore
    from .model import Actor, OpWarning, Target


class Reader:
    """:class:`~staticpodd.engine.Engine`'s read-only verbs over one layout, built the same way:
    ``core`` (:class:`EngineCore`: layout, actor, journal, configuration, store, listing,
    resolving names) and ``query`` (:class:`Query`, given the core)."""

    def __init__(self, layout: Layout, *, actor: Actor, journal: Journal, config: Any = None,
                 config_loader: Callable[[], Any] | None = None, lock_timeout: float | None = None,
                 notify: Any = None) -> None:
        self.core = EngineCore(layout, actor=actor, journal=journal, config=config, config_loader=config_loader,
                               lock_timeout=lock_timeout, notify=notify)
        self.query = Query(self.core)

    # -- what the engine works on (the core's) ------------------------------------------------------

    @property
    def layout(self) -> Layout:
        return self.core.layout

    @property
    def actor(self) -> Actor:
        return self.core.actor

    @property
    def journal(self) -> Journal:
        return self.core.journal

    @property
    def config(self) -> Any:
        """The configuration (loaded on first use), or None when there is none."""
        return self.core.config

    @property
    def store(self) -> VersionStore:
        """The version store (opened on first use)."""
        return self.core.store

    @property
    def hook_warnings(self) -> list[OpWarning]:
        """Post-hooks that failed, timed out or were refused during this engine's operations."""
        return self.core.hook_warnings

    @property
    def untrackable(self) -> set[str]:
        """Files the kubelet reads whose names are not valid UTF-8 (see :class:`EngineCore`)."""
        return self.core.untrackable

    @property
    def names_taken(self) -> dict[tuple[str, str], str]:
        """Files named like another file's component, as of the last listing (see :class:`EngineCore`)."""
        return self.core.names_taken

    @property
    def links_not_recorded(self) -> dict[str, str]:
        """Live symlinks the kubelet refuses as a pod: never recorded (file -> why)."""
        return self.core.links_not_recorded

    def close(self) -> None:
        """Close the store."""
        self.core.close()

    # -- names ----------------------------------------------------------------------------------------

    def resolve(self, name: str, *, allow_recorded: bool = True) -> Target:
        """A component by name or file name (:meth:`EngineCore.resolve`)."""
        return self.core.resolve(name, allow_recorded=allow_recorded)

    def component_for(self, file_name: str) -> str:
        """The component a file belongs to (:meth:`EngineCore.component_for`)."""
        return self.core.component_for(file_name)

    def name_owner(self, name: str) -> str | None:
        """The file whose component ``name`` is, if any (:meth:`EngineCore.name_owner`)."""
        return self.core.name_owner(name)

    def live_names(self) -> list[str]:
        """The files the kubelet reads (:meth:`EngineCore.live_names`)."""
        return self.core.live_names()

    def parked_names(self) -> list[str]:
        """The parked copies' file names (:meth:`EngineCore.parked_names`)."""
        return self.core.parked_names()

    def current_bytes(self, name: str, *, for_display: bool = False) -> tuple[Target, bytes, str]:
        """A component's file as it is now (:meth:`EngineCore.current_bytes`)."""
        return self.core.current_bytes(name, for_display=for_display)

    # -- the read verbs ------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Every component with its state (:meth:`Query.status`)."""
        return self.query.status()

    def history(self, name: str, *, limit: int | None = None) -> tuple[str, list[Version]]:
        """``(component, versions oldest first)`` (:meth:`Query.history`)."""
        return self.query.history(name, limit=limit)

    def show(self, spec: str) -> tuple[Version | None, bytes, str]:
        """Bytes of ``component@seq`` or the current file (:meth:`Query.show`)."""
        return self.query.show(spec)

    def diff(self, name: str, a: int | None = None, b: int | None = None) -> str:
        """Unified diff between versions (:meth:`Query.diff`)."""
        return self.query.diff(name, a, b)

    def current_digest(self, name: str) -> tuple[str, str]:
        """``(digest, location)`` of a component's file now (:meth:`Query.current_digest`)."""
        return self.query.current_digest(name)
