"""``staticpodctl apply`` and ``rollback``: swap a new (or an earlier) manifest in through the gate."""

from __future__ import annotations

import argparse
import sys

from ..errors import EXIT_FAILURE, EXIT_OK, FsError, UsageError
from .changing import pre_wait, result_out, wait
from .loading import build_engine
from .output import Out


def read_source(path: str) -> bytes:
    """The bytes to apply, at most one byte past the kubelet's 10 MB read limit (``apply
    /dev/zero`` must not eat the node's memory): a longer input is refused by the gate as the
    kubelet refuses it, from what was read."""
    from ..node.fsops import KUBELET_MAX_BYTES

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
    """Validate, record and swap in a manifest (or --check/--diff it); exit 0, 2 changed under
    --detailed-exitcode, or the --wait status."""
    eng = build_engine(args)
    data = read_source(args.file)
    if args.file == "-" and not args.as_:
        raise UsageError("apply - (stdin) needs --as COMPONENT")
    dry = args.check or args.diff
    before = pre_wait(args, eng, "apply") if not dry else None
    res = eng.apply(data, source=args.file, component=args.as_, reason=args.reason, check=dry,
                    unpark=args.unpark, rename=args.rename)
    result_out(out, res, show_diff=args.diff or (args.check and not out.json), eng=eng)
    if res.check and res.changed:
        out.say("  (check mode: nothing was changed)")
    rc = EXIT_OK
    if not dry and res.changed:
        rc = wait(args, out, eng, "apply", res, before=before)
    out.finish(rc == EXIT_OK)
    if rc != EXIT_OK:
        return EXIT_FAILURE if args.detailed_exitcode else rc  # 2 would read as "changed"
    if args.detailed_exitcode and res.changed:
        return 2
    return EXIT_OK


def cmd_rollback(args: argparse.Namespace, out: Out) -> int:
    """Put an earlier version back (recorded as a new version), or --check it; exit 0 or the --wait status."""
    eng = build_engine(args)
    before = pre_wait(args, eng, "rollback") if not args.check else None
    res = eng.rollback(args.component, to=args.to, reason=args.reason, check=args.check,
                       rename=bool(getattr(args, "rename", False)))
    result_out(out, res, show_diff=args.check, eng=eng)
    rc = EXIT_OK
    if not args.check and res.changed:
        rc = wait(args, out, eng, "rollback", res, before=before)
    out.finish(rc == EXIT_OK)
    return rc
