#!/usr/bin/env python3
"""``on_invalid: restore`` latency of the daemon alone: no kubelet, a sandbox root (not a test).

The figure tests/bench/bench_e2e.py ``--restore-only`` takes against a real kubelet, without the
lab (seconds to set up instead of minutes, and no kubelet or containerd competing for the CPU): a
temporary ``--root`` with kubeadm's four control-plane manifests (../shared/corpus, or generated
Pods when it is absent) and the real daemon as a subprocess under ``on_invalid: restore``. Each
round writes bytes the kubelet refuses over ``kube-scheduler.yaml`` in place (``open(O_TRUNC)``,
one ``write``, ``close``, as ``cat bad > f`` does) and polls the file's inode until the restore's
rename replaces it:

- close -> restored, p50/p99/max (the daemon's own part of the window);
- open -> restored (the window in which a kubelet relist reads the bad bytes: docs/kubelet-contract.md "What a
  broken file does to a running pod");
- the daemon's CPU time (user + system) per write, from READY=1 to its stop: all it does for
  one restore, before and after the rename (what a busy machine has to find time for);
- the first write after each READY apart (``--daemons N`` restarts the daemon N times), and
  each start's time to READY=1 (the first on a fresh store adopts the directory; the others
  start on an unchanged one).

``--profile DIR`` runs the daemon under cProfile (one ``.prof`` per daemon, for ``pstats``; the
figures are then slower than without it). Never a pass/fail:

    .venv/bin/python tests/bench/bench_restore.py [--restores 300] [--daemons 15] [--profile DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from bench_daemon import populate  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def _start(root: Path, tmp: Path, profile: Path | None, n: int) -> tuple[subprocess.Popen[bytes], socket.socket, float]:
    """The daemon on ``root``, once it said READY=1, and the seconds that took."""
    name = f"staticpodd-bench-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(60)
    env = {**os.environ, "NOTIFY_SOCKET": "@" + name}
    env.pop("WATCHDOG_USEC", None)
    run = ["-m", "staticpodd.daemon"]
    if profile is not None:
        run = ["-m", "cProfile", "-o", str(profile / f"daemon-{n}.prof"), "-m", "staticpodd.daemon"]
    err = open(tmp / f"staticpodd-{n}.stderr", "wb")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, *run, "--root", str(root)], env=env, cwd=str(REPO),
                            stdout=subprocess.DEVNULL, stderr=err)
    while b"READY=1" not in sock.recv(65536):
        pass
    took = time.monotonic() - t0
    sock.setblocking(False)
    return proc, sock, took


def _cpu(pid: int) -> float:
    """utime + stime of process ``pid`` in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(proc: subprocess.Popen[bytes], sock: socket.socket) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    sock.close()


def _drain(sock: socket.socket) -> None:
    """Read the daemon's sd_notify messages, as systemd would (a full queue blocks the sender)."""
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--restores", type=int, default=300)
    ap.add_argument("--daemons", type=int, default=15,
                    help="start the daemon this many times, --restores/N writes each (first restores after READY)")
    ap.add_argument("--gap", type=float, default=0.05, help="seconds between a restore and the next write")
    ap.add_argument("--profile", type=Path, help="run each daemon under cProfile, writing DIR/daemon-N.prof")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="staticpodd-bench-restore-"))
    root = tmp / "root"
    mdir = populate(root)
    (root / "etc/staticpodd").mkdir(parents=True)
    (root / "etc/staticpodd/staticpodd.yaml").write_text("on_invalid: restore\ndebounce: 1.0\n")
    if a.profile is not None:
        a.profile.mkdir(parents=True, exist_ok=True)
    live = mdir / "kube-scheduler.yaml"
    good = live.read_bytes()
    bad = good.replace(b"\n  name: kube-scheduler\n", b"\n\tname: kube-scheduler\n", 1)
    assert bad != good, "the manifest has no '  name: kube-scheduler' line to break"
    lat: list[float] = []
    win: list[float] = []
    first: list[float] = []
    ready: list[float] = []
    cpu = 0.0
    try:
        for n in range(max(1, a.daemons)):
            proc, sock, took = _start(root, tmp, a.profile, n)
            ready.append(took)
            cpu0 = _cpu(proc.pid)
            try:
                for i in range(max(1, a.restores // max(1, a.daemons))):
                    ino = os.stat(live).st_ino
                    t_open = time.monotonic()
                    with open(live, "wb") as fh:
                        fh.write(bad)
                    t0 = time.monotonic()
                    deadline = t0 + 30
                    while os.stat(live).st_ino == ino:
                        if time.monotonic() > deadline:
                            print((tmp / f"staticpodd-{n}.stderr").read_text(errors="replace")[-3000:],
                                  file=sys.stderr)
                            raise SystemExit("not restored within 30 s")
                        time.sleep(0.0002)
                    t1 = time.monotonic()
                    (first if i == 0 else lat).append(t1 - t0)
                    win.append(t1 - t_open)
                    _drain(sock)
                    time.sleep(a.gap)
                cpu += _cpu(proc.pid) - cpu0
            finally:
                _stop(proc, sock)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ms = 1000
    print(f"staticpodd restore, no kubelet ({os.cpu_count()} CPUs, {len(lat)} writes, {len(first)} daemons)")
    if lat:
        print(f"  close -> restored: p50 {_pct(lat, 0.5) * ms:.1f} ms, p99 {_pct(lat, 0.99) * ms:.1f} ms, "
              f"max {max(lat) * ms:.1f} ms")
    print(f"  open -> restored:  p50 {_pct(win, 0.5) * ms:.1f} ms, p99 {_pct(win, 0.99) * ms:.1f} ms, "
          f"mean {statistics.fmean(win) * ms:.1f} ms")
    print(f"  daemon CPU per write (user + system): {cpu / max(1, len(win)) * ms:.1f} ms")
    print(f"  first write after READY: median {statistics.median(first) * ms:.1f} ms, "
          f"max {max(first) * ms:.1f} ms ({', '.join(f'{x * ms:.1f}' for x in sorted(first))})")
    again = ready[1:] or ready
    print(f"  start to READY=1: {ready[0] * ms:.0f} ms adopting, then median {statistics.median(again) * ms:.0f} ms "
          f"(max {max(again) * ms:.0f} ms) on the unchanged directory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
