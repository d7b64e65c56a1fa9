"""staticpodctl's argument parser, built for the verb asked.

Each verb's arguments are added by one small builder registered here under the verb's name, in
the order ``--help`` lists them; :func:`build_parser` runs only the builder of the verb on the
command line when main() is sure of it, so ``park`` never builds ``validate``'s parser (which
imports the validator) nor any other. A verb's handler is named, not imported
(:class:`LazyHandler`): its module under :mod:`staticpodd.commands` is imported when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from .. import __version__
from ..errors import EXIT_FAILURE, EXIT_USAGE
from .output import FORMAT_VERSION, PROG, emit_json

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


class Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one JSON object when ``--json`` is on the line.

    Abbreviated long options are off: ``--detailed`` or ``--js`` would switch a mode on that
    main() (which looks for the full spelling before parsing) could not see.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    json_mode = False  # set by main() from the command line before parsing
    verb: str | None = None  # the verb named on the command line, if any (set by main())
    detailed = False  # --detailed-exitcode is on the command line (set by main())

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument (to check the metavar), and the
        # default one imports shutil (with zlib, bz2, lzma, fnmatch) for the terminal width
        return self.formatter_class(prog=self.prog, width=_terminal_columns() - 2)  # type: ignore[call-arg]

    def error(self, message: str) -> Any:  # type: ignore[override]
        # under --detailed-exitcode 2 means "changed": a failure must not look like one
        status = EXIT_FAILURE if Parser.detailed else EXIT_USAGE
        if Parser.json_mode:
            emit_json({"format_version": FORMAT_VERSION, "command": Parser.verb, "ok": False,
                       "error": {"code": "usage", "message": message}})
            sys.exit(status)
        self.print_usage(sys.stderr)
        self.exit(status, f"{self.prog}: error: {message}\n")


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil: ``$COLUMNS`` when it is
    a positive number, else the width of the terminal on stdout, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _common(p: argparse.ArgumentParser, *, top: bool) -> None:
    """Add the options every verb takes (and the top level too: ``staticpodctl --root R park x``
    and ``staticpodctl park x --root R`` both work; verb-level copies default to SUPPRESS so they
    never overwrite a top-level value). Options a verb's own parser already has are left alone."""
    d: Any = argparse.SUPPRESS
    g = p.add_argument_group("common options")

    def add(*names: str, **kw: Any) -> None:
        if any(n in p._option_string_actions for n in names):
            return
        if not top:
            kw["default"] = d
        g.add_argument(*names, **kw)

    add("--root", metavar="DIR", default="/", help="take every default path under DIR (a sandbox; default /)")
    add("--manifest-dir", metavar="DIR", default=None,
        help="the kubelet's staticPodPath (default: from <root>/var/lib/kubelet/config.yaml, "
        "else <root>/etc/kubernetes/manifests)")
    add("--config", metavar="FILE", default=None,
        help="staticpodd.yaml to read (default <root>/etc/staticpodd/staticpodd.yaml)")
    add("--json", action="store_true", default=False,
        help="print one JSON object on stdout (stable, format_version 1)")
    add("--lock-timeout", metavar="SECONDS", type=_seconds, default=None,
        help="how long to wait for another staticpodctl/staticpodd (default: config, else 30)")


VERBS = ("status", "park", "unpark", "apply", "edit", "history", "show", "diff", "rollback", "recover",
         "validate", "doctor", "prune", "pin")


def _seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text!r}")
    return value


#: The longest ``--reason`` kept: a sentence or two for ``status`` and ``history``, not a file.
REASON_MAX = 500
REASON_HELP = f"why (recorded and logged; one line, at most {REASON_MAX} characters)"


def _reason(text: str) -> str:
    """argparse type: a reason of one printable line, at most :data:`REASON_MAX` characters. A
    newline or an escape sequence would forge lines of ``status`` and ``history`` for whoever
    reads them later."""
    from ..termsafe import has_control, shown_name

    if has_control(text):
        raise argparse.ArgumentTypeError(
            f"must be one line without control characters (newline, tab, escape): {shown_name(text)[:80]!r}")
    if len(text) > REASON_MAX:
        raise argparse.ArgumentTypeError(f"is {len(text)} characters long; at most {REASON_MAX} are kept")
    return text


