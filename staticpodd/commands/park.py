"""``staticpodctl park`` and ``unpark``: take a component out of the kubelet's directory and back.

``--for``/``--until`` are read here into a deadline the daemon keeps; ``unpark --discard`` ends a
park without starting anything.
"""

from __future__ import annotations

import argparse
import time

from ..errors import EXIT_OK, UsageError
from ..termsafe import shell_word
from .changing import pre_wait, result_out, wait
from .loading import build_engine
from .output import PROG, Out

#: The longest deadline a park takes (10 years): longer is a typo (``--for 99999999d`` reached past
#: year 9999, which no timestamp can show); a park with no deadline at all lasts until unparked.
MAX_PARK_SECONDS = 3650 * 86400.0


def parse_until(args: argparse.Namespace) -> float | None:
    """The park's deadline as a Unix time from --for/--until, or None (no deadline). Raises
    UsageError for 0, the past, or over 10 years."""
    from ..engine import parse_duration

    if getattr(args, "for_", None) is not None:  # "" too: an unset $VAR must not mean "no deadline"
        seconds = parse_duration(args.for_)
        if seconds <= 0:
            raise UsageError(f"--for {args.for_}: the park must last longer than 0 s",
                             hint="e.g. --for 30m (a plain number means seconds)")
        if seconds > MAX_PARK_SECONDS:
            raise UsageError(f"--for {args.for_}: a park deadline is at most 10 years away",
                             hint="leave out --for/--until to park until you unpark")
        return time.time() + seconds
    if getattr(args, "until", None) is not None:
        from datetime import datetime, timezone

        text = args.until.strip().replace("Z", "+00:00").replace("z", "+00:00")
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise UsageError(f"cannot read time {args.until!r}", hint="use ISO 8601, e.g. 2030-01-31T06:00Z") from None
        if dt.tzinfo is None:  # the documented contract (README, the Ansible module): no zone is UTC
            dt = dt.replace(tzinfo=timezone.utc)
            args.until_naive = True
        ts = dt.timestamp()
        if ts <= time.time():
            raise UsageError(f"--until {args.until} is in the past")
        if ts > time.time() + MAX_PARK_SECONDS:
            raise UsageError(f"--until {args.until}: a park deadline is at most 10 years away",
                             hint="leave out --for/--until to park until you unpark")
        return ts
    return None


def cmd_park(args: argparse.Namespace, out: Out) -> int:
    """Park a component (optionally until a deadline the daemon keeps); exit 0, or the --wait status."""
    eng = build_engine(args)
    until = parse_until(args)
    before = pre_wait(args, eng, "park")
    res = eng.park(args.component, until=until, reason=args.reason, force=bool(getattr(args, "force", False)))
    result_out(out, res, eng=eng)
    if until is not None:
        from .health import heartbeat  # only here: a park with no deadline needs no daemon

        when = res.park.to_dict()["until"]
        if getattr(args, "until_naive", False) and time.localtime(until).tm_gmtoff != 0:
            local = time.strftime("%z", time.localtime(until))
            out.warn(f"{PROG}: warning: --until {args.until} has no time zone and was read as UTC ({when}); "
                     f"this machine's local time is UTC{local[:3]}:{local[3:]}: to mean local time, write "
                     f"{args.until}{local[:3]}:{local[3:]}")
        if heartbeat(eng.layout)["running"]:
            out.say(f"  until {when}: staticpodd unparks it then")
        else:
            out.warn(f"{PROG}: warning: staticpodd is not running: nothing unparks {res.component} at {when} "
                     "until it starts (it then unparks overdue parks at once)")
    if not res.extra.get("keeps_running_from"):  # else the headline already says where the pod runs from
        from ..proof.kubeletconfig import node_file_check_frequency

        relist = node_file_check_frequency(eng.layout.root)
        out.say(f"  the kubelet stops the pod within ~{relist:g} s (its fileCheckFrequency); undo with: "
                f"{PROG} unpark {shell_word(res.component)}")
    rc = wait(args, out, eng, "park", res, before=before)
    out.finish(rc == EXIT_OK)
    return rc


def cmd_unpark(args: argparse.Namespace, out: Out) -> int:
    """Unpark a component (or --discard its parked copy); exit 0, or the --wait status."""
    eng = build_engine(args)
    if args.discard:
        if getattr(args, "wait", None) is not None:
            raise UsageError("--discard starts nothing, so there is nothing to --wait for")
        res = eng.discard_park(args.component, reason=args.reason)
        result_out(out, res, eng=eng)
        out.finish(True)
        return EXIT_OK
    before = pre_wait(args, eng, "unpark")
    res = eng.unpark(args.component, reason=args.reason)
    result_out(out, res, eng=eng)
    rc = wait(args, out, eng, "unpark", res, before=before)
    out.finish(rc == EXIT_OK)
    return rc
