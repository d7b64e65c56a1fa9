"""journald gone mid-run: entries go to stderr, nothing blocks, nothing is lost.

The machine's journald is never touched: the driver (journald_gone_driver.py) runs in a private
mount namespace (``unshare --mount``) with tmpfs over journald's sockets and journal directories,
starts its own real systemd-journald there, starts staticpodd, and kills that journald with
SIGKILL mid-run (its socket file stays behind: every send is then refused). Asserted: the hand
edit made before and the one made after are both recorded (sha256 in the store) within seconds,
the daemon's entries after the kill are on its stderr, staticpodctl park completes and its entry
is on its stderr, the daemon keeps running and stops cleanly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_harness import make_root

DRIVER = Path(__file__).resolve().parent / "journald_gone_driver.py"


def test_journald_killed_mid_run_blocks_nothing_and_entries_go_to_stderr(tmp_path: Path) -> None:
    if shutil.which("unshare") is None or not Path("/lib/systemd/systemd-journald").exists():
        pytest.fail("unshare (util-linux) and systemd-journald (systemd) are needed")
    root = make_root(tmp_path, "debounce: 0.2\n")
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, str(DRIVER),
                          str(root), str(tmp_path)], capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout.strip().splitlines()[-1])
    assert r["private_journald_up"] and r["daemon_up"], r
    assert r["a_recorded_s"] is not None and r["a_in_journal"], r
    assert r["socket_left_behind"] and not r["journald_answers_after_kill"], r
    assert r["b_recorded_s"] is not None and r["b_recorded_s"] < 5, r  # nothing blocks
    assert r["park_rc"] == 0 and r["park_s"] < 10 and r["parked_sha_ok"], r
    assert "STATICPODD_EVENT=PARKED" in r["park_stderr"], r["park_stderr"]
    assert "EXTERNAL_CHANGE" in r["daemon_stderr"], r["daemon_stderr"]
    assert "Traceback" not in r["daemon_stderr"] + r["park_stderr"]
    assert r["daemon_alive"] and r["daemon_rc"] == 0, r
