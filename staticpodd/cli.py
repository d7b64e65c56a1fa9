"""staticpodctl: the command line over :mod:`staticpodd.engine`.

One handler per verb. ``--json`` prints exactly one JSON object on one line of stdout
(``format_version`` 1, ``command``, ``ok``, then the verb's fields, or ``error`` with a stable
``code``); humans get short sentences and tables. Exit statuses are in :mod:`staticpodd.errors`
and README "Exit codes".

Import cost matters: ``park``, ``unpark``, ``status`` and ``history`` must not import jsonschema
or watchdog (issue 2), so heavy modules are imported inside the handlers that need them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from . import __version__
from .errors import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    ConfigError,
    EditorFailed,
    FsError,
    InvalidManifest,
    StaticpodError,
    UsageError,
)
from .termsafe import json_safe, note_names, safe, shell_word

FORMAT_VERSION = 1
PROG = "staticpodctl"


class _Parser(argparse.ArgumentParser):
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

    def error(self, message: str) -> Any:  # type: ignore[override]
        # under --detailed-exitcode 2 means "changed": a failure must not look like one
        status = EXIT_FAILURE if _Parser.detailed else EXIT_USAGE
        if _Parser.json_mode:
            _emit_json({"format_version": FORMAT_VERSION, "command": _Parser.verb, "ok": False,
                        "error": {"code": "usage", "message": message}})
            sys.exit(status)
        self.print_usage(sys.stderr)
        self.exit(status, f"{self.prog}: error: {message}\n")


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
         "validate", "doctor", "prune")


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


def build_parser(verb: str | None = None, *, only: bool = False) -> argparse.ArgumentParser:
    """The staticpodctl argument parser (also used to generate the man page and completion).

    ``verb``: when main() already knows which verb runs, only that verb's parser pulls in the
    modules behind its options (the validator, the --wait prover); the others stay placeholders
    good for ``--help``. None builds everything. ``only``: build no other verb's sub-parser at all
    (main() passes it when ``verb`` is certainly the command: the first positional word).
    """
    full = verb is None
    parser = _Parser(
        prog=PROG,
        description="Version, validate, atomically swap and park the kubelet's static pod manifests.",
        epilog="Exit codes: 0 ok, 1 failed or invalid, 2 usage, 3 unknown component/version, "
        "4 conflict (already parked, live file exists, duplicate pod), 5 lock timeout, "
        "6 --wait timed out, 78 bad configuration. apply --detailed-exitcode: 0 unchanged, 2 changed, 1 failed.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def verb_(name: str, help_: str, **kw: Any) -> argparse.ArgumentParser:
        if only and name != verb:
            return argparse.ArgumentParser(add_help=False)  # not attached: parsing never reaches it
        p = sub.add_parser(name, help=help_, description=help_, **kw)
        _common(p, top=False)
        return p

    def wait_args(p: argparse.ArgumentParser, name: str) -> None:
        if full or verb == name:
            _wait_args(p, name)

    p = verb_("status", "show every component: live, parked (who, why, until when), drift, daemon health")
    p.set_defaults(handler=cmd_status)

    p = verb_("park", "take a component out of the kubelet's directory, keeping it (e.g. stop kube-scheduler)")
    p.add_argument("component", help="component name (kube-scheduler) or file name")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--for", dest="for_", metavar="DURATION",
                      help="restore it automatically after DURATION (90s, 30m, 2h, 1h30m; a plain number is seconds; "
                      "the daemon does the restore)")
    when.add_argument("--until", metavar="TIME", help="restore it at TIME (ISO 8601, e.g. 2026-11-30T06:00Z)")
    p.add_argument("--reason", help="why (recorded and logged)")
    wait_args(p, "park")
    p.set_defaults(handler=cmd_park)

    p = verb_("unpark", "put a parked component back at the same path, byte-identical")
    p.add_argument("component", help="component name (kube-scheduler) or file name")
    p.add_argument("--reason", help="why (recorded and logged)")
    p.add_argument("--discard", action="store_true",
                   help="end the park without starting anything: delete the parked copy (its bytes stay in "
                   "history), e.g. a parked leftover .bak")
    wait_args(p, "unpark")
    p.set_defaults(handler=cmd_unpark)

    p = verb_("apply", "validate a manifest, record it, and swap it in atomically")
    p.add_argument("file", help="the new manifest (any name; - for stdin, with --as)")
    p.add_argument("--as", dest="as_", metavar="COMPONENT", help="the component it replaces (default: file stem)")
    p.add_argument("--reason", help="why (recorded and logged)")
    p.add_argument("--check", action="store_true", help="change nothing; say what would change")
    p.add_argument("--diff", action="store_true", help="show the diff; alone it changes nothing, like --check")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 unchanged, 2 changed, 1 failed (Puppet/Terraform convention)")
    p.add_argument("--unpark", action="store_true", help="if the component is parked, unpark it too")
    p.add_argument("--rename", action="store_true",
                   help="allow the new manifest to define another pod (metadata.name/namespace) than the current one")
    wait_args(p, "apply")
    p.set_defaults(handler=cmd_apply)

    p = verb_("edit", "edit a component in $VISUAL/$EDITOR on a staged copy; validated before the swap")
    p.add_argument("component", help="component name (kube-apiserver) or file name")
    p.add_argument("--reason", help="why (recorded and logged)")
    p.add_argument("--rename", action="store_true",
                   help="allow the edit to change the pod's metadata.name/namespace")
    wait_args(p, "edit")
    p.set_defaults(handler=cmd_edit)

    p = verb_("history", "list the recorded versions of a component")
    p.add_argument("component")
    p.add_argument("-n", "--limit", type=int,
                   help=f"only the newest N versions (default {HISTORY_DEFAULT}; 0 or --all: every version)")
    p.add_argument("--all", action="store_true", help="every recorded version, however many")
    p.set_defaults(handler=cmd_history)

    p = verb_("show", "print a version's bytes (COMPONENT@N), or the current file (COMPONENT)")
    p.add_argument("spec", metavar="COMPONENT[@N]")
    p.set_defaults(handler=cmd_show)

    p = verb_("diff", "unified diff between versions A and B (default: newest version vs the current file)")
    p.add_argument("component")
    p.add_argument("a", nargs="?", type=int, help="version A (default: the newest)")
    p.add_argument("b", nargs="?", type=int, help="version B (default: the current file)")
    p.add_argument("--exit-code", action="store_true",
                   help="exit 1 when there are differences, 0 when there are none (as git diff --exit-code)")
    p.set_defaults(handler=cmd_diff)

    p = verb_("rollback", "put an earlier version back (recorded as a new version)")
    p.add_argument("component", help="component name or file name")
    p.add_argument("--to", type=int, metavar="N",
                   help="version to restore (default: the newest version whose bytes differ from the current file)")
    p.add_argument("--reason", help="why (recorded and logged)")
    p.add_argument("--check", action="store_true", help="change nothing; say what would change")
    wait_args(p, "rollback")
    p.set_defaults(handler=cmd_rollback)

    p = verb_("recover", "finish or undo operations interrupted by a crash (every changing verb does this first)")
    p.set_defaults(handler=cmd_recover)

    if full or verb == "validate":
        from .validate.cli import add_validate_parser

        p = add_validate_parser(sub)
        _common(p, top=False)
        p.set_defaults(handler=cmd_validate)
    else:
        p = verb_("validate", "check manifests (files or a whole directory) the way the kubelet reads them")
        p.add_argument("path", nargs="+")

    p = verb_("doctor", "check the whole directory as the kubelet reads it, the store and the daemon")
    p.set_defaults(handler=cmd_doctor)

    p = verb_("prune", "delete old versions under the retention policy (never the current, parked or last valid one)")
    p.add_argument("--dry-run", action="store_true", help="change nothing; say what would be pruned")
    p.add_argument("--keep", type=int, metavar="N",
                   help="keep the newest N versions of each component (default: retention.keep_versions)")
    p.add_argument("--keep-for", metavar="DURATION",
                   help="keep every version younger than DURATION (30d, 12h; default: retention.keep_for)")
    p.set_defaults(handler=cmd_prune)
    return parser


def _wait_args(p: argparse.ArgumentParser, verb: str) -> None:
    try:
        from .proof.options import add_wait_arguments
    except ImportError:
        return
    add_wait_arguments(p, verb=verb)


# -- output helpers -------------------------------------------------------------------------------


def _emit_json(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(json_safe(obj), sort_keys=False, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


class Out:
    """Where a handler writes: human text, or one JSON object at the end."""

    def __init__(self, args: argparse.Namespace) -> None:
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
        if self.json:
            self.body.update(body)
            _emit_json({"format_version": FORMAT_VERSION, "command": self.command, "ok": ok, **self.body})


def _print_warnings(out: Out, warnings: list[Any]) -> None:
    for w in warnings:
        out.warn(w.format())


def _ago(seconds: float) -> str:
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d"


# -- building the engine ----------------------------------------------------------------------------


def _layout(args: argparse.Namespace) -> Any:
    from .layout import Layout

    root = getattr(args, "root", None) or "/"
    mdir = getattr(args, "manifest_dir", None)
    if mdir is not None:
        return Layout.build(root, mdir)
    # Same precedence as the daemon: --manifest-dir, then the configuration's manifest_dir (the
    # default config file too, not only --config), then the kubelet's staticPodPath, then the default.
    default = Layout.build(root)
    if getattr(args, "config", None) is None and not default.config_path.exists():
        return default
    try:
        cfg = _load_config(args, default)
    except ConfigError:
        if getattr(args, "command", None) not in TOLERATE_BAD_CONFIG:
            raise
        # The engine's loader warns and goes on with default settings; but which directory to
        # act on is not a setting to guess: use manifest_dir if it can still be read, refuse if not.
        mdir = _salvage_manifest_dir(getattr(args, "config", None) or str(default.config_path))
        if mdir is None:
            return default
        from .layout import under_root

        return Layout.build(root, under_root(default.root, mdir))
    mdir = getattr(cfg, "manifest_dir", None)
    if mdir:
        from .layout import under_root

        return Layout.build(root, under_root(default.root, mdir))
    return default


def _salvage_manifest_dir(path: str) -> str | None:
    """``manifest_dir`` from a configuration file that failed its schema check (another key is
    wrong): the absolute path it names, or None when it names none. Raises ConfigError when the
    file mentions manifest_dir but it cannot be read as an absolute path: acting on the default
    directory then could park or change the wrong files."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return None
    if b"manifest_dir" not in raw:
        return None
    try:
        import yaml

        doc = yaml.safe_load(raw)
    except Exception:  # noqa: BLE001 - any YAML problem: refuse below
        doc = None
    value = doc.get("manifest_dir") if isinstance(doc, dict) else None
    if value is None and isinstance(doc, dict) and "manifest_dir" not in doc:
        return None
    if not isinstance(value, str) or not value.startswith("/"):
        raise ConfigError(
            "the configuration is invalid and its manifest_dir cannot be read, so it is not clear which "
            "directory to act on",
            path=path,
            hint="fix the configuration (staticpodd --check-config), or pass --manifest-dir",
        )
    return value


