#!/usr/bin/env python3
"""What publishing the cluster view costs a verb, printed as a ratio in one run.

Not a test: these machines are noisy, so each figure is the median of ``--runs`` park+unpark pairs
and the goal is a ratio of two figures taken side by side, alternated. Both nodes run the real
daemon on a sandbox --root; one has ``cluster.publish: true`` and talks to the stand-in API server
(tests/fake_apiserver.py: plain HTTP on 127.0.0.1, so this measures staticpodd's own cost: the
queue, waking the daemon, the daemon's two API calls and the verb's wait for them, not a real
API server's latency, which tests/controlplane/test_cp_cluster_view.py prints for kube-apiserver).

Rows:
1. park + unpark of kube-scheduler with publishing vs without (the verb waits for "published").
   Goal: <= 1.2x.
2. The same with the API server answering 503 (each verb says "queued"). Goal: <= 1.2x.

Usage: .venv/bin/python tests/bench/bench_cluster.py [--runs 15]
Exit status 0 when every goal is met, 1 otherwise (a report, not a gate).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests"))
from fake_apiserver import FakeApiServer  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus" / "manifests"
GOAL = 1.2


def node(base: Path, name: str, config: str | None) -> Path:
    root = base / name
    m = root / "etc/kubernetes/manifests"
    m.mkdir(parents=True)
    src = CORPUS / "03-zetaoss-kubeadm-kube-scheduler.yaml"
    (m / "kube-scheduler.yaml").write_bytes(src.read_bytes())
    os.chmod(m / "kube-scheduler.yaml", 0o600)
    if config:
        (root / "etc/staticpodd").mkdir(parents=True)
        (root / "etc/staticpodd/staticpodd.yaml").write_text(config)
    return root


def start_daemon(root: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, STATICPODD_NO_JOURNAL="1", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(root)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while not (root / "run/staticpodd/daemon.json").exists():
        if time.monotonic() > end:
            raise SystemExit(f"bench: the daemon on {root} did not start")
        time.sleep(0.05)
    time.sleep(1.0)
    return proc


def pair(root: Path) -> float:
    env = dict(os.environ, STATICPODD_NO_JOURNAL="1", PYTHONPATH=str(REPO))
    t0 = time.perf_counter()
    for verb in ("park", "unpark"):
        subprocess.run([sys.executable, "-m", "staticpodd.cli", verb, "kube-scheduler", "--root", str(root)],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    api = FakeApiServer(nodes=("bench",)).start()
    base = Path(tempfile.mkdtemp(prefix="spdb-", dir="/tmp"))  # short: the daemon's socket path
    daemons = []
    ok = True
    try:
        plain = node(base, "a", None)
        published = node(base, "b", "node_name: bench\ncluster:\n  publish: true\n")
        api.kubeconfig(published / "etc/kubernetes/kubelet.conf", user="system:node:bench")
        daemons = [start_daemon(plain), start_daemon(published)]
        for label, down in (("API server answers", False), ("API server answers 503", True)):
            api.down = down
            pair(plain), pair(published)  # warm
            a, b = [], []
            for _ in range(args.runs):
                a.append(pair(plain))
                b.append(pair(published))
            ma, mb = statistics.median(a), statistics.median(b)
            ratio = mb / ma
            ok &= ratio <= GOAL
            print(f"{label:<24} park+unpark without {ma * 1000:7.1f} ms  with publishing {mb * 1000:7.1f} ms  "
                  f"ratio {ratio:4.2f}x  (goal <= {GOAL}x) {'ok' if ratio <= GOAL else 'MISSED'}")
        print(f"Events the stand-in API server received: {len(api.events)}")
    finally:
        for d in daemons:
            d.send_signal(signal.SIGTERM)
            d.wait(20)
        api.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
