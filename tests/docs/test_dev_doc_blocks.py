"""The command blocks of README.md and docs/ marked ``<!-- doc-test: node (tier: dev) -->``: a
development checkout's commands, run from this checkout, each line as :data:`LINES` says.

Every command line of a ``dev`` block must match exactly one entry of :data:`LINES` (a line that
matches none fails: a new line says how it is run):

- ``run``: run as written, from the checkout (``.ci/demo``, ruff and mypy);
- ``small``: run with the arguments added that make it short and still exercise it;
- ``bench``: a benchmark, run with one round and a handful of items: it must print its figures and
  end without a traceback; exit 1 (a goal missed, as it is at this size) passes;
- ``pip``: ``pip install './[cluster]'`` with the pip of a fresh venv. Stand-in: the package index
  (nothing is downloaded in a test): the venv sees this checkout's ``.venv`` site-packages (a
  ``.pth``) and pip runs with ``PIP_NO_INDEX`` and without build isolation (the venv is made as
  docs/tasks/install.md makes one: Debian's python3, ``--system-site-packages``, whose setuptools
  and wheel build the project), so the extra's requirement must be met by what is installed and
  the project must build from the clone;
- ``ci``: the whole suite or a whole tier, which cannot run inside a test: checked to be what CI
  runs (``.ci/run`` runs ``bash .ci/test``, which runs pytest over every tier, strict);
- ``help``: a benchmark that starts a real-kubelet lab of its own, run by hand: only ``--help``
  runs here (its script and options exist).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doc_blocks import Block, blocks_for
from spd_testlib import REPO

TIER = "dev"

#: (a regular expression matching a command line, how it runs, the arguments added for ``small``)
LINES: list[tuple[str, str, str]] = [
    (r"^bash \.ci/demo$", "run", ""),
    (r"^bash \.ci/test$", "ci", ""),
    (r"^\.venv/bin/ruff check staticpodd tests && \.venv/bin/mypy staticpodd$", "run", ""),
    (r"^\.venv/bin/python -m pytest tests/core -q$", "small", "-k test_import_graph"),
    (r"^(STATICPODD_TESTS_STRICT=1 )?\.venv/bin/python -m pytest tests/(e2e|node) -q$", "ci", ""),
    (r"^\.venv/bin/python tests/bench/bench_cli\.py$", "bench", "--runs 1"),
    (r"^\.venv/bin/python tests/bench/bench_daemon\.py --idle-seconds 60$", "bench",
     "--idle-seconds 1 --iterations 3"),
    (r"^\.venv/bin/python tests/bench/bench_validate\.py$", "bench", "--seconds 0.2"),
    (r"^\.venv/bin/python tests/bench/bench_scale\.py$", "bench",
     "--runs 1 --versions 20 --components 3 --skip-daemon"),
    (r"^\.venv/bin/python tests/bench/bench_restore\.py$", "bench", "--restores 3 --daemons 1"),
    (r"^\.venv/bin/python tests/bench/bench_stop\.py$", "bench", "--runs 1 --counts 4"),
    (r"^\.venv/bin/python tests/bench/bench_e2e\.py$", "help", "--help"),
    (r"^pip install '\./\[cluster\]'$", "pip", ""),
]

BLOCKS = blocks_for(TIER)
COMMANDS = [(b, line.split(" #", 1)[0].strip()) for b in BLOCKS for line in b.commands().splitlines()
            if line.split(" #", 1)[0].strip() and not line.strip().startswith("#")]


def _how(cmd: str) -> tuple[str, str]:
    hits = [(how, extra) for rx, how, extra in LINES if re.search(rx, cmd)]
    assert len(hits) == 1, f"{cmd!r}: matches {len(hits)} entries of LINES (exactly one says how it runs)"
    return hits[0]


def test_every_line_of_a_dev_block_says_how_it_runs() -> None:
    assert {"README.md", "development.md", "cluster.md"} <= {b.page.name for b in BLOCKS}
    for block, cmd in COMMANDS:
        assert not cmd.endswith("\\"), f"{block.where}: continued lines are not supported here"
        _how(cmd)
    for rx, _, _ in LINES:  # an entry no line matches is stale
        assert any(re.search(rx, cmd) for _, cmd in COMMANDS), rx


def test_what_ci_runs_is_the_whole_suite_strict() -> None:
    """The ``ci`` lines: CI's entry point runs the test command, which runs pytest over every tier
    with STATICPODD_TESTS_STRICT=1 (tests/e2e and tests/node among them)."""
    assert re.search(r"^bash \.ci/test\b", (REPO / ".ci/run").read_text(), re.M)
    test = (REPO / ".ci/test").read_text()
    assert "export STATICPODD_TESTS_STRICT=1" in test
    assert re.search(r'^\.venv/bin/python -m pytest "\$@"', test, re.M)
    testpaths = re.search(r"testpaths\s*=\s*\[([^]]*)\]", (REPO / "pyproject.toml").read_text())
    assert testpaths is None or '"tests"' in testpaths.group(1), "pytest's testpaths leave a tier out"


def _pip_venv(tmp: Path) -> Path:
    """A fresh venv as docs/tasks/install.md makes one (the system python3, --system-site-packages:
    Debian's setuptools and wheel build the project), seeing this checkout's .venv site-packages
    (the stand-in for the index: the kubernetes client the extra asks for)."""
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    env_dir = tmp / "venv"
    subprocess.run([python, "-m", "venv", "--system-site-packages", str(env_dir)], check=True, capture_output=True)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    ours = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "zz-staticpodd-dotvenv.pth").write_text(f"{ours}\n")
    return env_dir / "bin"


CASES = [(b, cmd) for b, cmd in COMMANDS if _how(cmd)[0] in ("run", "small", "bench", "pip", "help")]


@pytest.mark.parametrize(("block", "cmd"), CASES, ids=[f"{b.where}:{c.split()[-1]}" for b, c in CASES])
def test_a_dev_line_runs_from_the_checkout(block: Block, cmd: str, tmp_path: Path) -> None:
    how, extra = _how(cmd)
    env = dict(os.environ, HOME=str(tmp_path), PAGER="cat")
    env.pop("PYTHONPATH", None)
    script = f"{cmd} {extra}".strip()
    if how == "pip":
        bindir = _pip_venv(tmp_path)
        env.update(PATH=f"{bindir}:{env['PATH']}", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_NO_BUILD_ISOLATION="0")  # pip's inverted spelling: 0 turns build isolation off
        script += f" && {bindir}/python -c 'import kubernetes, staticpodd.cli'"
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, stdin=subprocess.DEVNULL)
    ok = proc.returncode == 0 or (how == "bench" and proc.returncode == 1 and proc.stdout.strip()
                                  and "Traceback" not in proc.stderr)
    assert ok, (
        f"{block.where}: a documented command failed (exit {proc.returncode}) from the checkout\n"
        f"--- as run ({how}) ---\n{script}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}")
    if how == "pip":  # installed into the fresh venv, not into .venv (whose staticpodd is editable)
        assert list((tmp_path / "venv" / "lib").glob("python3*/site-packages/staticpodd/cli.py")), proc.stdout
