#!/usr/bin/env python3
"""park/unpark --wait against a plain ``mv``, on a real kubelet 1.34 + containerd.

In one run, on one lab (tests/e2e/kubelet-lab), with kubeadm's kube-scheduler manifest:

- ``mv kube-scheduler.yaml ..`` -> container stopped (runtime polled every 20 ms), and
  ``mv`` back -> container running and the kubelet's Ready condition (read-only port /pods);
- ``staticpodctl park --wait`` -> the command returns (and when the runtime showed it stopped),
  ``staticpodctl unpark --wait`` -> the command returns;
- ``staticpodctl apply --wait`` of a changed manifest -> returns (new pod ready, after the
  kubelet's 10-15 s back-off on a UID change);
- ``on_invalid: restore``: writer's close -> good bytes back, over many writes (p50/p99), and
  the window the kubelet could read bad bytes in (the writer's ``open(O_TRUNC)`` -> good bytes
  back): a relist that lands in it drops the pod (docs/kubelet-contract.md "What a broken file does to a
  running pod"), so the chance that one write costs a restart is the mean window over
  fileCheckFrequency, and over 10 writes (tests/e2e/test_e2e_restore.py) ten times that.
  The first restore after the daemon's READY is shown apart (it pays for the start-up's tail).

Prints medians and the differences to the ``mv`` figures; the goal: park --wait and
unpark --wait within 0.3 s of them; restore within 50 ms of the close (p99). Never a pass/fail:

    .venv/bin/python tests/bench/bench_e2e.py [--rounds 3] [--restores 200] [--restore-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
sys.path.insert(0, str(HERE.parent / "daemon"))

from e2e_lib import Node, scheduler_bytes  # noqa: E402
from kubelet_lab import down, up  # noqa: E402


def _poll(cond, timeout: float = 120, interval: float = 0.02) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"timed out after {timeout} s")
        time.sleep(interval)
    return time.monotonic() - t0


def _running(node: Node) -> bool:
    name = node.lab.pod_name("kube-scheduler")
    return any(c["state"] == "CONTAINER_RUNNING" and c["labels"].get("io.kubernetes.pod.name") == name
               for c in node.lab.containers())


def _ctl(node: Node, *args: str) -> float:
    exe = Path(sys.executable).parent / "staticpodctl"
    t0 = time.monotonic()
    r = subprocess.run([str(exe), *args, "--root", str(node.root)], capture_output=True, text=True, check=False)
    took = time.monotonic() - t0
    if os.environ.get("BENCH_E2E_VERBOSE"):
        print(f"--- staticpodctl {' '.join(args)}: {took:.2f} s\n{r.stderr}", file=sys.stderr)
    if r.returncode != 0:
        raise SystemExit(f"staticpodctl {' '.join(args)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--restores", type=int, default=200)
    ap.add_argument("--file-check-frequency", default="20s")
    ap.add_argument("--restore-only", action="store_true", help="only the restore latency (no park/unpark rounds)")
    ap.add_argument("--daemons", type=int, default=1,
                    help="restart the daemon this many times, --restores/N writes each (first restores after READY)")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-e2e.")) / "root"
    (root / "etc/kubernetes/manifests").mkdir(parents=True)
    lab = up(root / "etc/kubernetes/manifests", file_check_frequency=a.file_check_frequency)
    node = Node(lab, root)
    try:
        node.clean()
        live = node.write("kube-scheduler.yaml", scheduler_bytes())
        node.wait_running("kube-scheduler", 60)
        node.ctl("status", check=True)
        if not a.restore_only:
            _park_rounds(node, root, live, a.rounds)
        _restores(node, live, a.restores, max(1, a.daemons), lab.relist_seconds)
    finally:
        node.clean()
        down(lab, keep=bool(os.environ.get("STATICPODD_E2E_KEEP")))
    return 0


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def _restores(node: Node, live: Path, n: int, daemons: int, relist: float) -> None:
    """``on_invalid: restore`` over ``n`` in-place bad writes, the daemon restarted ``daemons``
    times: close -> restored and open -> restored (the window), p50/p99/max, the first write
    after each READY apart, and the chance that a relist lands in a window."""
    good = live.read_bytes()
    bad = good.replace(b"\n  name: kube-scheduler\n", b"\n\tname: kube-scheduler\n", 1)
    lat: list[float] = []
    win: list[float] = []
    first: list[float] = []
    for _ in range(daemons):
        d = node.start_daemon("on_invalid: restore\ndebounce: 1.0\n")
        for i in range(max(1, n // daemons)):
            ino = os.stat(live).st_ino
            t_open = time.monotonic()
            with open(live, "wb") as fh:
                fh.write(bad)
            t0 = time.monotonic()
            while os.stat(live).st_ino == ino:
                time.sleep(0.0002)
            t1 = time.monotonic()
            (first if i == 0 else lat).append(t1 - t0)
            win.append(t1 - t_open)
            time.sleep(0.05)
        d.stop()
        node.daemons.clear()
    ms = 1000
    if lat:
        print(f"on_invalid: restore, close -> restored over {len(lat)} writes: p50 {_pct(lat, 0.5) * ms:.1f} ms, "
              f"p99 {_pct(lat, 0.99) * ms:.1f} ms, max {max(lat) * ms:.1f} ms (goal p99 <= 50 ms)")
    print(f"  the first write after READY ({len(first)} daemons): "
          f"{', '.join(f'{x * ms:.1f}' for x in sorted(first))} ms")
    mean = statistics.fmean(win)
    p_write = mean / relist
    print(f"  window open -> restored: p50 {_pct(win, 0.5) * ms:.1f} ms, p99 {_pct(win, 0.99) * ms:.1f} ms, "
          f"mean {mean * ms:.1f} ms; at a {relist:g} s relist a write loses its pod with p = {p_write:.4f}, "
          f"a run of 10 writes with p = {1 - (1 - p_write) ** 10:.3f}")


def _park_rounds(node: Node, root: Path, live: Path, rounds: int) -> None:
    """park/unpark --wait against mv, and apply --wait (printed)."""
    aside = root / "etc/kubernetes/kube-scheduler.yaml"
    mv_stop, mv_run, mv_ready, park, unpark = [], [], [], [], []
    def mv_cycle() -> None:
        node.wait(lambda: node.kubelet_ready("kube-scheduler"), 120, "ready")
        t0 = time.monotonic()
        os.rename(live, aside)
        _poll(lambda: not _running(node))
        mv_stop.append(time.monotonic() - t0)
        time.sleep(2)
        t0 = time.monotonic()
        os.rename(aside, live)
        _poll(lambda: _running(node))
        mv_run.append(time.monotonic() - t0)
        _poll(lambda: node.kubelet_ready("kube-scheduler"), interval=0.05)
        mv_ready.append(time.monotonic() - t0)

    def ctl_cycle() -> None:
        node.wait(lambda: node.kubelet_ready("kube-scheduler"), 120, "ready")
        park.append(_ctl(node, "park", "kube-scheduler", "--wait=60s"))
        time.sleep(2)
        unpark.append(_ctl(node, "unpark", "kube-scheduler", "--wait=180s"))

    # The kubelet keeps a container restart back-off per pod UID that grows with every
    # restart of the same pod (see the README): alternate which goes first so that both
    # meet it alike, and read the per-round figures, not only the medians.
    for r in range(rounds):
        for cycle in ((mv_cycle, ctl_cycle) if r % 2 == 0 else (ctl_cycle, mv_cycle)):
            cycle()
    med = statistics.median
    print(f"mv away -> container stopped     median {med(mv_stop):6.2f} s  {[round(x, 2) for x in mv_stop]}")
    print(f"park --wait (whole command)      median {med(park):6.2f} s  {[round(x, 2) for x in park]}  "
          f"diff {med(park) - med(mv_stop):+.2f} s (goal <= +0.30)")
    print(f"mv back -> container running     median {med(mv_run):6.2f} s")
    print(f"mv back -> kubelet Ready         median {med(mv_ready):6.2f} s  {[round(x, 2) for x in mv_ready]}")
    print(f"unpark --wait (whole command)    median {med(unpark):6.2f} s  {[round(x, 2) for x in unpark]}  "
          f"diff {med(unpark) - med(mv_ready):+.2f} s vs Ready (goal <= +0.30)")
    src = root / "kube-scheduler.yaml"
    src.write_bytes(scheduler_bytes(extra_args=("--v=2",)))
    print(f"apply --wait (new config.hash)   {_ctl(node, 'apply', str(src), '--wait=120s'):6.2f} s "
          "(includes the kubelet's 10-15 s back-off on a UID change)")
    node.wait_running("kube-scheduler", 120)


if __name__ == "__main__":
    sys.exit(main())