_config_cache: dict[str, Any] = {}


def _load_config(args: argparse.Namespace, layout: Any) -> Any:
    """The configuration, schema-checked. A config whose bytes were already checked is read
    from a small JSON cache under /run/staticpodd keyed by its sha256, so the fast verbs do not
    import YAML and JSON Schema on every run."""
    key = f"{layout.root}|{getattr(args, 'config', None)}"
    if key in _config_cache:
        return _config_cache[key]
    import hashlib

    explicit = getattr(args, "config", None)
    path = explicit if explicit else str(layout.config_path)
    cache_path = layout.run_dir / "config-checked.json"
    cfg = None
    try:
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    except FileNotFoundError:
        if not explicit:  # no config file: all documented defaults
            from .config import Config

            _config_cache[key] = Config.default()
            return _config_cache[key]
        digest = None
    except OSError:
        digest = None
    if digest is not None:
        try:
            cached = json.loads(cache_path.read_text(encoding="utf-8"))
            if (cached.get("digest") == digest and cached.get("path") == os.path.abspath(path)
                    and cached.get("checked_by") == __version__):  # a new release may check more
                from .config import Config

                cfg = Config.from_dict(cached["config"], source=path, digest=digest)
        except (OSError, ValueError, KeyError, TypeError):
            cfg = None
    if cfg is None:
        from .config import load_config

        cfg = load_config(layout, path=explicit)
        if digest is not None:
            try:
                layout.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
                tmp = cache_path.with_name(f".config-checked.{os.getpid()}")
                tmp.write_text(json.dumps({"path": os.path.abspath(path), "digest": digest,
                                           "checked_by": __version__, "config": cfg.to_dict()}),
                               encoding="utf-8")
                os.replace(tmp, cache_path)
            except OSError:
                pass
    _config_cache[key] = cfg
    return cfg


