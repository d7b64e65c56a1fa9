"""What every changing verb (park, unpark, apply, rollback, edit) does around its engine call.

Print the engine's result (headline, warnings, diff, the ``--json`` fields) and run the
``--wait`` proof of :mod:`staticpodd.proof` before and after the swap when asked; the proof is
imported only then.
"""

from __future__ import annotations

import argparse

from ..errors import EXIT_OK
from .output import Out, print_warnings

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


def result_out(out: Out, res: Any, *, show_diff: bool = False, eng: Any = None) -> None:
    """Show an engine Result: headline, warnings (a failed post-hook's too), the diff when
    ``show_diff``; its fields go into the --json body."""
    if eng is not None and eng.hook_warnings:  # post-hooks that failed: not fatal, never silent
        res.warnings = [*res.warnings, *eng.hook_warnings]
        eng.hook_warnings.clear()
    out.say(res.msg)
    print_warnings(out, res.warnings)
    if show_diff and res.diff:
        out.say(res.diff.rstrip("\n"))
    out.body.update(res.to_dict())
    out.body["comment"] = res.msg  # Salt's stateful cmd.run reads changed/comment from the last line


def wait(args: argparse.Namespace, out: Out, eng: Any, verb: str, res: Any, **kw: Any) -> int:
    """Run the --wait proof when asked; returns an exit status (0 when not asked)."""
    if getattr(args, "wait", None) is None:
        return EXIT_OK
    from ..proof import run_wait

    return int(run_wait(args, out, eng, verb, res, **kw))


def pre_wait(args: argparse.Namespace, eng: Any, verb: str) -> Any:
    """What the --wait proof needs to see before the swap (always for park: the pod it stops), or None."""
    if getattr(args, "wait", None) is None and verb != "park":
        return None
    try:
        from ..proof import before_operation
    except ImportError:
        return None
    return before_operation(args, eng, verb)
