"""staticpodctl: the command line over :mod:`staticpodd.engine`; one ``main`` that parses and dispatches.

One handler per verb, in :mod:`staticpodd.commands` (``commands/<verb>.py``, as pipx does). ``--json``
prints exactly one JSON object on one line of stdout (``format_version`` 1, ``command``, ``ok``,
then the verb's fields, or ``error`` with a stable ``code``); humans get short sentences and
tables. Exit statuses are in :mod:`staticpodd.errors` and README "Exit codes".

Import cost matters: ``park``, ``unpark``, ``status`` and ``history`` must not import jsonschema
or watchdog, so the parser is built for the verb asked (:mod:`staticpodd.commands.parser`),
only that verb's module is imported (when its handler runs), and heavy modules are imported inside
the handlers that need them. The handlers and helpers that lived here stay reachable as
attributes of this module (``cli.cmd_status``, ``cli.Out`` ...), imported on first use.
"""

from __future__ import annotations

import os
import sys

from .commands.loading import config_problems
from .commands.output import FORMAT_VERSION, PROG, Out, report_error
from .commands.parser import VERBS, Parser, build_parser, first_word, glue_dash_values
from .errors import EXIT_FAILURE, EXIT_OK, FsError, StaticpodError
from .hashes import builtin_hashes

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = ["FORMAT_VERSION", "PROG", "VERBS", "Out", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run staticpodctl; returns the exit status (see README "Exit codes")."""
    builtin_hashes()  # sha256 without loading OpenSSL: a third of a bare interpreter's start-up
    argv = glue_dash_values(list(sys.argv[1:] if argv is None else argv))
    config_problems.clear()  # main() can run more than once in one process (tests, embedding)
    Parser.json_mode = "--json" in argv
    first = first_word(argv)
    # the verb is the first positional word; only when options argparse must place come first is
    # it guessed from any word that names a verb (``--config park validate x``: validate, not park)
    chosen = first if first in VERBS else next((a for a in argv if a in VERBS), None) if first is None else None
    Parser.verb = chosen
    # any spelling of it (even a wrong one) means the caller reads 2 as "changed": fail with 1
    Parser.detailed = any(a.startswith("--detailed") for a in argv)
    parser = build_parser(chosen or "", only=chosen is not None and first == chosen)
    args = parser.parse_args(argv)
    if Parser.json_mode:
        args.json = True
    out = Out(args)
    try:
        return int(args.handler(args, out))
    except StaticpodError as exc:
        report_error(out, exc)
        if getattr(args, "detailed_exitcode", False):  # 0 unchanged, 2 changed, 1 any failure
            return EXIT_FAILURE
        return exc.exit_status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `staticpodctl status | head -1`: the reader has what it wanted
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - no flush error at exit
        except OSError:
            pass
        return EXIT_OK
    except OSError as exc:  # a full disk, a read-only mount … outside the engine's own checks
        err = FsError(f"{exc.strerror or exc}", path=exc.filename if isinstance(exc.filename, str) else None,
                      hint="free space or remount read-write, then run the command again")
        report_error(out, err)
        return EXIT_FAILURE
    except Exception as exc:  # a bug: keep the --json contract; the traceback goes to the journal
        return _internal_error(out, args, exc)


def _internal_error(out: Out, args: Any, exc: BaseException) -> int:
    """Report an unexpected exception (a bug) without a traceback on the terminal: one clear
    line (or the --json error), and a DAEMON_ERROR journal entry (ERROR=internal-error) whose
    TRACEBACK field holds the traceback for the report. ``STATICPODD_TRACEBACK=1`` also prints
    it. Returns EXIT_FAILURE; never raises."""
    import traceback

    from .journal import ERR, Event, Journal

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    what = f"{type(exc).__name__}: {exc}"[:500]
    verb = getattr(args, "verb", None) or Parser.verb or "staticpodctl"
    try:
        Journal(PROG, str(getattr(args, "root", None) or "/")).log(
            Event.DAEMON_ERROR, f"{PROG} {verb}: internal error: {what}", priority=ERR,
            error="internal-error", traceback=text, pid=os.getpid())
    except Exception:  # noqa: BLE001 - the report below is what matters
        pass
    hint = (f"this is a bug in staticpodctl (run `staticpodctl status` to see where things stand); the "
            f"traceback is in the journal (journalctl MESSAGE_ID={Event.DAEMON_ERROR.message_id}); please report it")
    if out.json:
        out.finish(False, error={"code": "internal", "message": f"internal error: {what}", "hint": hint})
    else:
        print(f"{PROG}: internal error: {what}\n  hint: {hint}", file=sys.stderr)
    if os.environ.get("STATICPODD_TRACEBACK") == "1":
        print(text, file=sys.stderr)
    return EXIT_FAILURE


#: Names this module had before the verbs moved to :mod:`staticpodd.commands`: name -> (module, name).
_MOVED = {
    "cmd_status": ("status", "cmd_status"),
    "cmd_park": ("park", "cmd_park"),
    "cmd_unpark": ("park", "cmd_unpark"),
    "cmd_apply": ("apply", "cmd_apply"),
    "cmd_rollback": ("apply", "cmd_rollback"),
    "cmd_edit": ("edit", "cmd_edit"),
    "cmd_history": ("history", "cmd_history"),
    "cmd_show": ("history", "cmd_show"),
    "cmd_diff": ("history", "cmd_diff"),
    "cmd_recover": ("recover", "cmd_recover"),
    "cmd_prune": ("prune", "cmd_prune"),
    "cmd_validate": ("validate", "cmd_validate"),
    "cmd_doctor": ("doctor", "cmd_doctor"),
    "MAX_PARK_SECONDS": ("park", "MAX_PARK_SECONDS"),
    "HISTORY_DEFAULT": ("history", "HISTORY_DEFAULT"),
    "TOLERATE_BAD_CONFIG": ("loading", "TOLERATE_BAD_CONFIG"),
    "_Parser": ("parser", "Parser"),
    "_emit_json": ("output", "emit_json"),
    "_ago": ("output", "ago"),
    "_layout": ("loading", "build_layout"),
    "_load_config": ("loading", "checked_config"),
    "_engine": ("loading", "build_engine"),
    "_heartbeat": ("health", "heartbeat"),
    "_parse_until": ("park", "parse_until"),
    "_first_word": ("parser", "first_word"),
}


def __getattr__(name: str) -> Any:
    """PEP 562: the moved names, imported from their module under :mod:`staticpodd.commands` on first use."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attr = _MOVED[name]
    return getattr(importlib.import_module(f"staticpodd.commands.{module}"), attr)


if __name__ == "__main__":
    sys.exit(main())
