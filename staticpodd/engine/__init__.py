"""The verbs: apply, edit, park, unpark, rollback, status, history, show, diff, scan, recover.

The engine decides; :mod:`staticpodd.fsops` is the only writer; the store records. Every verb
that changes something runs under the one flock (:mod:`staticpodd.lock`), first finishes or
undoes interrupted operations (:meth:`Engine.recover`), then records drift (live bytes that
differ from what was last recorded, written by someone else) before it changes anything, so
nothing anyone wrote is ever lost.

Kubelet rules served here (KUBELET.md): only live manifests under non-dot names; rename into
place after fsync; park/unpark are renames on the same mount and keep the exact file path (it is
part of the pod UID); no-op writes are never made; an invalid manifest never enters the
directory; two files defining the same pod are refused (the lexically last one would win).

Map of this package (each family builds on the ones it calls; :class:`Engine` composes them):

- ``model.py``: Actor, Target, Change, Result, OpWarning; durations, ``COMPONENT@N``, diffs.
- ``fsfacts.py``: read-only facts: stat signatures, file listings, UTF-8 names, live pids.
- ``core.py``: :class:`EngineCore`: config, store, lock, journal, hooks, listing, resolve.
- ``gate.py``: the validation gate, pod identity, duplicate and identity refusals.
- ``scan.py``: drift scan and adoption, settled reads, changed-meanwhile, quarantine.
- ``recover.py``: intents and ``recover``; the recording helpers.
- ``swap.py``: apply/edit, rollback, restore_last_good.
- ``park.py``: park, unpark, discard_park, parks_bypassed.
- ``query.py``: history, show, diff, status (read-only).
"""

from __future__ import annotations

from ..journal import ERR
from ..layout import PRIVATE_DIRNAME
from .core import EngineCore
from .fsfacts import _RACY_NS as _RACY_NS
from .fsfacts import _is_tool_tempfile as _is_tool_tempfile
from .fsfacts import _regular_files as _regular_files
from .fsfacts import _sig_text as _sig_text
from .fsfacts import _stat_sig as _stat_sig
from .fsfacts import is_utf8_name as is_utf8_name
from .fsfacts import pid_alive as pid_alive
from .fsfacts import wanted_all as wanted_all
from .gate import GateCore
from .model import _DURATION_UNITS as _DURATION_UNITS
from .model import EXTERNAL as EXTERNAL
from .model import Actor, Change, Result, Target, parse_duration, split_at, unified_diff
from .model import OpWarning as OpWarning
from .model import _human_duration as _human_duration
from .model import _mode_dict as _mode_dict
from .model import _q as _q
from .park import ParkVerbs
from .query import QueryVerbs
from .recover import RecoverVerbs
from .scan import ScanVerbs
from .swap import _COMPONENT_NAME as _COMPONENT_NAME
from .swap import SwapVerbs


class Engine(ParkVerbs, SwapVerbs, ScanVerbs, GateCore, RecoverVerbs, QueryVerbs, EngineCore):
    """The verbs over one :class:`~staticpodd.layout.Layout`.

    ``config`` is the loaded daemon/CLI configuration (attribute access) or None for defaults;
    ``config_loader`` loads it lazily instead (fast verbs never pay for it).
    """


__all__ = [
    "Actor",
    "Change",
    "Engine",
    "Result",
    "Target",
    "parse_duration",
    "split_at",
    "unified_diff",
    "ERR",
    "PRIVATE_DIRNAME",
]
