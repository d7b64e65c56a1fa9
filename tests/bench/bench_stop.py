#!/usr/bin/env python3
"""How long staticpodd takes to exit after SIGTERM (``systemctl stop``), not a test.

The real daemon as a subprocess on a sandbox ``--root`` of N generated manifests, started as
systemd starts it (a notify socket read continuously, ``WATCHDOG_USEC`` of the unit's 30 s),
left idle for ``--settle`` seconds after READY=1 (past its first prune and memory trim), then
sent SIGTERM. Every figure is the time from the signal to the process's exit (``waitpid``).

What it prints, for each count of manifests (``--counts``, default 4 and 200), the median and
the max over ``--runs`` runs of:

1. ``idle``: a stop of a daemon with nothing to do;
2. ``edit``: a stop 10 ms (``--edit-gap``) after a hand edit of one manifest (written and
   closed, as ``cat > f`` does), and how many of these edits the stopping daemon recorded
   (``staticpodctl history COMPONENT --json`` right after the exit, before any other start: the
   newest version's digest is the file's).

``--against OTHER_TREE`` runs that checkout's daemon in the same run, alternated run by run with
this one's, and prints this/that ratios. ``--watchdog DIR`` puts another watchdog first on the
daemon's path (``pip install --target DIR watchdog==2.1.6``: Ubuntu 22.04's), to see a stop
with a watchdog whose observer has no stop sentinel.

    .venv/bin/python tests/bench/bench_stop.py [--runs 7] [--counts 4 200] [--against ../main]
        [--watchdog DIR]
"""

from __future__ import annotations

import argparse
import json
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
POD = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\n"
    "spec:\n  containers:\n  - name: {name}\n    image: registry.k8s.io/pause:3.10\n"
)


def make_root(tmp: Path, tree: Path, count: int) -> Path:
    """A --root with ``count`` manifests (``kube-scheduler`` and ``extra-NNNN``)."""
    root = tmp / f"root-{count}-{uuid.uuid4().hex[:8]}"
    mdir = root / "etc/kubernetes/manifests"
    mdir.mkdir(parents=True)
    os.chmod(mdir, 0o700)
    for i in range(count):
        name = "kube-scheduler" if i == 0 else f"extra-{i:04d}"
        (mdir / f"{name}.yaml").write_text(POD.format(name=name))
        os.chmod(mdir / f"{name}.yaml", 0o600)
    return root


def env_for(tree: Path, watchdog: Path | None) -> dict[str, str]:
    """The environment that runs ``tree``'s staticpodd (and ``watchdog`` first, when given)."""
    path = str(tree) + (f":{watchdog}" if watchdog is not None else "")
    return dict(os.environ, PYTHONPATH=path)


def stop_once(root: Path, tree: Path, watchdog: Path | None, settle: float, edit_gap: float | None,
              serial: int) -> tuple[float, bool | None]:
    """Start the daemon, wait for READY=1 and ``settle`` s, (edit kube-scheduler.yaml and wait
    ``edit_gap`` s,) send SIGTERM: (seconds to its exit, whether the edit was recorded)."""
    name = f"staticpodd-bench-stop-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(120)
    e = {**env_for(tree, watchdog), "NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "30000000"}
    e.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(root)], env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(tree))
    try:
        while b"READY=1" not in sock.recv(65536).split(b"\n"):
            pass

        def drain() -> None:  # as systemd does: a full queue would block the daemon's sd_notify
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                return

        threading.Thread(target=drain, daemon=True).start()
        time.sleep(settle)
        live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
        new = None
        if edit_gap is not None:
            new = POD.format(name="kube-scheduler") + f"# hand edit {serial}\n"
            with open(live, "w") as fh:
                fh.write(new)
            time.sleep(edit_gap)
        guard = threading.Timer(60, proc.kill)  # a stop that hangs: killed, and shows as 60 s
        guard.start()
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.wait()  # a blocking waitpid: Popen.wait(timeout) polls with sleeps of up to 50 ms
        took = time.perf_counter() - t0
        guard.cancel()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        sock.close()
    recorded = None
    if new is not None:
        out = subprocess.run([sys.executable, "-m", "staticpodd.cli", "history", "kube-scheduler", "--json", "--root",
                              str(root)], env=env_for(tree, watchdog), capture_output=True, text=True, cwd=str(tree))
        data = json.loads(out.stdout)
        import hashlib

        recorded = data["versions"][-1]["digest"] == hashlib.sha256(new.encode()).hexdigest()
    return took, recorded


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--counts", type=int, nargs="+", default=[4, 200])
    ap.add_argument("--settle", type=float, default=1.5, help="seconds idle after READY=1 before the stop")
    ap.add_argument("--edit-gap", type=float, default=0.01, help="seconds between the edit and SIGTERM")
    ap.add_argument("--against", type=Path, help="another checkout whose daemon runs alternately")
    ap.add_argument("--watchdog", type=Path, help="a directory holding another watchdog, first on the path")
    a = ap.parse_args()
    trees = [REPO] + ([a.against.resolve()] if a.against is not None else [])
    tmp = Path(tempfile.mkdtemp(prefix="staticpodd-bench-stop-"))
    wd = a.watchdog.resolve() if a.watchdog is not None else None
    version = subprocess.run([sys.executable, "-c", "import watchdog.version as v; print(v.VERSION_STRING)"],
                             env=env_for(REPO, wd), capture_output=True, text=True).stdout.strip()
    print(f"SIGTERM -> exit, seconds (median / max of {a.runs}; watchdog {version}; idle {a.settle:g} s after "
          f"READY; edit {a.edit_gap * 1000:g} ms before the signal)")
    try:
        for count in a.counts:
            roots = {t: make_root(tmp, t, count) for t in trees}
            for scenario in ("idle", "edit"):
                took: dict[Path, list[float]] = {t: [] for t in trees}
                recorded: dict[Path, int] = {t: 0 for t in trees}
                for i in range(a.runs):
                    for t in trees if i % 2 == 0 else trees[::-1]:
                        s, rec = stop_once(roots[t], t, wd, a.settle, a.edit_gap if scenario == "edit" else None, i)
                        took[t].append(s)
                        recorded[t] += bool(rec)
                for t in trees:
                    med, mx = statistics.median(took[t]), max(took[t])
                    label = "this" if t == REPO else "against"
                    rec = f"  edit recorded by the stopping daemon {recorded[t]}/{a.runs}" if scenario == "edit" else ""
                    print(f"  {count:5d} manifests  {scenario:<4}  {label:<7}  median {med:6.3f}  max {mx:6.3f}{rec}")
                if len(trees) == 2:
                    this, that = (statistics.median(took[t]) for t in trees)
                    print(f"  {count:5d} manifests  {scenario:<4}  this/against median {this / that:5.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
