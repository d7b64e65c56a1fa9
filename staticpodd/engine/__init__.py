"""The verbs: apply, edit, park, unpark, rollback, status, history, show, diff, scan, recover.

The engine decides; :mod:`staticpodd.node.fsops` is the only writer; the store records. Every verb
that changes something runs under the one flock (:mod:`staticpodd.node.lock`), first finishes or
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
    "Actor": ".model",
    "Change": ".model",
    "Result": ".model",
    "Target": ".model",
    "parse_duration": ".model",
}

TYPE_CHECKING = False  # mypy sees the names as plain imports; at run time they come from __getattr__
if TYPE_CHECKING:
    from .full import Engine as Engine
    from .model import Actor as Actor
    from .model import Change as Change
    from .model import Result as Result
    from .model import Target as Target
    from .model import parse_duration as parse_duration
    from .reader import Reader as Reader


def __getattr__(name: str) -> object:
    """``from staticpodd.engine import X`` for the package's public names (:data:`__all__`), imported
    when first asked for. Raises AttributeError for any other name."""
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
]
