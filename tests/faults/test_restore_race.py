"""``on_invalid: restore`` never reverts a valid write that came after the invalid one.

A fault seen before: a valid write 0.2–0.35 s after an invalid one was recorded and then reverted
5 ms later to the last good version (7 times in 120): the daemon's restore acted on bytes it had
judged earlier. Now the daemon passes the digest it judged invalid, and the engine restores only
while the live file still holds exactly those bytes (compared again right before the rename).

A real staticpodd process (real inotify, SQLite, journald) on a tmp_path --root; the writes are
in-place rewrites (open O_TRUNC, write, close), as an editor or ``cat >`` makes them.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from daemon_harness import Daemon, NotifySocket, make_root, wait_until
from faultlib import recorded, sha

PAIRS = 120


def test_120_invalid_then_valid_pairs_never_revert_the_valid_write(tmp_path: Path) -> None:
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    good = live.read_bytes()
    notify = NotifySocket()
    d = Daemon(root, notify)
    try:
        d.wait_ready()
        rng = random.Random(112)
        reverts: list[tuple[int, float]] = []
        for i in range(PAIRS):
            gap = rng.uniform(0.0, 0.4)
            invalid = b"kind: Pod\nmetadata: {}\n# broken write %d\n" % i
            valid = good + b"# fixed by hand %d\n" % i
            live.write_bytes(invalid)
            time.sleep(gap)
            live.write_bytes(valid)
            # settle: the valid write is recorded, then give a late restore time to strike
            wait_until(lambda v=valid: sha(v) in {sha(r[4]) for r in recorded(root, "kube-scheduler")},
                       timeout=20, what=f"pair {i}: the valid write recorded")
            time.sleep(0.35)
            if live.read_bytes() != valid:
                reverts.append((i, round(gap, 3)))
                live.write_bytes(valid)  # so that the next pair starts from a valid file
                wait_until(lambda v=valid: live.read_bytes() == v, timeout=5)
        assert d.proc.poll() is None, d.stderr
        assert not reverts, f"{len(reverts)} of {PAIRS} valid writes were reverted: {reverts}"
        versions = recorded(root, "kube-scheduler")
        # nothing lost: every valid write is a version, and every invalid one that stayed long
        # enough to be read is too (the daemon records it before it acts, or with its restore)
        digests = {sha(r[4]) for r in versions}
        assert all(sha(good + b"# fixed by hand %d\n" % i) in digests for i in range(PAIRS))
        restores = [r for r in versions if r[2] == "restore"]
        print(f"{PAIRS} pairs: 0 reverts; {len(restores)} restores of an invalid write that was still live")
        assert "Traceback" not in d.stderr
    finally:
        if d.proc.poll() is None:
            d.stop()
        notify.close()


def test_an_invalid_write_replaced_by_another_invalid_one_is_still_restored(tmp_path: Path) -> None:
    """The other side of the same check: when the write that landed after the judgement is
    invalid too, the restore skipped for it must not be forgotten: the next pass judges the new
    bytes and restores. 20 invalid-then-invalid pairs at 0–400 ms: every time the live file ends
    good, and both invalid writes are in history when they stayed long enough to be read."""
    root = make_root(tmp_path, "on_invalid: restore\ndebounce: 0.2\n")
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    good = live.read_bytes()
    notify = NotifySocket()
    d = Daemon(root, notify)
    try:
        d.wait_ready()
        rng = random.Random(113)
        for i in range(20):
            first = b"kind: Pod\nmetadata: {}\n# first broken write %d\n" % i
            second = b"kind: Pod\nmetadata: {}\n# second broken write %d\n" % i
            live.write_bytes(first)
            time.sleep(rng.uniform(0.0, 0.4))
            live.write_bytes(second)
            wait_until(lambda: live.read_bytes() == good, timeout=20, what=f"pair {i}: the last good version back")
            wait_until(lambda s=second: sha(s) in {sha(r[4]) for r in recorded(root, "kube-scheduler")}, timeout=5,
                       what=f"pair {i}: the second invalid write recorded")
        assert d.proc.poll() is None and "Traceback" not in d.stderr, d.stderr
    finally:
        if d.proc.poll() is None:
            d.stop()
        notify.close()
