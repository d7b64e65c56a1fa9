"""What staticpodctl prints: the :class:`Out` a handler writes to, the ``--json`` envelope, errors.

``--json`` prints exactly one JSON object on one line of stdout (``format_version`` 1,
``command``, ``ok``, then the verb's fields, or ``error`` with a stable ``code``); humans get
short sentences and tables on stdout and warnings and errors on stderr, names made printable by
:mod:`staticpodd.termsafe`.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import InvalidManifest, StaticpodError
from ..termsafe import json_safe, safe

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

#: The ``--json`` envelope's ``format_version`` (config management modules check it).
FORMAT_VERSION = 1
PROG = "staticpodctl"


def emit_json(obj: dict[str, Any]) -> None:
    """Write ``obj`` as one line of JSON on stdout (names made printable by termsafe.json_safe)."""
    sys.stdout.write(json.dumps(json_safe(obj), sort_keys=False, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


class Out:
    """Where a handler writes: human text, or one JSON object at the end."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.json = bool(getattr(args, "json", False))
        self.command = getattr(args, "command", None)
        self.body: dict[str, Any] = {}

    def say(self, text: str = "") -> None:
        if not self.json:
            print(safe(text))

    def warn(self, text: str) -> None:
        if not self.json:
            print(safe(text), file=sys.stderr)

    def finish(self, ok: bool = True, **body: Any) -> None:
        """End the verb: what it told the cluster (``cluster``: published or queued, see
        :mod:`staticpodd.cluster.hook`), then, with --json, the one JSON object."""
        hook = getattr(self.args, "cluster_hook", None)
        if hook is not None:
            report = hook.report()
            if report is not None:
                if self.json:
                    self.body["cluster"] = report
                else:
                    from ..cluster.hook import report_line

                    print(safe(report_line(report)))
        if self.json:
            self.body.update(body)
            emit_json({"format_version": FORMAT_VERSION, "command": self.command, "ok": ok, **self.body})


def print_warnings(out: Out, warnings: list[Any]) -> None:
    """Show each warning's ``format()`` on stderr (human mode only)."""
    for w in warnings:
        out.warn(w.format())


def ago(seconds: float) -> str:
    """``seconds`` as a short age: ``45s``, ``12m``, ``3h05m``, ``4d`` (negative counts as 0)."""
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d"


def report_error(out: Out, exc: StaticpodError) -> None:
    """Report ``exc`` to the user: the ``--json`` error object, or the findings and then
    ``error:``/``hint:`` lines on stderr."""
    if out.json:
        if out.command in ("apply", "edit", "rollback", "park", "unpark"):
            out.body.setdefault("changed", False)  # config management reads it on failure too
        out.finish(False, error=exc.to_dict())
        return
    if isinstance(exc, InvalidManifest) and exc.findings:
        for f in exc.findings:
            print(safe(f.format()), file=sys.stderr)
        print(safe(f"{PROG}: {exc.message}; nothing was changed"), file=sys.stderr)
        return
    print(safe(f"{PROG}: error: {exc}"), file=sys.stderr)
    if exc.hint:
        print(safe(f"  hint: {exc.hint}"), file=sys.stderr)
