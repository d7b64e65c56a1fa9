"""``staticpodctl recover``: finish or undo the operations a crash interrupted."""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .loading import build_engine
from .output import Out


def cmd_recover(args: argparse.Namespace, out: Out) -> int:
    """Take the lock (which recovers), print what was finished or undone; exit 0."""
    eng = build_engine(args)
    with eng.locked():  # locked() runs recover() on first acquisition
        results = eng.last_recovery
    if not results:
        out.say("nothing to recover")
    for r in results:
        out.say(f"{r['op']} of {r['file_name']}: {r['outcome']}")
    out.finish(True, recovered=results)
    return EXIT_OK
