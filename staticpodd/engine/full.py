"""The whole engine: every family of verbs over one layout (see the package's map)."""

from __future__ import annotations

from .core import EngineCore
from .gate import GateCore
from .hostports import PortsCore
from .park import ParkVerbs
from .query import QueryVerbs
from .recover import RecoverVerbs
from .scan import ScanVerbs
from .swap import SwapVerbs


class Engine(ParkVerbs, SwapVerbs, ScanVerbs, PortsCore, GateCore, RecoverVerbs, QueryVerbs, EngineCore):
    """The verbs over one :class:`~staticpodd.layout.Layout`.

    ``config`` is the loaded daemon/CLI configuration (attribute access) or None for defaults;
    ``config_loader`` loads it lazily instead (fast verbs never pay for it).
    """
