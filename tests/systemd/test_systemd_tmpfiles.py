"""tmpfiles.d creates the directories staticpodctl shares with the daemon, with the Layout's paths.

Real tool: systemd-tmpfiles --root on a temporary root.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from systemd_files import TMPFILES

from staticpodd.layout import Layout


@pytest.mark.skipif(shutil.which("systemd-tmpfiles") is None, reason="systemd-tmpfiles not installed")
def test_tmpfiles_creates_run_and_state_directories(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    r = subprocess.run(
        ["systemd-tmpfiles", f"--root={root}", "--create", str(TMPFILES)], capture_output=True, text=True
    )
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    layout = Layout.build(root)
    assert stat.S_IMODE(layout.run_dir.stat().st_mode) == 0o755
    assert stat.S_IMODE(layout.state_dir.stat().st_mode) == 0o700
    # Nothing in the kubelet's directory: kubeadm's preflight wants it absent or empty.
    assert not (root / "etc/kubernetes").exists()
