"""Benchmark (not a test): how soon after the runtime changes does a wait notice?

Runs the stand-in crictl (proof_fakes.py) with a timeline in which the pod stops at 0.5 s, and
prints for several poll intervals the detection delay as a ratio of the poll interval (1.0 means
"noticed one full interval late"; the delay also includes two crictl runs per look), plus the
cost of one look. Usage: .venv/bin/python tests/proof/bench_proof.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proof_fakes import FAKE_CRICTL, container, sandbox  # noqa: E402

from staticpodd.proof import Crictl, Prover  # noqa: E402


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-proof-"))
    exe = tmp / "crictl"
    exe.write_text(FAKE_CRICTL.replace("__PYTHON__", sys.executable))
    exe.chmod(0o755)
    os.environ["FAKE_CRICTL_STATE"] = str(tmp / "state.json")
    os.environ["FAKE_CRICTL_LOG"] = str(tmp / "log")
    sb = sandbox("s1", "kube-scheduler-cp-1", "kube-system", "h")
    running = {"at": 0, "sandboxes": [sb], "containers": [container("c1", sb, "kube-scheduler")]}
    stopped = {"at": 0.5, "sandboxes": [dict(sb, state="SANDBOX_NOTREADY")], "containers": []}
    p = Prover(Crictl(str(exe)), node_name="cp-1")
    looks = []
    for _ in range(10):
        (tmp / "state.json").write_text(json.dumps({"t0": time.time(), "phases": [running]}))
        t = time.monotonic()
        p.observe("kube-scheduler-cp-1", "kube-system")
        looks.append(time.monotonic() - t)
    look = statistics.median(looks)
    print(f"one look (crictl pods + ps, stand-in): {look * 1000:.0f} ms")
    for interval in (0.1, 0.25, 0.5):
        delays = []
        for _ in range(3):
            p = Prover(Crictl(str(exe)), node_name="cp-1", poll_interval=interval)
            t0 = time.time()
            (tmp / "state.json").write_text(json.dumps({"t0": t0, "phases": [running, stopped]}))
            out = p.wait_stopped("kube-scheduler-cp-1", "kube-system", timeout=5)
            assert out.ok, out.message
            delays.append(time.time() - (t0 + 0.5))
        d = statistics.median(delays)
        print(f"poll {interval:.2f}s: noticed {d * 1000:.0f} ms after the stop = {d / interval:.2f} x interval")


if __name__ == "__main__":
    main()
