#!/usr/bin/env python3
"""Whole-process wall time of the fast staticpodctl verbs, as a ratio to a bare interpreter.

The target: park, unpark, status and history each take <= 4x the time of
``python -I -c pass`` on the same machine. These machines are noisy, so the script prints
ratios of medians over many runs, never absolute times as a pass/fail. Run it with the
project's interpreter:

    .venv/bin/python tests/bench/bench_cli.py [--runs 30] [--corpus ../shared/corpus]

It builds a sandbox --root with kubeadm's four manifests (from the corpus when present, else a
small built-in pair) and runs each verb as a real process (as the console script does), alternating
park and unpark so each run does real work (renames, fsyncs, SQLite commits).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = 4.0


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="staticpodd-bench."))
    mdir = root / "etc/kubernetes/manifests"
    mdir.mkdir(parents=True)
    corpus = Path(args.corpus) / "manifests"
    if corpus.is_dir():
        for dst, src in (
            ("kube-apiserver.yaml", "01-zetaoss-kubeadm-kube-apiserver.yaml"),
            ("kube-controller-manager.yaml", "02-zetaoss-kubeadm-kube-controller-manager.yaml"),
            ("kube-scheduler.yaml", "03-zetaoss-kubeadm-kube-scheduler.yaml"),
            ("etcd.yaml", "04-zetaoss-kubeadm-etcd.yaml"),
        ):
            shutil.copy(corpus / src, mdir / dst)
    else:
        (mdir / "kube-scheduler.yaml").write_text(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-scheduler\n  namespace: kube-system\n"
            "spec:\n  containers:\n  - name: s\n    image: registry.k8s.io/kube-scheduler:v1.34.2\n"
        )
    env = dict(os.environ, PYTHONPATH=str(REPO), STATICPODD_NO_JOURNAL="0")
    # An installed package has its bytecode compiled (dh_python3, pip); measure that, not a
    # recompile of every module on every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "staticpodd")], env=env, check=True)
    # what the installed console script runs (``-m`` would recompile cli.py as __main__ every time)
    ctl = [sys.executable, "-c", "import sys; from staticpodd.cli import main; sys.exit(main())"]
    base = [sys.executable, "-I", "-c", "pass"]
    # warm the page cache and adopt the directory once
    subprocess.run([*ctl, "status", "--root", str(root)], env=env, stdout=subprocess.DEVNULL, check=True)
    subprocess.run(
        [*ctl, "park", "kube-scheduler", "--root", str(root)], env=env, stdout=subprocess.DEVNULL, check=True
    )
    subprocess.run(
        [*ctl, "unpark", "kube-scheduler", "--root", str(root)], env=env, stdout=subprocess.DEVNULL, check=True
    )
    samples: dict[str, list[float]] = {k: [] for k in ("python -I -c pass", "park", "unpark", "status", "history")}
    for _ in range(args.runs):
        samples["python -I -c pass"].append(timed(base, env))
        samples["park"].append(timed([*ctl, "park", "kube-scheduler", "--root", str(root)], env))
        samples["unpark"].append(timed([*ctl, "unpark", "kube-scheduler", "--root", str(root)], env))
        samples["status"].append(timed([*ctl, "status", "--root", str(root)], env))
        samples["history"].append(timed([*ctl, "history", "kube-scheduler", "--root", str(root)], env))
    shutil.rmtree(root, ignore_errors=True)
    b = statistics.median(samples["python -I -c pass"])
    print(f"{'command':<20} {'median ms':>10} {'ratio':>7}  (target <= {TARGET:g}x python -I -c pass)")
    worst = 0.0
    for k, v in samples.items():
        m = statistics.median(v)
        ratio = m / b
        if k != "python -I -c pass":
            worst = max(worst, ratio)
        print(f"{k:<20} {m * 1000:>10.1f} {ratio:>6.2f}x")
    print(f"worst ratio {worst:.2f}x: {'OK' if worst <= TARGET else 'OVER TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
