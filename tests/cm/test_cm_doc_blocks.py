"""The command blocks of README.md and docs/ marked ``<!-- doc-test: node (tier: cm) -->``, run as
written with the ansible-core venv of this tier (``$STATICPODD_ANSIBLE_BIN``, else .venv-ansible).

Each block runs with bash (``set -euo pipefail``) in a working directory of its own that looks like
a clone (``packaging`` is a link to this checkout's), with that venv first on PATH and HOME a temp
directory (``ansible-galaxy collection install`` installs under ``~/.ansible/collections``, never
into the user's). Afterwards the collection must be installed, at the version galaxy.yml says.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml
from collection_harness import COLLECTION_SRC, REPO
from doc_blocks import blocks_for

TIER = "cm"
BLOCKS = blocks_for(TIER)


def test_the_tier_has_blocks_to_run() -> None:
    assert "config-management.md" in {b.page.name for b in BLOCKS}


def test_every_cm_block_runs_as_written(ansible_venv: Path, tmp_path: Path) -> None:
    work = tmp_path / "clone"
    work.mkdir()
    (work / "packaging").symlink_to(REPO / "packaging")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON"))}
    env.update(PATH=f"{ansible_venv}:{env.get('PATH', '/usr/bin:/bin')}", HOME=str(home), ANSIBLE_NOCOLOR="1")
    for block in BLOCKS:
        proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block.commands()], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (
            f"{block.where}: a documented command failed (exit {proc.returncode})\n--- block ---\n{block.text}\n"
            f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}")
    version = yaml.safe_load((COLLECTION_SRC / "galaxy.yml").read_text())["version"]
    listed = subprocess.run([str(ansible_venv / "ansible-galaxy"), "collection", "list", "staticpodd.node"],
                            env=env, capture_output=True, text=True, check=False)
    assert listed.returncode == 0 and f"staticpodd.node {version}" in " ".join(listed.stdout.split()), (
        listed.stdout + listed.stderr)
    assert (home / ".ansible" / "collections" / "ansible_collections" / "staticpodd" / "node").is_dir()