#: Verbs that go on with default settings (and a warning) when staticpodd.yaml is invalid.
TOLERATE_BAD_CONFIG = ("status", "history", "show", "diff", "park", "unpark", "recover", "doctor")
_config_problems: list[StaticpodError] = []


def _engine(args: argparse.Namespace) -> Any:
    from .engine import Actor, Engine
    from .journal import Journal

    layout = _layout(args)
    loaded: list[Any] = []

    def loader() -> Any:  # loads (and warns) once, however often it is asked
        if not loaded:
            loaded.append(_load())
        return loaded[0]

    def _load() -> Any:
        try:
            return _load_config(args, layout)
        except ConfigError as exc:
            if getattr(args, "command", None) not in TOLERATE_BAD_CONFIG:
                raise
            # At 3 a.m. a typo in staticpodd.yaml must not block unpark or status: say so, go on
            # with the documented defaults. Verbs that validate (apply, edit, rollback) refuse.
            _config_problems.append(exc)
            if not getattr(args, "json", False):
                print(safe(f"{PROG}: warning: ignoring the invalid configuration, using defaults: {exc}"),
                      file=sys.stderr)
            from .config import Config

            return Config.default()

    lock_timeout = getattr(args, "lock_timeout", None)
    if lock_timeout is None and (getattr(args, "config", None) or layout.config_path.exists()):
        lock_timeout = getattr(loader(), "lock_timeout", None)
    return Engine(layout, actor=Actor.current(), journal=Journal(PROG, str(layout.root)),
                  config_loader=loader, lock_timeout=lock_timeout)


# -- handlers -----------------------------------------------------------------------------------------


def _heartbeat(layout: Any) -> dict[str, Any]:
    """The daemon's health from its heartbeat file (written under /run/staticpodd every loop)."""
    path = layout.heartbeat_path
    try:
        raw = path.read_text(encoding="utf-8")
        st = path.stat()
    except FileNotFoundError:
        return {"running": False, "healthy": False, "detail": "not running (no heartbeat)"}
    except OSError as exc:
        return {"running": False, "healthy": False, "detail": f"heartbeat unreadable: {exc.strerror}"}
    try:
        hb = json.loads(raw)
    except ValueError:
        hb = {}
    pid = hb.get("pid")
    alive = _daemon_holds_pidfile(layout)
    if alive is None:  # no pid file to ask (an older daemon): fall back to the pid
        from .engine import pid_alive

        alive = isinstance(pid, int) and hb.get("state") != "stopped" and pid_alive(pid)
    age = time.time() - st.st_mtime
    interval = hb.get("heartbeat_interval") or hb.get("rescan_interval") or 20
    stale_after = max(3 * float(interval), 30.0)
    healthy = alive and age <= stale_after and not hb.get("problems")
    if not alive:
        detail = f"not running (last heartbeat {_ago(age)} ago, pid {pid} gone)"
    elif age > stale_after:
        detail = f"running (pid {pid}) but STUCK: last heartbeat {_ago(age)} ago"
    else:
        detail = f"running (pid {pid}), heartbeat {_ago(age)} ago"
        if hb.get("problems"):
            detail += f", {len(hb['problems'])} problem(s)"
    return {"running": alive, "healthy": healthy, "stuck": bool(alive and age > stale_after),
            "heartbeat_age": round(age, 1), "pid": pid,
            "detail": detail, "summary": hb.get("summary"),
            # a dead daemon's last problems are history, not the state of the node
            "problems": (hb.get("problems") or []) if alive else []}


