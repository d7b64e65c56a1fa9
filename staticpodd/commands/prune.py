"""``staticpodctl prune``: delete old versions under the retention policy (strict about the config)."""

from __future__ import annotations

import argparse
import time

from ..errors import EXIT_OK, UsageError
from .loading import build_engine
from .output import Out


def cmd_prune(args: argparse.Namespace, out: Out) -> int:
    """Prune (or --dry-run) under retention.* or --keep/--keep-for; exit 0."""
    from ..store.retention import policy_for, prune

    eng = build_engine(args)
    keep_for = None
    if args.keep_for is not None:
        from ..engine import parse_duration

        keep_for = parse_duration(args.keep_for)
        if keep_for <= 0:  # as --keep 0: "younger than nothing" would prune all but the protected versions
            raise UsageError(f"--keep-for {args.keep_for}: keep versions for a duration longer than 0",
                             hint="to keep only the newest versions by count, use --keep N (at least 1)")
    if args.keep is not None and args.keep < 1:
        raise UsageError(f"--keep {args.keep}: keep at least 1 version", hint="the newest version is always kept")
    from ..config import load_config

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
        reach = ("" if c.retired else f"; rollback reaches version {c.rollback_to}" if c.rollback_to is not None
                 else "; nothing earlier to roll back to")
        out.say(f"{c.component}: {verb} {len(c.seqs)} version(s): {what}; kept {c.kept}{reach}")
    out.say(f"{verb} {res.versions} version(s); {res.blobs} blob(s), {res.bytes} bytes "
            + ("would be freed" if res.dry_run else "freed"))
    out.finish(True, **res.to_dict())
    return EXIT_OK
