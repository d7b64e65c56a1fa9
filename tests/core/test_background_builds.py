"""The test command's background builds (tests/e2e/background_builds.py): a tier waiting for a
Go fixture gets its directory, or a failure that carries the build's log, never a hang."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
import background_builds  # noqa: E402
from background_builds import BuildFailed, resolve  # noqa: E402


@pytest.fixture
def running_builder(tmp_path: Path) -> Iterator[Path]:
    """STATE with builder.pid naming a live process (killed after the test)."""
    proc = subprocess.Popen(["sleep", "60"])
    (tmp_path / "builder.pid").write_text(str(proc.pid))
    yield tmp_path
    proc.kill()
    proc.wait()


def test_a_plain_directory_is_itself(tmp_path: Path) -> None:
    assert resolve(str(tmp_path)) == tmp_path


def test_a_build_that_finishes_later_is_waited_for(running_builder: Path) -> None:
    tmp_path = running_builder
    threading.Timer(0.5, lambda: (tmp_path / "cp.dir").write_text("/cache/bin/kube\n")).start()
    t0 = time.monotonic()
    assert resolve(f"wait:{tmp_path}/cp", poll=0.05) == Path("/cache/bin/kube")
    assert time.monotonic() - t0 >= 0.4


def test_a_failed_build_says_so_with_its_log(tmp_path: Path) -> None:
    (tmp_path / "cp.failed").write_text("exit 1\n")
    (tmp_path / "cp.log").write_text("go: k8s.io/kubernetes@v1.37.2: proxy refused\n")
    with pytest.raises(BuildFailed, match=r"(?s)cp failed \(exit 1\).*proxy refused"):
        resolve(f"wait:{tmp_path}/cp")


def test_a_builder_that_died_without_a_result_ends_the_wait(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / "builder.pid").write_text(str(dead.pid))
    with pytest.raises(BuildFailed, match="stopped without a result for kube2"):
        resolve(f"wait:{tmp_path}/kube2", poll=0.01)


def test_a_build_that_outlasts_the_timeout_ends_the_wait(running_builder: Path) -> None:
    with pytest.raises(BuildFailed, match="has not finished after 0 s"):
        background_builds.resolve(f"wait:{running_builder}/cp", timeout=0.1, poll=0.02)