def _daemon_holds_pidfile(layout: Any) -> bool | None:
    """Whether a staticpodd holds its exclusive flock on ``<run>/staticpodd.pid`` (immune to pid
    reuse); None when there is no pid file."""
    import fcntl

    try:
        fd = os.open(layout.run_dir / "staticpodd.pid", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def cmd_status(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    st = eng.status()
    note_names(n for r in st["components"] for n in (r["component"], r["file_name"]))
    daemon = _heartbeat(eng.layout)
    now = time.time()
    out.say(f"manifest directory: {st['manifest_dir']}")
    out.say(f"daemon: {daemon['detail']}")
    for prob in (daemon.get("problems") or []) if daemon["running"] else []:
        out.say(f"  problem: {prob if isinstance(prob, str) else prob.get('message', prob)}")
    if st["interrupted"]:
        out.say(f"interrupted operations: {st['interrupted']} (run: staticpodctl recover)")
    for name in st.get("untrackable", []):
        out.warn(f"{PROG}: warning: {name}: the file name is not valid UTF-8; the kubelet reads it but "
                 "staticpodd cannot track it (rename it, e.g. with: mv -- <name> <utf-8-name>)")
    rows = st["components"]
    if not rows:
        out.say("no manifests")
    else:
        out.say(f"{'COMPONENT':<28} {'STATE':<7} {'VER':>4}  {'DIGEST':<12}  NOTE")
        for r in rows:
            notes = []
            if r["stray"] and r["state"] == "live":
                notes.append("STRAY: the kubelet runs this file too")
            if r["drift"] and r["state"] != "missing":
                notes.append("untracked: not recorded yet" if r["version"] is None
                             else "drift: changed by someone else")
            if r.get("park_broken"):
                notes.append("PARK BROKEN: live again while parked")
            if r["state"] == "removed":
                notes.append(f"not in the directory any more; `{PROG} rollback {shell_word(r['component'])}` puts "
                             f"version {r['version']} back")
            if r.get("unparked_by_hand"):
                notes.append(f"moved back by hand: the kubelet runs it; `{PROG} unpark {shell_word(r['component'])}` "
                             "closes the park record")
            p = r["parked"]
            if p:
                from datetime import datetime

                since = datetime.strptime(p["since"], "%Y-%m-%dT%H:%M:%SZ").timestamp() - time.timezone
                text = f"parked {_ago(now - since)} ago by {p['actor']}"
                if p["until"]:
                    until = datetime.strptime(p["until"], "%Y-%m-%dT%H:%M:%SZ").timestamp() - time.timezone
                    left = until - now
                    text += f", until {p['until']} (" + (f"{_ago(left)} left" if left > 0 else "OVERDUE") + ")"
                if p["reason"]:
                    text += f": {p['reason']}"
                if r["state"] == "missing":
                    text = "PARKED COPY MISSING; " + text
                notes.append(text)
            ver = "-" if r["version"] is None else str(r["version"])
            digest = (r["digest"] or "-")[:12]
            out.say(f"{r['component']:<28} {r['state']:<7} {ver:>4}  {digest:<12}  {'; '.join(notes)}")
    out.finish(True, **st, daemon=daemon)
    return EXIT_OK


#: The longest deadline a park takes (10 years): longer is a typo (``--for 99999999d`` reached past
#: year 9999, which no timestamp can show); a park with no deadline at all lasts until unparked.
MAX_PARK_SECONDS = 3650 * 86400.0


def _parse_until(args: argparse.Namespace) -> float | None:
    from .engine import parse_duration

    if getattr(args, "for_", None):
        seconds = parse_duration(args.for_)
        if seconds <= 0:
            raise UsageError(f"--for {args.for_}: the park must last longer than 0 s",
                             hint="e.g. --for 30m (a plain number means seconds)")
        if seconds > MAX_PARK_SECONDS:
            raise UsageError(f"--for {args.for_}: a park deadline is at most 10 years away",
                             hint="leave out --for/--until to park until you unpark")
        return time.time() + seconds
    if getattr(args, "until", None):
        from datetime import datetime, timezone

        text = args.until.strip().replace("Z", "+00:00").replace("z", "+00:00")
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise UsageError(f"cannot read time {args.until!r}", hint="use ISO 8601, e.g. 2026-11-30T06:00Z") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        ts = dt.timestamp()
        if ts <= time.time():
            raise UsageError(f"--until {args.until} is in the past")
        if ts > time.time() + MAX_PARK_SECONDS:
            raise UsageError(f"--until {args.until}: a park deadline is at most 10 years away",
                             hint="leave out --for/--until to park until you unpark")
        return ts
    return None


def _result_out(out: Out, res: Any, *, show_diff: bool = False, eng: Any = None) -> None:
    if eng is not None and eng.hook_warnings:  # post-hooks that failed: not fatal, never silent
        res.warnings = [*res.warnings, *eng.hook_warnings]
        eng.hook_warnings.clear()
    out.say(res.msg)
    _print_warnings(out, res.warnings)
    if show_diff and res.diff:
        out.say(res.diff.rstrip("\n"))
    out.body.update(res.to_dict())
    out.body["comment"] = res.msg  # Salt's stateful cmd.run reads changed/comment from the last line


def _wait(args: argparse.Namespace, out: Out, eng: Any, verb: str, res: Any, **kw: Any) -> int:
    """Run the --wait proof when asked (issue 7); returns an exit status (0 when not asked)."""
    if getattr(args, "wait", None) is None:
        return EXIT_OK
    from .proof import run_wait

    return int(run_wait(args, out, eng, verb, res, **kw))


def cmd_park(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    until = _parse_until(args)
    before = _pre_wait(args, eng, "park")
    res = eng.park(args.component, until=until, reason=args.reason, force=bool(getattr(args, "force", False)))
    _result_out(out, res, eng=eng)
    if until is not None:
        when = res.park.to_dict()["until"]
        if _heartbeat(eng.layout)["running"]:
            out.say(f"  until {when}: staticpodd unparks it then")
        else:
            out.warn(f"{PROG}: warning: staticpodd is not running: nothing unparks {res.component} at {when} "
                     "until it starts (it then unparks overdue parks at once)")
    if not res.extra.get("keeps_running_from"):  # else the headline already says where the pod runs from
        out.say(f"  the kubelet stops the pod within ~20 s; undo with: {PROG} unpark {shell_word(res.component)}")
    rc = _wait(args, out, eng, "park", res, before=before)
    out.finish(rc == EXIT_OK)
    return rc


def _pre_wait(args: argparse.Namespace, eng: Any, verb: str) -> Any:
    if getattr(args, "wait", None) is None and verb != "park":
        return None
    try:
        from .proof import before_operation
    except ImportError:
        return None
    return before_operation(args, eng, verb)


def cmd_unpark(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    if args.discard:
        if getattr(args, "wait", None) is not None:
            raise UsageError("--discard starts nothing, so there is nothing to --wait for")
        res = eng.discard_park(args.component, reason=args.reason)
        _result_out(out, res, eng=eng)
        out.finish(True)
        return EXIT_OK
    before = _pre_wait(args, eng, "unpark")
    res = eng.unpark(args.component, reason=args.reason)
    _result_out(out, res, eng=eng)
    rc = _wait(args, out, eng, "unpark", res, before=before)
    out.finish(rc == EXIT_OK)
    return rc


def _read_source(path: str) -> bytes:
    """The bytes to apply, at most one byte past the kubelet's 10 MB read limit (``apply
    /dev/zero`` must not eat the node's memory): a longer input is refused by the gate as the
    kubelet refuses it, from what was read."""
    from .fsops import KUBELET_MAX_BYTES

    if path == "-":
        return sys.stdin.buffer.read(KUBELET_MAX_BYTES + 1)
    try:
        with open(path, "rb") as fh:
            return fh.read(KUBELET_MAX_BYTES + 1)
    except FileNotFoundError:
        raise FsError(f"no such file: {path}", path=path) from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory; apply takes one manifest file", path=path) from None
    except OSError as exc:
        raise FsError(f"cannot read {path}: {exc.strerror}", path=path) from None


def cmd_apply(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    data = _read_source(args.file)
    if args.file == "-" and not args.as_:
        raise UsageError("apply - (stdin) needs --as COMPONENT")
    dry = args.check or args.diff
    before = _pre_wait(args, eng, "apply") if not dry else None
    res = eng.apply(data, source=args.file, component=args.as_, reason=args.reason, check=dry,
                    unpark=args.unpark, rename=args.rename)
    _result_out(out, res, show_diff=args.diff or (args.check and not out.json), eng=eng)
    if res.check and res.changed:
        out.say("  (check mode: nothing was changed)")
    rc = EXIT_OK
    if not dry and res.changed:
        rc = _wait(args, out, eng, "apply", res, before=before)
    out.finish(rc == EXIT_OK)
    if rc != EXIT_OK:
        return EXIT_FAILURE if args.detailed_exitcode else rc  # 2 would read as "changed"
    if args.detailed_exitcode and res.changed:
        return 2
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    before = _pre_wait(args, eng, "rollback") if not args.check else None
    res = eng.rollback(args.component, to=args.to, reason=args.reason, check=args.check)
    _result_out(out, res, show_diff=args.check, eng=eng)
    rc = EXIT_OK
    if not args.check and res.changed:
        rc = _wait(args, out, eng, "rollback", res, before=before)
    out.finish(rc == EXIT_OK)
    return rc


def cmd_edit(args: argparse.Namespace, out: Out) -> int:
    import tempfile

    from . import fsops
    from .store import digest_of

    eng = _engine(args)
    target = eng.resolve(args.component, allow_recorded=False)
    with eng.nothing_changed_on_error():
        with eng.locked():  # record the bytes being edited first: a write meanwhile is then a version after them
            fsops.ensure_private_dirs(eng.layout)
            eng.scan(None)
        target, data, loc = eng.current_bytes(args.component)
        base = digest_of(data)
        edit_root = eng.layout.run_dir / "edit"
        try:
            edit_root.mkdir(mode=0o700, parents=True, exist_ok=True)
            workdir = tempfile.mkdtemp(prefix=f"{target.component}-", dir=edit_root)
            path = os.path.join(workdir, target.file_name)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise FsError(f"cannot make the copy to edit: {exc.strerror}", path=str(edit_root),
                          hint="free space under /run (or remount it read-write), then edit again") from None
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    interactive = sys.stdin.isatty() and not out.json
    try:
        return _edit_loop(args, out, eng, target, data, base, path, workdir, editor, interactive)
    except KeyboardInterrupt:
        out.warn(f"{PROG}: interrupted; nothing changed; your copy is kept at {path}")
        return 130


def _edit_loop(args: argparse.Namespace, out: Out, eng: Any, target: Any, data: bytes, base: str, path: str,
               workdir: str, editor: str, interactive: bool) -> int:
    import shlex
    import shutil
    import subprocess

    while True:
        try:
            rc = subprocess.call([*shlex.split(editor), path])
        except (OSError, ValueError) as exc:  # no such editor, or an unparsable $EDITOR
            raise EditorFailed(
                f"cannot run the editor {editor!r}: {getattr(exc, 'strerror', None) or exc}; nothing changed",
                hint=f"set $VISUAL or $EDITOR to an editor that exists (your copy: {path})",
            ) from None
        if not os.path.exists(path):
            raise EditorFailed(f"the editor removed {path}; nothing changed",
                               hint="edit the file in place; do not delete or move it")
        if rc != 0:
            raise EditorFailed(f"the editor {editor!r} exited with status {rc}; nothing changed",
                               path=path, hint=f"your copy is kept at {path}")
        with open(path, "rb") as fh:
            new = fh.read()
        if new == data:
            shutil.rmtree(workdir, ignore_errors=True)
            out.say(f"{target.component}: no changes")
            out.finish(True, changed=False, component=target.component, msg="no changes")
            return EXIT_OK
        try:
            before = _pre_wait(args, eng, "edit")
            res = eng.apply(new, source=path, component=target.file_name, reason=args.reason, action="edit",
                            expect_digest=base, rename=args.rename)
        except InvalidManifest as exc:
            if not interactive:
                out.warn(f"{PROG}: {target.file_name} not changed; your edit is kept at {path}")
                raise
            for f in exc.findings:
                if f.severity == "error":
                    out.warn(f.format())
            answer = input("What now? (e)dit again, e(x)it without saving [e]: ").strip().lower()
            if answer.startswith("x"):
                out.warn(f"{PROG}: nothing changed; your edit is kept at {path}")
                return EXIT_FAILURE
            continue
        except StaticpodError:
            out.warn(f"{PROG}: {target.file_name} not changed; your edit is kept at {path}")
            raise
        shutil.rmtree(workdir, ignore_errors=True)
        _result_out(out, res, eng=eng)
        rc = _wait(args, out, eng, "edit", res, before=before)
        out.finish(rc == EXIT_OK)
        return rc


#: Versions ``history`` shows by default (newest first cut): its cost must not grow with the store.
HISTORY_DEFAULT = 100


def cmd_history(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    limit = None if args.all or args.limit == 0 else (HISTORY_DEFAULT if args.limit is None else args.limit)
    if limit is not None and limit < 0:
        raise UsageError(f"-n {args.limit}: give a number of versions >= 0 (0: all)")
    comp, versions = eng.history(args.component, limit=limit)
    total = len(versions)
    if limit is not None and len(versions) >= limit and eng.layout.db_path.exists():
        total = eng.store.count(comp)
    note_names([comp, *{v.file_name for v in versions}])
    current = None
    try:
        from .store import digest_of

        _, data, loc = eng.current_bytes(comp)
        current = digest_of(data)
    except StaticpodError:
        loc = "no file"
    if not versions:
        out.say(f"{comp}: no recorded versions yet")
    else:
        out.say(f"{comp} ({versions[-1].file_name}, {loc})")
        out.say(f"  {'VER':>4}  {'WHEN (UTC)':<20} {'ACTION':<9} {'ACTOR':<18} {'DIGEST':<12}  REASON")
        for v in versions:
            mark = "*" if v.digest == current and v is versions[-1] else " "
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(v.created_at))
            actor = v.actor + (f" ({v.actor_via})" if v.actor_via else "")
            out.say(f"{mark} {v.seq:>4}  {when:<20} {v.action:<9} {actor:<18} {v.digest[:12]:<12}  {v.reason or ''}")
        if current is not None and versions[-1].digest != current:
            out.say(f"  the current file ({current[:12]}) differs from the newest version: drift, not recorded yet")
        if total > len(versions):
            out.say(f"  ({total - len(versions)} older version(s) not shown: staticpodctl history {shell_word(comp)} "
                    "--all, or -n N)")
    if out.json:
        out.finish(True, component=comp, current_digest=current, total_versions=total,
                   truncated=total > len(versions), versions=[v.to_dict() for v in versions])
    return EXIT_OK


def cmd_show(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    version, data, label = eng.show(args.spec)
    if out.json:
        try:
            text, enc = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            import base64

            text, enc = base64.b64encode(data).decode(), "base64"
        out.finish(True, label=label, version=version.to_dict() if version else None, encoding=enc, content=text)
    else:
        sys.stdout.flush()
        buf = getattr(sys.stdout, "buffer", None)
        if buf is not None:
            buf.write(data)  # byte-exact, whatever the encoding
            buf.flush()
        else:
            sys.stdout.write(data.decode("utf-8", "replace"))
    return EXIT_OK


def cmd_diff(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    text = eng.diff(args.component, args.a, args.b)
    if out.json:
        out.finish(True, component=args.component, a=args.a, b=args.b, diff={"text": text}, same=not text)
    else:
        sys.stdout.write(text)
    return EXIT_FAILURE if args.exit_code and text else EXIT_OK


def cmd_recover(args: argparse.Namespace, out: Out) -> int:
    eng = _engine(args)
    with eng.locked():  # locked() runs recover() on first acquisition
        results = eng.last_recovery
    if not results:
        out.say("nothing to recover")
    for r in results:
        out.say(f"{r['op']} of {r['file_name']}: {r['outcome']}")
    out.finish(True, recovered=results)
    return EXIT_OK


def cmd_prune(args: argparse.Namespace, out: Out) -> int:
    from .retention import policy_for, prune

    eng = _engine(args)
    keep_for = None
    if args.keep_for is not None:
        from .engine import parse_duration

        keep_for = parse_duration(args.keep_for)
    if args.keep is not None and args.keep < 1:
        raise UsageError(f"--keep {args.keep}: keep at least 1 version", hint="the newest version is always kept")
    from .config import load_config

    # strictly: a prune deletes, so a broken configuration is an error here, never "defaults"
    policy = policy_for(load_config(eng.layout, path=getattr(args, "config", None)), keep=args.keep,
                        keep_for=keep_for)
    if not policy.active:
        out.say("no retention policy: nothing is pruned (set retention.keep_versions / retention.keep_for in "
                "staticpodd.yaml, or pass --keep N / --keep-for DURATION)")
        out.finish(True, dry_run=bool(args.dry_run), pruned_versions=0, deleted_blobs=0, freed_bytes=0,
                   components=[])
        return EXIT_OK
    with eng.locked():
        res = prune(eng, policy, time.time(), dry_run=args.dry_run)
    verb = "would prune" if res.dry_run else "pruned"
    for c in res.components:
        what = "all versions (removed stray, leaves status)" if c.retired else ", ".join(map(str, c.seqs))
        out.say(f"{c.component}: {verb} {len(c.seqs)} version(s): {what}; kept {c.kept}")
    out.say(f"{verb} {res.versions} version(s); {res.blobs} blob(s), {res.bytes} bytes "
            + ("would be freed" if res.dry_run else "freed"))
    out.finish(True, **res.to_dict())
    return EXIT_OK


def cmd_validate(args: argparse.Namespace, out: Out) -> int:
    from .validate.cli import run_validate

    args.base_options = _engine(args).validate_options()  # config defaults; flags win
    # names with a newline are shown escaped (termsafe.safe)
    for p in getattr(args, "paths", None) or getattr(args, "path", None) or []:
        note_names([os.path.basename(p)])
        try:
            note_names(os.listdir(p) if os.path.isdir(p) else [])
        except OSError:
            pass
    return int(run_validate(args, sys.stdout))


def _base(path: Any) -> str | None:
    return os.path.basename(str(path).rstrip("/")) if path else None


def _finding_problem_keys(findings: Any) -> dict[tuple[str | None, str | None], str]:
    """``(code, file name)`` per problem the daemon would count for these findings: an invalid
    file is one ``invalid-live`` problem; a directory-level finding of severity error or warning
    is one problem (a manifest-named file that is no Pod counts as invalid, not as a stray).
    Returns ``{key: "error" | "warning"}``."""
    from .layout import component_of
    from .reconcile import is_directory_finding, stray_by_name

    keys: dict[tuple[str | None, str | None], str] = {}
    for f in findings:
        name = _base(f.path)
        if is_directory_finding(f):
            if f.code == "stray" and name and not stray_by_name(name) and component_of(name) != name:
                keys[("invalid-live", name)] = "error"
            elif f.severity in ("error", "warning"):
                keys[(f.code, name)] = "error" if f.severity == "error" or keys.get((f.code, name)) == "error" \
                    else "warning"
        elif f.severity == "error":
            keys[("invalid-live", name)] = "error"
    return keys


def _unwritable(layout: Any) -> list[tuple[str, str, str]]:
    """``(code, message, path)`` for each place staticpodd must write but cannot: the manifest
    directory (restores, quarantines, parks, unparks fail with EROFS/EACCES), the version store
    and the run directory (the lock). A read-only mount is told apart from missing permission."""
    from .sandbox import read_only_mount

    found: list[tuple[str, str, str]] = []
    places = (
        ("manifest-dir", layout.manifest_dir, "the manifest directory",
         "apply, park, unpark, restore and quarantine fail"),
        ("store", layout.state_dir, "the version store's directory", "no version can be recorded"),
        ("run-dir", layout.run_dir, "the run directory (lock, heartbeat)", "no verb can take the lock"),
    )
    for code, path, what, effect in places:
        if not path.exists():
            continue
        if read_only_mount(path):
            found.append((f"{code}-read-only", f"{what} {path} is on a read-only mount: {effect}", str(path)))
        elif not os.access(path, os.W_OK):
            found.append((f"{code}-not-writable", f"{what} {path} is not writable for uid {os.geteuid()}: {effect}",
                          str(path)))
    db = layout.db_path
    if db.exists() and not read_only_mount(db) and not os.access(db, os.W_OK):
        found.append(("store-not-writable", f"the version store {db} is not writable for uid {os.geteuid()}: "
                      "no version can be recorded", str(db)))
    return found


def _unit_enabled_but_down(layout: Any) -> str | None:
    """``staticpodd.service`` when doctor looks at this machine's own root (``--root /``), systemd
    runs it and the unit is enabled (so the daemon is meant to run), else None. Never raises."""
    import shutil
    import subprocess

    unit = "staticpodd.service"
    if str(layout.root) != "/" or shutil.which("systemctl") is None or not os.path.isdir("/run/systemd/system"):
        return None
    try:
        r = subprocess.run(["systemctl", "is-enabled", unit], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return unit if r.stdout.strip() in ("enabled", "enabled-runtime") else None


def cmd_doctor(args: argparse.Namespace, out: Out) -> int:
    """Everything that can be wrong, in one look: the directory as the kubelet reads it, parks
    (broken, parked copy missing, overdue), drift, interrupted operations, the configuration,
    the version store, what cannot be written (a read-only manifest directory, store or run
    directory) and the daemon: down while its unit is enabled, stuck, or reporting problems of
    its own (its heartbeat's problems are listed too, once each, so doctor's count and the
    daemon's agree). Exit 0 when nothing is wrong, 1 otherwise."""
    from .validate import validate_directory

    eng = _engine(args)
    eng.check_manifest_dir()  # a missing directory is the one problem doctor cannot look past
    unwritable = _unwritable(eng.layout)  # before the store is opened: a read-only one is named
    eng.config  # load it now, so an invalid configuration is reported below  # noqa: B018
    findings = validate_directory(eng.layout.manifest_dir, eng.validate_options())
    st = eng.status()
    daemon = _heartbeat(eng.layout)
    problems: list[dict[str, Any]] = []

    def problem(code: str, message: str, **more: Any) -> None:
        problems.append({"code": code, "message": message, **more})
        out.say(f"problem[{code}]: {message}")

    for f in findings:
        out.say(f.format())
    errors = sum(1 for f in findings if f.severity == "error")
    for code, message, path in unwritable:
        problem(code, message, path=path)
    now = time.time()
    for r in st["components"]:
        p = r["parked"]
        if r.get("park_broken"):
            problem("park-broken", f"{r['component']} is parked but {r['file_name']} is live again: "
                    "the kubelet runs it", component=r["component"])
        if r["state"] == "missing":
            problem("parked-copy-missing", f"{r['component']} is recorded as parked but its parked copy is gone "
                    f"(put it back, still parked, with: {PROG} rollback {shell_word(r['component'])})",
                    component=r["component"])
        if p and p.get("until"):
            from datetime import datetime, timezone

            until = datetime.strptime(p["until"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
            if until < now - 60:
                problem("park-overdue", f"{r['component']} should have been unparked at {p['until']} "
                        "(is staticpodd running?)", component=r["component"])
        if r["drift"] and r["version"] is not None and r["state"] != "missing":
            problem("drift", f"{r['file_name']} differs from its newest recorded version "
                    f"(see: {PROG} diff {shell_word(r['component'])})", component=r["component"])
    for name in st.get("untrackable", []):
        problem("name-not-utf8", f"{name}: the file name is not valid UTF-8; the kubelet reads it but staticpodd "
                "cannot track its versions (rename it)", path=name)
    for comp, other in eng.parks_bypassed():
        problem("park-bypassed", f"{comp} is parked, but {other} defines the same pod: the kubelet runs it anyway "
                f"(park or move {other} too)", component=comp, path=str(eng.layout.manifest_dir / other))
    if st["interrupted"]:
        problem("interrupted", f"{st['interrupted']} interrupted operation(s) (run: {PROG} recover)")
    for exc in _config_problems:
        problem("config-invalid", str(exc))
    from .journal import journal_status

    journal_ok, journal_detail = journal_status()
    out.say(f"journal: {journal_detail}")
    if not journal_ok:
        problem("journal-unreachable", journal_detail)
    out.say(f"daemon: {daemon['detail']}")
    if daemon.get("stuck"):  # its own problems (an invalid manifest …) are reported above, from the directory
        problem("daemon-unhealthy", daemon["detail"])  # not running at all is allowed: the CLI works alone
    elif not daemon.get("running"):
        unit = _unit_enabled_but_down(eng.layout)
        if unit:  # ... unless systemd is meant to run it
            problem("daemon-down", f"{unit} is enabled but the daemon is not running ({daemon['detail']}): nothing "
                    "records edits, ends parks at their deadline or applies the policies (journalctl -u "
                    f"{unit}; systemctl start {unit})")
    # Counted as the daemon counts its heartbeat's problems (staticpodd.daemon.Daemon.problems),
    # so that doctor and `status` agree: one per invalid file (however many findings it has),
    # one per directory-level finding of severity error or warning (a stray, a duplicate pod ...),
    # one per problem of doctor's own; then every problem the running daemon reports that is not
    # among them yet (a failed write, a lock timeout ...), listed here once each.
    seen = _finding_problem_keys(findings)
    seen.update({(p["code"], _base(p.get("path"))): "error" for p in problems})
    for p in daemon.get("problems") or []:
        key = (p.get("code"), _base(p.get("path")))
        if key in seen:
            continue
        seen[key] = "warning" if p.get("severity") == "warning" else "error"
        problem(str(p.get("code") or "daemon-problem"), f"{p.get('message')} (reported by the daemon)",
                path=p.get("path"), severity=p.get("severity"), source="daemon")
    integrity = "ok"
    if eng.layout.db_path.exists():
        integrity = eng.store._db.execute("PRAGMA integrity_check").fetchone()[0]
    out.say(f"version store: {integrity}")
    if integrity != "ok":
        problem("store-corrupt", f"version store integrity check: {integrity}")
    # Exit 1 for any problem of severity error; warnings alone (a stray, a loose mode) are counted
    # and shown but exit 0, as before.
    ok = errors == 0 and "error" not in seen.values()
    if not seen:
        out.say("no problems found")
    else:
        out.say(f"{len(seen)} problem(s) found" + (" (warnings only)" if ok else ""))
    out.finish(ok, findings=[f.to_dict() for f in findings], problems=problems, daemon=daemon, store=integrity,
               interrupted=st["interrupted"], journal={"ok": journal_ok, "detail": journal_detail})
    return EXIT_OK if ok else EXIT_FAILURE


# -- entry point ------------------------------------------------------------------------------------


def _report_error(out: Out, exc: StaticpodError) -> None:
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


#: Options of the top level that take a value (``--root DIR``): their value is not the verb.
_VALUE_OPTIONS = ("--root", "--manifest-dir", "--config", "--lock-timeout")


def _first_word(argv: list[str]) -> str | None:
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


def main(argv: list[str] | None = None) -> int:
    """Run staticpodctl; returns the exit status (see README "Exit codes")."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _config_problems.clear()  # main() can run more than once in one process (tests, embedding)
    _Parser.json_mode = "--json" in argv
    chosen = next((a for a in argv if a in VERBS), None)
    _Parser.verb = chosen
    # any spelling of it (even a wrong one) means the caller reads 2 as "changed": fail with 1
    _Parser.detailed = any(a.startswith("--detailed") for a in argv)
    parser = build_parser(chosen or "", only=chosen is not None and _first_word(argv) == chosen)
    args = parser.parse_args(argv)
    if _Parser.json_mode:
        args.json = True
    out = Out(args)
    try:
        return int(args.handler(args, out))
    except StaticpodError as exc:
        _report_error(out, exc)
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
        _report_error(out, err)
        return EXIT_FAILURE
    except Exception as exc:  # a bug: keep the --json contract, and the traceback for the report
        import traceback

        traceback.print_exc()
        if out.json:
            out.finish(False, error={"code": "internal", "message": f"internal error: {exc!r}",
                                     "hint": "please report this with the traceback on stderr"})
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
