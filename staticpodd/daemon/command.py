"""The ``staticpodd`` command line: its parser and :func:`main`, the console script's entry point.

``--reload`` and ``--check-config`` are answered here without starting a daemon
(:mod:`staticpodd.daemon.control`); otherwise :func:`main` runs a :class:`~staticpodd.daemon.Daemon`
and returns its exit status. ``build_parser`` also generates the man page (packaging/gen-docs.py).
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..config import load_config
from ..errors import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, ConfigError
from ..hashes import builtin_hashes
from ..layout import Layout
from .control import bind_textfile_dir, reload_running
from .lifecycle import Daemon
from .options import validate_options


def build_parser() -> argparse.ArgumentParser:
    """The ``staticpodd`` command line (also used to generate the man page)."""
    p = argparse.ArgumentParser(
        prog="staticpodd",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 stopped cleanly (SIGTERM/SIGINT), reloaded, or configuration OK;\n"
        "  1 start-up failed (e.g. another staticpodd runs on this root), or no daemon to reload;\n"
        "  6 --reload timed out;\n"
        "  78 invalid configuration (at start, refused by --reload, or --check-config).\n"
        "signals: SIGHUP reloads the configuration (the old one stays when the new one is invalid);\n"
        "  SIGTERM stops.\n"
        "files: <root>/etc/staticpodd/staticpodd.yaml (configuration),\n"
        "  <root>/run/staticpodd/daemon.json (heartbeat read by staticpodctl status),\n"
        "  <root>/run/staticpodd/staticpodd.pid (pid; flocked while the daemon runs).",
        description="Watch the kubelet's static pod manifest directory: record every change,\n"
        "enforce park deadlines, act on invalid writes and stray files by policy.\n"
        "Runs in the foreground as a systemd Type=notify service.",
    )
    p.add_argument("--version", action="version", version=f"staticpodd {__version__}")
    p.add_argument(
        "--root",
        default="/",
        metavar="DIR",
        help="take every path under DIR (manifests, state, run, config); default /",
    )
    p.add_argument(
        "--config", metavar="FILE", help="configuration file (default <root>/etc/staticpodd/staticpodd.yaml)"
    )
    p.add_argument(
        "--manifest-dir",
        metavar="DIR",
        help="the kubelet's staticPodPath (default: from the config, else the kubelet's config)",
    )
    p.add_argument(
        "--reload",
        action="store_true",
        help="ask the running daemon to reload its configuration (SIGHUP) and wait; "
        "exit 0 when reloaded, 78 when it refused the new configuration",
    )
    p.add_argument(
        "--check-config",
        action="store_true",
        help="check the configuration file and exit: 0 when valid, 78 with the key and line when not",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="with --reload: seconds to wait for the daemon (default 30)",
    )
    p.add_argument(
        "--unit",
        metavar="UNIT",
        help="with --reload (the unit's ExecReload=+, outside the sandbox): first bind a metrics "
        "textfile directory created after the daemon started into UNIT's mount namespace "
        "(systemctl bind), so that the reloaded daemon can write it",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``staticpodd`` console script. Returns the exit status.

    Exit statuses: 0 clean stop (SIGTERM/SIGINT) or reload done; 78 invalid configuration
    (at start, or refused by ``--reload``); 1 start-up failure; 6 ``--reload`` timed out.
    """
    args = build_parser().parse_args(argv)
    if args.reload:
        try:
            layout = Layout.build(args.root, args.manifest_dir)
        except ConfigError as exc:
            print(f"staticpodd: {exc}", file=sys.stderr)
            return EXIT_CONFIG
        if args.unit:
            bind_textfile_dir(layout, args.unit, config_path=args.config)
        return reload_running(layout, timeout=args.timeout)
    if args.check_config:
        try:
            layout = Layout.build(args.root, args.manifest_dir)
            cfg = load_config(layout, path=args.config)
            validate_options(cfg)
        except ConfigError as exc:
            print(f"staticpodd: invalid configuration: {exc}", file=sys.stderr)
            if exc.hint:
                print(f"hint: {exc.hint}", file=sys.stderr)
            return EXIT_CONFIG
        print(f"configuration OK: {cfg.source or f'{layout.config_path} (absent: all defaults)'}")
        return EXIT_OK
    builtin_hashes()
    try:
        daemon = Daemon(args)
    except ConfigError as exc:
        print(f"staticpodd: refusing to start: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return daemon.run()
    except Exception as exc:  # a bug outside run()'s own handlers: one journal entry, no bare traceback
        import traceback

        from ..journal import ERR, Event

        what = f"{type(exc).__name__}: {exc}"[:500]
        print(f"staticpodd: internal error: {what}", file=sys.stderr)
        daemon.journal.log(Event.DAEMON_ERROR, f"staticpodd stopped: internal error: {what}", priority=ERR,
                           error="internal-error",
                           traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        return EXIT_FAILURE
    finally:
        close = getattr(daemon.journal, "close", None)
        if close is not None:
            close()
