"""The verbs: apply, edit, park, unpark, rollback, status, history, show, diff, scan, recover.

The engine decides; :mod:`staticpodd.fsops` is the only writer; the store records. Every verb
that changes something runs under the one flock (:mod:`staticpodd.lock`), first finishes or
undoes interrupted operations (:meth:`Engine.recover`), then records drift (live bytes that
differ from what was last recorded, written by someone else) before it changes anything, so
nothing anyone wrote is ever lost.

Kubelet rules served here (docs/kubelet-contract.md): only live manifests under non-dot names; rename into
place after fsync; park/unpark are renames on the same mount and keep the exact file path (it is
part of the pod UID); no-op writes are never made; an invalid manifest never enters the
directory; two files defining the same pod are refused (the lexically last one would win).

Map of this package (each family is given the ones it calls; :class:`Engine` composes them):

- ``model.py``: Actor, Target, Change, Result, OpWarning; durations, ``COMPONENT@N``, diffs.
- ``fsfacts.py``: read-only facts: stat signatures, file listings, UTF-8 names, live pids.
- ``core.py``: :class:`EngineCore`: config, store, lock, journal, hooks, listing, resolve;
  :class:`Guard`: the flock around a changing verb (recovery on its first acquisition).
- ``gate.py``: :class:`Gatekeeper`: the validation gate, pod identity, duplicate and identity refusals.
- ``hostports.py``: :class:`Ports`: refusing new live bytes whose host port another live pod holds.
- ``scan.py``: :class:`Scanner`: drift scan and adoption, settled reads, changed-meanwhile, quarantine.
- ``recover.py``: :class:`Recovery`: intents and ``recover``; the recording helpers.
- ``swap.py``: :class:`Swapper`: apply/edit (an :class:`ApplyRequest`), rollback, restore_last_good.
- ``park.py``: :class:`Parker`: park, unpark, discard_park, parks_bypassed, ``apply --unpark``.
- ``query.py``: :class:`Query`: history, show, diff, status (read-only).
- ``reader.py``, ``full.py``: the facades :class:`Reader` (core and query) and :class:`Engine`
  (every family, each given its collaborators in its constructor; the verbs delegate).
"""

from __future__ import annotations

import importlib

# Names are resolved on first use (PEP 562): a read verb imports only the core and the query
# family, never the mutating families it does not run (start-up cost).
_LAZY = {
    "Engine": ".full",
    "Reader": ".reader",
    "ERR": "..journal",
    "PRIVATE_DIRNAME": "..layout",
    "ApplyRequest": ".swap",
    "EngineCore": ".core",
    "Guard": ".core",
    "Gatekeeper": ".gate",
    "Parker": ".park",
    "Ports": ".hostports",
    "Query": ".query",
    "Recovery": ".recover",
    "Scanner": ".scan",
    "Swapper": ".swap",
    "_COMPONENT_NAME": ".swap",
}
for _name in ("_RACY_NS", "_is_tool_tempfile", "_regular_files", "_sig_text", "_stat_sig", "is_utf8_name",
              "pid_alive", "wanted_all"):
    _LAZY[_name] = ".fsfacts"
for _name in ("_DURATION_UNITS", "EXTERNAL", "Actor", "Change", "Result", "Target", "parse_duration", "split_at",
              "unified_diff", "OpWarning", "_human_duration", "_mode_dict", "_q"):
    _LAZY[_name] = ".model"
del _name

TYPE_CHECKING = False  # mypy sees the names as plain imports; at run time they come from __getattr__
if TYPE_CHECKING:
    from ..journal import ERR as ERR
    from ..layout import PRIVATE_DIRNAME as PRIVATE_DIRNAME
    from .core import EngineCore as EngineCore
    from .core import Guard as Guard
    from .fsfacts import _RACY_NS as _RACY_NS
    from .fsfacts import _is_tool_tempfile as _is_tool_tempfile
    from .fsfacts import _regular_files as _regular_files
    from .fsfacts import _sig_text as _sig_text
    from .fsfacts import _stat_sig as _stat_sig
    from .fsfacts import is_utf8_name as is_utf8_name
    from .fsfacts import pid_alive as pid_alive
    from .fsfacts import wanted_all as wanted_all
    from .full import Engine as Engine
    from .gate import Gatekeeper as Gatekeeper
    from .hostports import Ports as Ports
    from .model import _DURATION_UNITS as _DURATION_UNITS
    from .model import EXTERNAL as EXTERNAL
    from .model import Actor as Actor
    from .model import Change as Change
    from .model import OpWarning as OpWarning
    from .model import Result as Result
    from .model import Target as Target
    from .model import _human_duration as _human_duration
    from .model import _mode_dict as _mode_dict
    from .model import _q as _q
    from .model import parse_duration as parse_duration
    from .model import split_at as split_at
    from .model import unified_diff as unified_diff
    from .park import Parker as Parker
    from .query import Query as Query
    from .reader import Reader as Reader
    from .recover import Recovery as Recovery
    from .scan import Scanner as Scanner
    from .swap import _COMPONENT_NAME as _COMPONENT_NAME
    from .swap import ApplyRequest as ApplyRequest
    from .swap import Swapper as Swapper


def __getattr__(name: str) -> object:
    """``from staticpodd.engine import X`` for every name this package ever exported, imported when
    first asked for. Raises AttributeError for any other name."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Actor",
    "Change",
    "Engine",
    "Reader",
    "Result",
    "Target",
    "parse_duration",
    "split_at",
    "unified_diff",
    "ERR",
    "PRIVATE_DIRNAME",
]
