"""Cost that follows the change: the daemon's periodic full rescan of an unchanged directory parses no YAML and runs
no validation (the directory's findings are cached by a fingerprint of names, stats and the
recorded sha256 digests); any change (new bytes, a chmod, a new file) is still validated.

The real daemon process runs under tests/daemon/count_parses.py, which counts every YAML parse,
JSON manifest decode and validation call (nothing else is stood in for)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_harness import REPO, make_root, sha, wait_until

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent


def _calls(path: Path, after: float) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines() if float(line.split()[1]) > after]


def _rescans(root: Path) -> float | None:
    try:
        return json.loads((root / "run/staticpodd/daemon.json").read_text()).get("last_rescan")
    except (OSError, ValueError):
        return None


def _next_rescan(root: Path, after: float) -> float:
    return wait_until(lambda: (r := _rescans(root)) is not None and r > after and r, 20, 0.05,
                      what="the next full rescan")


def test_a_full_rescan_of_an_unchanged_directory_parses_and_validates_nothing(tmp_path) -> None:
    root = make_root(tmp_path, config="rescan_interval: 1\n")
    mdir = root / "etc/kubernetes/manifests"
    for i in range(20):
        (mdir / f"extra-{i:02d}.yaml").write_text(
            f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: extra-{i:02d}\n  namespace: default\n"
            "spec:\n  containers:\n  - name: c\n    image: nginx:1.27\n")
        os.chmod(mdir / f"extra-{i:02d}.yaml", 0o600)
    counts = tmp_path / "parses.txt"
    env = dict(os.environ, STATICPODD_COUNT_PARSES=str(counts), PYTHONPATH=str(REPO))
    env.pop("NOTIFY_SOCKET", None)
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(HERE / "count_parses.py"), "--root", str(root)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO))
    try:
        first = _next_rescan(root, 0)
        second = _next_rescan(root, first)
        # from here on nothing changes: the next three full rescans must not parse or validate
        third = _next_rescan(root, second)
        fifth = _next_rescan(root, _next_rescan(root, third))
        assert fifth > third
        assert _calls(counts, second) == [], (tmp_path / "stderr").read_text()
        assert len(_calls(counts, 0)) > 0  # the counter works: start-up adopted and validated
        # a change is still seen and judged: new bytes in one file
        t = time.time()
        (mdir / "extra-03.yaml").write_text(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: extra-03\n  namespace: default\n"
            "spec:\n  containers:\n  - name: c\n    image: nginx:1.28\n")
        _next_rescan(root, _next_rescan(root, t))
        assert "validate-directory" in _calls(counts, t)
        # and a chmod alone (the findings include loose modes)
        t = time.time()
        os.chmod(mdir / "extra-04.yaml", 0o666)
        _next_rescan(root, _next_rescan(root, t))
        assert "validate-directory" in _calls(counts, t)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0, (tmp_path / "stderr").read_text()


def test_a_periodic_rescan_of_a_quiet_node_reads_nothing_and_a_change_is_still_seen(tmp_path) -> None:
    """Once a full pass found nothing to do, the next periodic ones (nothing moved: same stats,
    no commit to the store) make no scan at all; the heartbeat still says when each one ran."""
    root = make_root(tmp_path, config="rescan_interval: 1\n")
    mdir = root / "etc/kubernetes/manifests"
    counts, scans = tmp_path / "parses.txt", tmp_path / "scans.txt"
    time.sleep(2.1)  # git's racy rule: a stat younger than 2 s is not trusted (a second write in its tick)
    env = dict(os.environ, STATICPODD_COUNT_PARSES=str(counts), STATICPODD_COUNT_SCANS=str(scans),
               PYTHONPATH=str(REPO))
    env.pop("NOTIFY_SOCKET", None)
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(HERE / "count_parses.py"), "--root", str(root)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO))
    try:
        second = _next_rescan(root, _next_rescan(root, 0))
        fifth = _next_rescan(root, _next_rescan(root, _next_rescan(root, second)))
        assert fifth > second
        assert _calls(scans, second) == [], (tmp_path / "stderr").read_text()
        assert _calls(scans, 0)  # the counter works: start-up scanned
        # new bytes: seen (inotify hint) and recorded; the passes after it scan again
        t = time.time()
        data = (mdir / "kube-scheduler.yaml").read_bytes() + b"# edited\n"
        (mdir / "kube-scheduler.yaml").write_bytes(data)
        _next_rescan(root, _next_rescan(root, t))
        assert _calls(scans, t)
        heads = subprocess.run([sys.executable, "-m", "staticpodd.cli", "history", "kube-scheduler", "--json",
                                "--root", str(root)], env=env, capture_output=True, check=True, cwd=str(REPO))
        assert sha(data) in heads.stdout.decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0, (tmp_path / "stderr").read_text()


def test_an_edit_to_one_of_thirty_files_validates_that_file_not_the_directory(tmp_path) -> None:
    """The pass after an edit judges the whole directory again (duplicates, host ports, node fit
    across files), but takes every unchanged file's own findings from the last pass: its cost
    follows the change, not the node."""
    root = make_root(tmp_path, config="rescan_interval: 1\n")
    mdir = root / "etc/kubernetes/manifests"
    for i in range(30):
        (mdir / f"extra-{i:02d}.yaml").write_text(
            f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: extra-{i:02d}\n  namespace: default\n"
            "spec:\n  containers:\n  - name: c\n    image: nginx:1.27\n")
        os.chmod(mdir / f"extra-{i:02d}.yaml", 0o600)
    counts = tmp_path / "parses.txt"
    env = dict(os.environ, STATICPODD_COUNT_PARSES=str(counts), PYTHONPATH=str(REPO))
    env.pop("NOTIFY_SOCKET", None)
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(HERE / "count_parses.py"), "--root", str(root)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, cwd=str(REPO))
    try:
        settled = _next_rescan(root, _next_rescan(root, 0))
        assert _calls(counts, 0).count("validate") >= 30  # the counter works: the first pass judged every file
        t = time.time()
        (mdir / "extra-03.yaml").write_text(  # a second pod claiming extra-07's name: a duplicate
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: extra-07\n  namespace: default\n"
            "spec:\n  containers:\n  - name: c\n    image: nginx:1.28\n")
        _next_rescan(root, _next_rescan(root, max(t, settled)))
        calls = _calls(counts, t)
        assert "validate-directory" in calls  # the directory was judged again ...
        assert calls.count("validate") <= 2, calls  # ... from one file's new bytes (and its gate), not 31
        problems = json.loads((root / "run/staticpodd/daemon.json").read_text())["problems"]
        assert any(p.get("code") == "duplicate-pod" and p.get("path", "").endswith("extra-03.yaml") for p in problems), \
            problems
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0, (tmp_path / "stderr").read_text()
