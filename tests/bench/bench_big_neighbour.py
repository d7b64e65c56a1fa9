#!/usr/bin/env python3
"""Benchmark: what one big valid pod in the manifest directory costs an unrelated verb, and the
daemon's memory after an edit of it (not a test; prints ratios).

Two roots with kubeadm's four control-plane manifests (../shared/corpus, or small generated
Pods), one of them also holding ``big.yaml``, a valid pod of ``--size`` bytes (default 9.5 MB,
10,000s of env entries). On each root, as real staticpodctl processes, applies of a changed
kube-scheduler, each process's CPU time and peak RSS (GNU time), in three phases:

- the first apply meets big.yaml unrecorded: it reads and records it (9.5 MB into the store);
- ``--runs`` applies while big.yaml is fresh (written under 2 s ago: git's "racy" rule, its stat
  signature is not trusted yet, so each scan reads and hashes it);
- ``--runs`` applies once it has settled. Target: median ratios (with/without) <= 1.5, time and RSS.

Then starts the real daemon on each root, waits for its first heartbeat; on the big root appends
a comment to big.yaml (an edit), waits until the edit is recorded and the daemon is idle, and
prints its VmRSS and VmHWM (peak). Target: both <= 2x the daemon's on the root without big.yaml.
Last, ``doctor`` on each root after the daemon's pass. Target: ratios <= 1.5.

Usage: .venv/bin/python tests/bench/bench_big_neighbour.py [--size 9500000] [--runs 5]
Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from spd_testlib import (  # noqa: E402
    KUBEADM,
    big_pod,  # noqa: E402
    corpus_dir,
    small_pod,
)


def make_root(base: Path, big: int | None) -> Path:
    root = base / ("big" if big else "plain")
    m = root / "etc/kubernetes/manifests"
    m.mkdir(parents=True)
    corpus = corpus_dir()
    for name, src in KUBEADM.items():
        data = (corpus / "manifests" / src).read_bytes() if corpus else small_pod(name[:-5]).encode()
        (m / name).write_bytes(data)
        os.chmod(m / name, 0o600)
    if big:
        (m / "big.yaml").write_bytes(big_pod(big))
        os.chmod(m / "big.yaml", 0o600)
    return root


def env() -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(REPO), STATICPODD_NO_JOURNAL="1")
    return e


def timed_any(*args: str) -> tuple[float, float]:
    """:func:`timed` for a verb whose exit status tells what it found (doctor: 1 = problems)."""
    return timed(*args, ok=(0, 1))


def timed(*args: str, ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of one staticpodctl process, as GNU time measures it (a small
    parent: a child forked from this process would count this process's pages in its peak). CPU
    time (user + system), not wall time: the ratios must not follow the load of a shared machine."""
    p = subprocess.run(["/usr/bin/time", "-f", "BENCH %U %S %M", sys.executable, "-m", "staticpodd.cli", *args],
                       env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode not in ok:
        raise SystemExit(f"staticpodctl {' '.join(args)} failed: {p.stderr}")
    user, system, peak = p.stderr.strip().splitlines()[-1].split()[1:]
    return float(user) + float(system), int(peak) / 1024


def apply_once(root: Path, tmp: Path, n: int) -> tuple[float, float]:
    src = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    new = tmp / f"sched-{root.name}-{n}.yaml"
    new.write_bytes(src.read_bytes() + f"# change {n}\n".encode())
    return timed("apply", str(new), "--as", "kube-scheduler", "--reason", "bench", "--root", str(root))


def rss(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def versions(root: Path, component: str) -> int:
    p = subprocess.run([sys.executable, "-m", "staticpodd.cli", "history", component, "--json", "--root", str(root)],
                       env=env(), capture_output=True, text=True)
    return len(json.loads(p.stdout).get("versions", [])) if p.returncode == 0 else 0


def idle(pid: int, quiet: float = 3.0, limit: float = 300) -> None:
    """Wait until process ``pid`` has used no CPU for ``quiet`` seconds (its work is done)."""
    def cpu() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime (clock ticks)

    end = time.monotonic() + limit
    last, since = cpu(), time.monotonic()
    while time.monotonic() < end and time.monotonic() - since < quiet:
        time.sleep(0.5)
        now = cpu()
        if now != last:
            last, since = now, time.monotonic()


def daemon_rss(root: Path, edit: Path | None) -> tuple[float, float]:
    hb = root / "run/staticpodd/daemon.json"
    d = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(root)], env=env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not hb.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if edit is not None:
            before = versions(root, "big")
            with open(edit, "ab") as fh:
                fh.write(b"# edited\n")
            t = time.monotonic()
            while versions(root, "big") <= before and time.monotonic() < deadline:
                time.sleep(0.5)
            print(f"daemon: the edit of big.yaml recorded after {time.monotonic() - t:.1f} s")
        idle(d.pid)  # validation of the edit, the directory findings, the quiet-time trim
        return rss(d.pid)
    finally:
        d.terminate()
        d.wait(timeout=60)


def apply_ratios(plain: Path, big: Path, tmp: Path, first: int, runs: int) -> tuple[float, float]:
    """Median (time ratio, peak RSS ratio) of ``runs`` applies on each root, printing each."""
    times, mems = [], []
    for i in range(first, first + runs):
        tp, mp = apply_once(plain, tmp, i)
        tb, mb = apply_once(big, tmp, i)
        times.append(tb / tp)
        mems.append(mb / mp)
        print(f"  apply {i:3d}  without {tp:5.2f} s CPU {mp:5.1f} MB   with {tb:5.2f} s CPU {mb:5.1f} MB   "
              f"ratio {tb / tp:4.2f} time, {mb / mp:4.2f} RSS")
    return statistics.median(times), statistics.median(mems)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=9_500_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-big-") as t:
        tmp = Path(t)
        plain, big = make_root(tmp, None), make_root(tmp, args.size)
        print(f"big.yaml: {args.size} bytes")
        print("first apply (meets big.yaml unrecorded: reads and records it):")
        apply_ratios(plain, big, tmp, 0, 1)
        print("applies while big.yaml is fresh (written < 2 s ago: its stat is not trusted, it is read and hashed):")
        ft, fm = apply_ratios(plain, big, tmp, 1, args.runs)
        print(f"  median ratio {ft:4.2f} time, {fm:4.2f} RSS")
        time.sleep(2.5)  # past the racy window: the next scan stores big.yaml's stat signature
        apply_once(plain, tmp, 100)
        apply_once(big, tmp, 100)
        print("applies once big.yaml has settled (target: median ratios <= 1.5):")
        st, sm = apply_ratios(plain, big, tmp, 101, args.runs)
        print(f"  median ratio {st:4.2f} time, {sm:4.2f} RSS")
        ok = st <= 1.5 and sm <= 1.5
        r_plain, hwm_plain = daemon_rss(plain, None)
        r_big, hwm_big = daemon_rss(big, big / "etc/kubernetes/manifests/big.yaml")
        print(f"daemon without big.yaml: RSS {r_plain:6.1f} MB (peak {hwm_plain:6.1f} MB); with it, after one edit: "
              f"RSS {r_big:6.1f} MB (peak {hwm_big:6.1f} MB); ratios {r_big / r_plain:4.2f} RSS, "
              f"{hwm_big / hwm_plain:4.2f} peak (target: both <= 2)")
        if r_big > 2 * r_plain or hwm_big > 2 * hwm_plain:
            ok = False
        # doctor after the daemon's pass: the daemon's kept directory findings, not a new decode
        dp, mp = timed_any("doctor", "--root", str(plain))
        db, mb = timed_any("doctor", "--root", str(big))
        print(f"doctor after the daemon's pass: without {dp:5.2f} s CPU {mp:5.1f} MB   with {db:5.2f} s CPU "
              f"{mb:5.1f} MB   ratio {db / max(dp, 0.01):4.2f} time, {mb / mp:4.2f} RSS (target: both <= 1.5)")
        if db / max(dp, 0.01) > 1.5 or mb / mp > 1.5:
            ok = False
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
