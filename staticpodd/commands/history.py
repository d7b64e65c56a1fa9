"""``staticpodctl history``, ``show`` and ``diff``: read the recorded versions; change nothing."""

from __future__ import annotations

import argparse
import sys
import time

from ..errors import EXIT_FAILURE, EXIT_OK, StaticpodError, UsageError
from ..termsafe import note_names, one_line, shell_word
from .loading import build_engine
from .output import Out

#: Versions ``history`` shows by default (newest first cut): its cost must not grow with the store.
HISTORY_DEFAULT = 100


def cmd_history(args: argparse.Namespace, out: Out) -> int:
    """List the recorded versions of a component, newest last (at most -n of them); exit 0."""
    eng = build_engine(args, verbs="read")
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
        current, loc = eng.current_digest(comp)
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
            reason = one_line(v.reason or "")  # stored before reasons were checked, or by hand
            out.say(f"{mark} {v.seq:>4}  {when:<20} {v.action:<9} {actor:<18} {v.digest[:12]:<12}  {reason}")
        if current is not None and versions[-1].digest != current:
            if loc == "parked":  # no file is live: the kubelet runs nothing from it
                out.say(f"  the parked copy ({current[:12]}) differs from the newest version: changed while parked, "
                        "not recorded yet")
            else:
                out.say(f"  the current file ({current[:12]}) differs from the newest version: drift, not recorded "
                        "yet")
        if total > len(versions):
            out.say(f"  ({total - len(versions)} older version(s) not shown: staticpodctl history {shell_word(comp)} "
                    "--all, or -n N)")
    if out.json:
        out.finish(True, component=comp, current_digest=current, total_versions=total,
                   truncated=total > len(versions), versions=[v.to_dict() for v in versions])
    return EXIT_OK


def cmd_show(args: argparse.Namespace, out: Out) -> int:
    """Print a version's bytes (COMPONENT@N) or the current file's, byte-exact; exit 0."""
    eng = build_engine(args, verbs="read")
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
    """Print the unified diff between two versions (or the newest and the current file); exit 1
    with --exit-code when they differ."""
    eng = build_engine(args, verbs="read")
    text = eng.diff(args.component, args.a, args.b)
    if out.json:
        out.finish(True, component=args.component, a=args.a, b=args.b, diff={"text": text}, same=not text)
    else:
        sys.stdout.write(text)
    return EXIT_FAILURE if args.exit_code and text else EXIT_OK
