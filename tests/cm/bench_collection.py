"""What a staticpodd.node module costs per task over the raw staticpodctl call it wraps.

    .venv/bin/python tests/cm/bench_collection.py [--tasks 20]

Builds and installs the collection, makes one sandbox node with kubeadm's kube-scheduler, and
times (wall clock, one ansible-playbook run each, local connection) a play of N tasks of:

- ``ansible.builtin.command: staticpodctl status --json`` (the hand-written way),
- ``staticpodd.node.staticpod_info doctor=false`` (status, plus staticpodctl --version),
- ``staticpodd.node.staticpod_manifest`` with unchanged bytes (status-free: one apply --json),
- ``staticpodd.node.staticpod_park state=unparked`` on a live component (one status).

Prints ms per task and the ratio to the command task. Ansible's own per-task cost (forking, module
transfer) dominates both; the ratio shows what the module adds on top (no target: a report).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from collection_harness import (  # noqa: E402
    VENV_BIN,
    ansible_bin,
    build_collection,
    corpus_dir_or_exit,
    install_collection,
    make_fleet,
    scheduler_manifest,
)

TASKS = {
    "command: staticpodctl status --json": {
        "ansible.builtin.command": {"argv": [str(VENV_BIN / "staticpodctl"), "status", "--json", "--root",
                                             "{{ staticpodd_root }}"]},
        "changed_when": False,
    },
    "staticpod_info doctor=false": {"staticpodd.node.staticpod_info": {"root": "{{ staticpodd_root }}",
                                                                       "doctor": False}},
    "staticpod_manifest (unchanged)": {"staticpodd.node.staticpod_manifest": {
        "name": "kube-scheduler", "src": "{{ seed }}", "root": "{{ staticpodd_root }}"}},
    "staticpod_park state=unparked (live)": {"staticpodd.node.staticpod_park": {
        "name": "kube-scheduler", "state": "unparked", "root": "{{ staticpodd_root }}"}},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20, help="tasks per play (default 20)")
    opts = ap.parse_args()
    bindir = ansible_bin()
    corpus = corpus_dir_or_exit()
    with tempfile.TemporaryDirectory(prefix="bench-collection-") as tmp_s:
        tmp = Path(tmp_s)
        tarball = build_collection(bindir, tmp / "dist")
        collections = install_collection(bindir, tarball, tmp / "collections")
        fleet = make_fleet(tmp, bindir, collections, ["cp-1"])
        node = fleet.nodes[0]
        seed = tmp / "seed.yaml"
        seed.write_text(scheduler_manifest(corpus))
        node.ctl("apply", str(seed), "--as", "kube-scheduler", check=True)
        results = {}
        for label, task in TASKS.items():
            play = [{"hosts": "cp-1", "gather_facts": False, "vars": {"seed": str(seed)},
                     "tasks": [dict(task, name=f"t{i}") for i in range(opts.tasks)]}]
            path = tmp / "play.yml"
            path.write_text(json.dumps(play))
            fleet.playbook(str(path))  # warm the caches once
            started = time.perf_counter()
            run = fleet.playbook(str(path))
            elapsed = time.perf_counter() - started
            bad = [t for t in run.out["tasks"] if t["status"] not in ("ok", "changed")]
            if run.rc != 0 or bad:
                print(f"{label}: failed: {bad[:1]}", file=sys.stderr)
                return 1
            results[label] = elapsed / opts.tasks * 1000
        base = results["command: staticpodctl status --json"]
        print(f"{'task':<40} {'ms/task':>8} {'ratio':>6}")
        for label, ms in results.items():
            print(f"{label:<40} {ms:8.0f} {ms / base:6.2f}")
        raw = []
        for _ in range(10):
            t0 = time.perf_counter()
            subprocess.run([str(VENV_BIN / "staticpodctl"), "--version"], capture_output=True, check=True)
            raw.append(time.perf_counter() - t0)
        print(f"{'(staticpodctl --version alone)':<40} {min(raw) * 1000:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
