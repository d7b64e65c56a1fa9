#!/usr/bin/env python3
"""Benchmark: the two decode paths on the same bytes (a file starting with '{' is strict JSON).

Not a test (no timing assertions): prints seconds per decode and the ratio JSON path / YAML path
for a corpus-sized manifest and for a 2 MiB one (the kubelet runs files up to 10 MiB, so
staticpodd judges them whole). The YAML path gets the same bytes after a '# yaml' line. Target:
the JSON path is no slower than the YAML path (ratio <= 1.0).

    .venv/bin/python tests/bench/bench_decode_paths.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def per_call(fn, repeat: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    from staticpodd.manifest.decoded import KUBELET_MAX_BYTES
    from staticpodd.manifest.decoding import decode

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system", "labels": {"component": "kube-scheduler"}},
        "spec": {
            "hostNetwork": True,
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": "kube-scheduler",
                    "image": "registry.k8s.io/kube-scheduler:v1.34.2",
                    "command": ["kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true"],
                    "resources": {"requests": {"cpu": "100m"}},
                    "livenessProbe": {"httpGet": {"host": "127.0.0.1", "path": "/livez", "port": 10259}},
                }
            ],
        },
    }
    small = json.dumps(pod, indent=2).encode()
    big_doc = json.loads(small)
    big_doc["metadata"]["annotations"] = {f"note-{i}": "x" * 40 for i in range(38000)}
    big = json.dumps(big_doc, indent=2).encode()
    print(f"{'input':<10} {'bytes':>9} {'json path':>11} {'yaml path':>11} {'ratio':>6}")
    for label, data, repeat in (("manifest", small, args.repeat), ("2 MiB", big, max(args.repeat // 100, 2))):
        tj = per_call(lambda d=data: decode(d, max_bytes=KUBELET_MAX_BYTES), repeat)
        ty = per_call(lambda d=data: decode(b"# yaml\n" + d, max_bytes=KUBELET_MAX_BYTES), repeat)
        print(f"{label:<10} {len(data):>9} {tj * 1e3:>9.2f}ms {ty * 1e3:>9.2f}ms {tj / ty:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
