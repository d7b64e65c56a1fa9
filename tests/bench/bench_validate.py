#!/usr/bin/env python3
"""Benchmark: validator throughput on the 24 corpus manifests vs kubernetes-validate, same run.

Not a test (no timing assertions): prints manifests/second for
  - staticpodd.validate.validate_bytes (all layers: reading, identity, schema, static-pod
    rules, likely mistakes, node fit), and
  - kubernetes-validate (PyYAML safe_load + kubernetes_validate.validate, schema only),
and the ratio (target >= 10x). Also prints how many corpus files each flags, so "same or
better findings" can be checked by eye.

    .venv/bin/python tests/bench/bench_validate.py [--seconds 3] [--version 1.34]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def corpus_files() -> list[Path]:
    env = os.environ.get("STATICPODD_CORPUS")
    base = Path(env) if env else REPO.parent / "shared" / "corpus"
    files = sorted((base / "manifests").glob("*"))
    if not files:
        raise SystemExit(f"corpus not found under {base} (set STATICPODD_CORPUS)")
    return files


def rate(fn, datas: list[tuple[str, bytes]], seconds: float) -> float:
    """Manifests per second of ``fn(name, data)`` over the corpus, repeated for ``seconds``."""
    for name, data in datas:  # warm-up: schema load, imports
        fn(name, data)
    n = 0
    start = time.perf_counter()
    while True:
        for name, data in datas:
            fn(name, data)
        n += len(datas)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--version", default="1.34", help="Kubernetes minor for both validators")
    args = ap.parse_args(argv)

    from staticpodd.validate import Options, has_errors, validate_bytes

    datas = [(p.name, p.read_bytes()) for p in corpus_files()]
    opts = Options(
        kubernetes_version=args.version,
        node_name="cp-1",
        check_host=False,
        cpu_capacity_millis=4000,
        memory_capacity_bytes=8 << 30,
    )

    def ours(name: str, data: bytes):
        return validate_bytes(data, name, opts)

    ours_rate = rate(ours, datas, args.seconds)
    ours_flagged = sum(1 for n, d in datas if ours(n, d))
    ours_errors = sum(1 for n, d in datas if has_errors(ours(n, d)))
    print(
        f"staticpodd.validate      {ours_rate:10.1f} manifests/s  "
        f"(findings on {ours_flagged}/24 files, errors on {ours_errors})"
    )

    try:
        import kubernetes_validate
        import yaml
    except ImportError:
        print("kubernetes-validate      not installed (.venv/bin/pip install kubernetes-validate): no ratio")
        return 0

    def theirs(name: str, data: bytes):
        doc = yaml.safe_load(data)
        try:
            kubernetes_validate.validate(doc, args.version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return exc
        return None

    their_rate = rate(theirs, datas, args.seconds)
    their_flagged = sum(1 for n, d in datas if theirs(n, d) is not None)
    print(f"kubernetes-validate      {their_rate:10.1f} manifests/s  (strict: flags {their_flagged}/24 files)")
    print(f"ratio                    {ours_rate / their_rate:10.1f}x  (target >= 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
