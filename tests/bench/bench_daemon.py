#!/usr/bin/env python3
"""Benchmark staticpodd: change-to-recorded latency, idle CPU, memory (not a test; prints ratios).

Runs the real daemon as a subprocess on a temporary --root holding kubeadm's four control-plane
manifests (../shared/corpus, or generated Pods when the corpus is absent), then:

1. latency: writes a new version of one manifest at a time (as `cat >` would) and takes the
   recorded version's ``created_at`` from the store minus the moment the write finished; the
   debounce is subtracted, so the figure is what the daemon itself adds.
   Target: p99 <= debounce + 100 ms.
2. idle CPU: utime+stime of the daemon over ``--idle-seconds`` (default 60) with nothing
   happening, plus its context switches per second (a busy loop shows as thousands).
3. memory: VmRSS and VmHWM (peak) of the daemon. Target: RSS <= 40 MB.

Usage: .venv/bin/python tests/bench/bench_daemon.py [--iterations 200] [--idle-seconds 60]
       [--debounce 0.3]
Exit status 0 when every target is met, 1 otherwise.
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
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from staticpodd.store.versions import VersionStore, digest_of  # noqa: E402

KUBEADM = {
    "kube-apiserver.yaml": "01-zetaoss-kubeadm-kube-apiserver.yaml",
    "kube-controller-manager.yaml": "02-zetaoss-kubeadm-kube-controller-manager.yaml",
    "kube-scheduler.yaml": "03-zetaoss-kubeadm-kube-scheduler.yaml",
    "etcd.yaml": "04-zetaoss-kubeadm-etcd.yaml",
}
POD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\n"
    "spec:\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n"
)
RSS_TARGET_MB = 40.0
LATENCY_TARGET_MS = 100.0


def populate(root: Path) -> Path:
    mdir = root / "etc/kubernetes/manifests"
    mdir.mkdir(parents=True)
    os.chmod(mdir, 0o700)
    corpus = Path(os.environ.get("STATICPODD_CORPUS", REPO / ".." / "shared" / "corpus")) / "manifests"
    for name, src in KUBEADM.items():
        if (corpus / src).is_file():
            shutil.copyfile(corpus / src, mdir / name)
        else:
            (mdir / name).write_text(POD.format(name=name.removesuffix(".yaml")))
        os.chmod(mdir / name, 0o600)
    return mdir


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def ctx_switches(pid: int) -> int:
    st = proc_status(pid)
    return int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])


def percentile(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100 * (len(s) - 1)))))
    return s[k]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=200, help="changes to time (default 200)")
    ap.add_argument("--idle-seconds", type=float, default=60.0, help="idle window for CPU (default 60)")
    ap.add_argument("--debounce", type=float, default=0.3, help="daemon debounce in seconds (default 0.3)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="staticpodd-bench-"))
    root = tmp / "root"
    mdir = populate(root)
    (root / "etc/staticpodd").mkdir(parents=True)
    (root / "etc/staticpodd/staticpodd.yaml").write_text(f"debounce: {args.debounce}\n")
    name = f"staticpodd-bench-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(60)
    env = {**os.environ, "NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "30000000"}
    t_start = time.monotonic()
    err = open(tmp / "staticpodd.stderr", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "staticpodd.daemon", "--root", str(root)],
        env=env,
        cwd=str(REPO),
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    ok = True
    try:
        while b"READY=1" not in sock.recv(65536):
            pass
        startup = time.monotonic() - t_start

        def drain() -> None:  # read sd_notify messages as systemd would (a full queue blocks the sender)
            while True:
                try:
                    sock.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return

        threading.Thread(target=drain, daemon=True).start()
        store = VersionStore(root / "var/lib/staticpodd/versions.sqlite3")
        names = sorted(KUBEADM)
        originals = {n: (mdir / n).read_bytes() for n in names}
        beyond: list[float] = []
        for i in range(args.iterations):
            fn = names[i % len(names)]
            comp = fn.removesuffix(".yaml")
            data = originals[fn] + f"# bench change {i}\n".encode()
            with open(mdir / fn, "wb") as f:
                f.write(data)
            t_written = time.time()
            want = digest_of(data)
            deadline = time.monotonic() + 30
            while True:
                head = store.head(comp)
                if head is not None and head.digest == want:
                    break
                if time.monotonic() > deadline:
                    print(f"change {i} to {fn} not recorded within 30 s; daemon stderr:", file=sys.stderr)
                    print((tmp / "staticpodd.stderr").read_text(errors="replace")[-3000:], file=sys.stderr)
                    return 1
                time.sleep(0.005)
            beyond.append((head.created_at - t_written - args.debounce) * 1000)
        p50, p99 = statistics.median(beyond), percentile(beyond, 99)
        lat_ok = p99 <= LATENCY_TARGET_MS
        ok &= lat_ok

        time.sleep(1.0)
        cpu0, cs0, t0 = cpu_seconds(proc.pid), ctx_switches(proc.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        cpu1, cs1, t1 = cpu_seconds(proc.pid), ctx_switches(proc.pid), time.monotonic()
        idle_pct = (cpu1 - cpu0) / (t1 - t0) * 100
        wakeups = (cs1 - cs0) / (t1 - t0)
        st = proc_status(proc.pid)
        rss_mb = int(st["VmRSS"].split()[0]) / 1024
        hwm_mb = int(st["VmHWM"].split()[0]) / 1024
        rss_ok = rss_mb <= RSS_TARGET_MB
        ok &= rss_ok
        idle_ok = idle_pct < 1.0 and wakeups < 50
        ok &= idle_ok

        print(
            f"staticpodd benchmark ({args.iterations} changes, debounce {args.debounce:g} s, "
            f"{len(names)} manifests, {os.cpu_count()} CPUs)"
        )
        print(f"  start-up to READY=1          {startup * 1000:8.0f} ms")
        print(f"  latency beyond debounce  p50 {p50:8.1f} ms")
        print(
            f"                           p99 {p99:8.1f} ms   target <= {LATENCY_TARGET_MS:.0f} ms   "
            f"ratio {p99 / LATENCY_TARGET_MS:.2f}  {'OK' if lat_ok else 'MISSED'}"
        )
        print(f"                           max {max(beyond):8.1f} ms")
        print(
            f"  idle CPU over {t1 - t0:.0f} s          {idle_pct:8.3f} %    "
            f"({wakeups:.1f} context switches/s; target: no busy loop)  {'OK' if idle_ok else 'MISSED'}"
        )
        print(
            f"  RSS                          {rss_mb:8.1f} MB   target <= {RSS_TARGET_MB:.0f} MB    "
            f"ratio {rss_mb / RSS_TARGET_MB:.2f}  {'OK' if rss_ok else 'MISSED'}"
        )
        print(f"  peak RSS (VmHWM)             {hwm_mb:8.1f} MB")
        store.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        sock.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
