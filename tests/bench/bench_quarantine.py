#!/usr/bin/env python3
"""Cost of quarantining many strays at once (``on_stray: quarantine``): not a test, a figure.

A temporary ``--root`` with a few valid pods and N stray files (``notes-<i>.yaml.bak``); the
engine quarantines every stray, the way the daemon's executor does after one pass's plan. Prints
the time per stray and the total for one call per stray (the daemon's historic path) and, when
the engine has it, for ``quarantine_many`` (one lock, one scan, one transaction); then their
ratio. Never a pass/fail:

    .venv/bin/python tests/bench/bench_quarantine.py [--strays 1000] [--profile FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

POD = """apiVersion: v1
kind: Pod
metadata:
  name: pod-{i}
  namespace: kube-system
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.9
"""


def setup(root: Path, strays: int) -> list[str]:
    mdir = root / "etc/kubernetes/manifests"
    mdir.mkdir(parents=True)
    for i in range(4):
        (mdir / f"pod-{i}.yaml").write_text(POD.format(i=i))
    names = []
    for i in range(strays):
        name = f"notes-{i}.yaml.bak"
        (mdir / name).write_text(f"stray {i}\n")
        names.append(name)
    return names


def engine(root: Path):
    from staticpodd.engine import Engine
    from staticpodd.engine.model import Actor
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    eng = Engine(Layout.build(root), actor=Actor("bench", 0), journal=Journal("staticpodd-bench", str(root)))
    return eng


def one_by_one(root: Path, names: list[str]) -> float:
    eng = engine(root)
    start = time.perf_counter()
    for n in names:
        eng.quarantine(n, reason="bench")
    took = time.perf_counter() - start
    eng.close()
    return took


def batched(root: Path, names: list[str]) -> float | None:
    eng = engine(root)
    if not hasattr(eng, "quarantine_many"):
        return None
    start = time.perf_counter()
    eng.quarantine_many(names, reason="bench")
    took = time.perf_counter() - start
    eng.close()
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strays", type=int, default=1000)
    ap.add_argument("--profile", metavar="FILE", help="cProfile the one-by-one run into FILE")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp, "a"), Path(tmp, "b")
        names = setup(a, args.strays)
        setup(b, args.strays)
        if args.profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        slow = one_by_one(a, names)
        if args.profile:
            prof.disable()
            prof.dump_stats(args.profile)
        fast = batched(b, names)
    print(f"one call per stray: {slow:.2f} s for {args.strays} ({slow / args.strays * 1000:.1f} ms each)")
    if fast is None:
        print("quarantine_many: not in this engine")
    else:
        print(f"quarantine_many:    {fast:.2f} s for {args.strays} ({fast / args.strays * 1000:.1f} ms each)")
        print(f"ratio (one-by-one / batched): {slow / fast:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