class LazyHandler:
    """A verb's handler as ``args.handler``: ``staticpodd.commands.<module>.<name>``, imported on
    the call, so that parsing imports no command module (start-up cost). Called as the
    function itself: ``handler(args, out)`` returns the exit status."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, args: argparse.Namespace, out: Any) -> Any:
        module = __import__(f"{__package__}.{self.module}", fromlist=[self.name])  # no importlib: 1 ms
        return getattr(module, self.name)(args, out)

    def __repr__(self) -> str:
        return f"<handler {__package__}.{self.module}.{self.name}>"


#: ``(verb, help, builder)`` in the order ``--help`` lists them; a builder adds the verb's own
#: arguments and handler to its sub-parser, ``wait`` saying whether to add the --wait options too.
_Builder = Callable[[argparse.ArgumentParser, bool], None]
_VERB_BUILDERS: dict[str, tuple[str, _Builder]] = {}


def _verb(name: str, help_: str) -> Callable[[_Builder], _Builder]:
    """Register the builder of verb ``name`` (whose ``help`` and description are ``help_``)."""

    def register(builder: _Builder) -> _Builder:
        _VERB_BUILDERS[name] = (help_, builder)
        return builder

    return register


def build_parser(verb: str | None = None, *, only: bool = False) -> argparse.ArgumentParser:
    """The staticpodctl argument parser (also used to generate the man page and completion).

    ``verb``: when main() already knows which verb runs, only that verb's parser pulls in the
    modules behind its options (the validator, the --wait prover); the others stay placeholders
    good for ``--help``. None builds everything. ``only``: build no other verb's sub-parser at all
    (main() passes it when ``verb`` is certainly the command: the first positional word).
    """
    full = verb is None
    parser = Parser(
        prog=PROG,
        description="Version, validate, atomically swap and park the kubelet's static pod manifests.",
        epilog="Exit codes: 0 ok, 1 failed or invalid, 2 usage, 3 unknown component/version, "
        "4 conflict (already parked, live file exists, duplicate pod), 5 lock timeout, "
        "6 --wait timed out, 78 bad configuration. apply --detailed-exitcode: 0 unchanged, 2 changed, 1 failed.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in VERBS:
        if only and name != verb:
            continue  # not built at all: parsing never reaches it
        if name == "validate" and (full or verb == "validate"):
            from ..validate.cli import add_validate_parser

            p = add_validate_parser(sub, default_dir=True)
            _common(p, top=False)
            p.set_defaults(handler=LazyHandler("validate", "cmd_validate"))
            continue
        help_, builder = _VERB_BUILDERS[name]
        p = sub.add_parser(name, help=help_, description=help_)
        _common(p, top=False)
        builder(p, full or verb == name)
    return parser


@_verb("status", "show every component: live, parked (who, why, until when), drift, daemon health")
def _status(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("--cluster", action="store_true",
                   help="show every component parked and every pod pinned on any node of the cluster, from the "
                   "Nodes' staticpodd.io annotations (read-only; needs the cluster extra)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="with --cluster: credentials that may list Nodes (default: $KUBECONFIG, ~/.kube/config, "
                   "then /etc/kubernetes/admin.conf under --root)")
    p.set_defaults(handler=LazyHandler("status", "cmd_status"))


@_verb("park", "take a component out of the kubelet's directory, keeping it (e.g. stop kube-scheduler)")
def _park(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("component", help="component name (kube-scheduler) or file name")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--for", dest="for_", metavar="DURATION",
                      help="restore it automatically after DURATION (90s, 30m, 2h, 1h30m; a plain number is seconds; "
                      "the daemon does the restore)")
    when.add_argument("--until", metavar="TIME", help="restore it at TIME (ISO 8601, e.g. 2030-01-31T06:00Z)")
    p.add_argument("--reason", type=_reason, help=REASON_HELP)
    if wait:
        _wait_args(p, "park")
    p.set_defaults(handler=LazyHandler("park", "cmd_park"))


@_verb("unpark", "put a parked component back at the same path, byte-identical")
def _unpark(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("component", help="component name (kube-scheduler) or file name")
    p.add_argument("--reason", type=_reason, help=REASON_HELP)
    p.add_argument("--discard", action="store_true",
                   help="end the park without starting anything: delete the parked copy (its bytes stay in "
                   "history), e.g. a parked leftover .bak")
    if wait:
        _wait_args(p, "unpark")
    p.set_defaults(handler=LazyHandler("park", "cmd_unpark"))


@_verb("apply", "validate a manifest, record it, and swap it in atomically")
def _apply(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("file", help="the new manifest (any name; - for stdin, with --as)")
    p.add_argument("--as", dest="as_", metavar="COMPONENT", help="the component it replaces (default: file stem)")
    p.add_argument("--reason", type=_reason, help=REASON_HELP)
    p.add_argument("--check", action="store_true", help="change nothing; say what would change")
    p.add_argument("--diff", action="store_true", help="show the diff; alone it changes nothing, like --check")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 unchanged, 2 changed, 1 failed (Puppet/Terraform convention)")
    p.add_argument("--unpark", action="store_true", help="if the component is parked, unpark it too")
    p.add_argument("--rename", action="store_true",
                   help="allow the new manifest to define another pod (metadata.name/namespace) than the current one")
    if wait:
        _wait_args(p, "apply")
    p.set_defaults(handler=LazyHandler("apply", "cmd_apply"))


@_verb("edit", "edit a component in $VISUAL/$EDITOR on a staged copy; validated before the swap")
def _edit(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("component", help="component name (kube-apiserver) or file name")
    p.add_argument("--reason", type=_reason, help=REASON_HELP)
    p.add_argument("--rename", action="store_true",
                   help="allow the edit to change the pod's metadata.name/namespace")
    if wait:
        _wait_args(p, "edit")
    p.set_defaults(handler=LazyHandler("edit", "cmd_edit"))


@_verb("history", "list the recorded versions of a component")
def _history(p: argparse.ArgumentParser, wait: bool) -> None:
    from .history import HISTORY_DEFAULT

    p.add_argument("component")
    p.add_argument("-n", "--limit", type=int,
                   help=f"only the newest N versions (default {HISTORY_DEFAULT}; 0 or --all: every version)")
    p.add_argument("--all", action="store_true", help="every recorded version, however many")
    p.set_defaults(handler=LazyHandler("history", "cmd_history"))


@_verb("show", "print a version's bytes (COMPONENT@N), or the current file (COMPONENT)")
def _show(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("spec", metavar="COMPONENT[@N]")
    p.set_defaults(handler=LazyHandler("history", "cmd_show"))


@_verb("diff", "unified diff between versions A and B (default: newest version vs the current file)")
def _diff(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("component")
    p.add_argument("a", nargs="?", type=int, help="version A (default: the newest)")
    p.add_argument("b", nargs="?", type=int, help="version B (default: the current file)")
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when there are differences, 0 when there are none (as git diff --exit-code)")
    p.set_defaults(handler=LazyHandler("history", "cmd_diff"))


@_verb("rollback", "put an earlier version back (recorded as a new version)")
def _rollback(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("component", help="component name or file name")
    p.add_argument("--to", type=int, metavar="N",
                   help="version to restore (default: the newest version whose bytes differ from the current file)")
    p.add_argument("--reason", type=_reason, help=REASON_HELP)
    p.add_argument("--check", action="store_true", help="change nothing; say what would change")
    p.add_argument("--rename", action="store_true",
                   help="allow the version to define another pod (metadata.name/namespace) than the current one")
    if wait:
        _wait_args(p, "rollback")
    p.set_defaults(handler=LazyHandler("apply", "cmd_rollback"))


@_verb("recover", "finish or undo operations interrupted by a crash (every changing verb does this first)")
def _recover(p: argparse.ArgumentParser, wait: bool) -> None:
    p.set_defaults(handler=LazyHandler("recover", "cmd_recover"))


@_verb("validate", "check manifests (files or a whole directory) the way the kubelet reads them")
def _validate_placeholder(p: argparse.ArgumentParser, wait: bool) -> None:
    """Good for ``--help`` only: the real parser (:func:`staticpodd.validate.cli.add_validate_parser`)
    imports the validator, so it is built only when ``validate`` runs (or for the man page)."""
    p.add_argument("path", nargs="*")


@_verb("doctor", "check the whole directory as the kubelet reads it, the store and the daemon")
def _doctor(p: argparse.ArgumentParser, wait: bool) -> None:
    p.set_defaults(handler=LazyHandler("doctor", "cmd_doctor"))


@_verb("prune", "delete old versions under the retention policy (never the current, parked or last valid one)")
def _prune(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("--dry-run", action="store_true", help="change nothing; say what would be pruned")
    p.add_argument("--keep", type=int, metavar="N",
                   help="keep the newest N distinct contents of each component (a park or unpark "
                        "records no new content; default: retention.keep_versions)")
    p.add_argument("--keep-for", metavar="DURATION",
                   help="keep every version younger than DURATION (30d, 12h; default: retention.keep_for)")
    p.set_defaults(handler=LazyHandler("prune", "cmd_prune"))


@_verb("pin", "place a Pending API pod on a node by hand (spec.nodeName), with the kubelet's checks and the "
      "scheduler's warnings")
def _pin(p: argparse.ArgumentParser, wait: bool) -> None:
    p.add_argument("pod", help="the Pending pod's name")
    p.add_argument("-n", "--namespace", default="default", help="its namespace (default: default)")
    p.add_argument("--node", required=True, help="the node to run it on")
    p.add_argument("--kubeconfig", metavar="PATH", default=None,
                   help="admin kubeconfig (default /etc/kubernetes/admin.conf, taken under --root)")
    p.add_argument("--dry-run", action="store_true", help="print the manifest and the checks; replace nothing")
    p.add_argument("--strict", action="store_true", help="refuse when any scheduler rule is walked around")
    p.add_argument("--force-owned", action="store_true",
                   help="pin a pod a controller owns (its ownerReferences are dropped: the pinned pod is bare)")
    p.add_argument("--wait", nargs="?", const="default", default=None, metavar="TIMEOUT",
                   type=_pin_wait, help="wait until the pod is Running (default 5m; e.g. --wait=90s); exit 6 if not")
    p.add_argument("--ready", action="store_true", help="with --wait: wait for the pod's Ready condition too")
    p.add_argument("--delete-timeout", type=_seconds, default=60.0, metavar="SECONDS",
                   help="how long to wait for the deleted pod to be gone before creating (default 60)")
    p.set_defaults(handler=LazyHandler("pin", "cmd_pin"))


def _pin_wait(text: str) -> float | str:
    """argparse type of pin's ``--wait``: ``default`` or a duration (as the other verbs' --wait)."""
    from ..proof.options import _wait_value

    return _wait_value(text)


def _wait_args(p: argparse.ArgumentParser, verb: str) -> None:
    try:
        from ..proof.options import add_wait_arguments
    except ImportError:
        return
    add_wait_arguments(p, verb=verb)


#: Options of the top level that take a value (``--root DIR``): their value is not the verb.
_VALUE_OPTIONS = ("--root", "--manifest-dir", "--config", "--lock-timeout")


#: options whose value may start with "-" (a negative duration or number); argparse takes
#: ``--for -5m`` for two options ("expected one argument"), so such a value is glued on with "="
_SIGNED_VALUE_OPTIONS = ("--for", "--until", "--keep-for", "--keep", "--lock-timeout", "--limit", "-n", "--to")


def glue_dash_values(argv: list[str]) -> list[str]:
    """``argv`` with ``OPTION -VALUE`` (e.g. ``--for -5m``) written ``OPTION=-VALUE`` for the options
    in :data:`_SIGNED_VALUE_OPTIONS`, so the value reaches the verb's own check and its clear
    message; nothing after ``--`` is touched."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out.extend(argv[i:])
            break
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a in _SIGNED_VALUE_OPTIONS and len(nxt) > 1 and nxt[0] == "-" and (nxt[1].isdigit() or nxt[1] == "."):
            out.append(f"{a}={nxt}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def first_word(argv: list[str]) -> str | None:
    """The first positional word of ``argv`` (what argparse takes as the verb), or None when an
    option it cannot place comes first (then every sub-parser is built, for argparse's own error)."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if not a.startswith("-") or a == "-":
            return a
        if a in _VALUE_OPTIONS:
            i += 2
            continue
        if a.split("=", 1)[0] in _VALUE_OPTIONS or a == "--json":
            i += 1
            continue
        return None  # -h, --version, a typo: build everything
    return None
