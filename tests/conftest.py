"""Fixtures shared by every test area: the corpus, sandbox roots, running staticpodctl, journald.

A sandbox root is a directory laid out like a node (``<root>/etc/kubernetes/manifests`` …);
every staticpodctl/staticpodd call in the tests passes ``--root`` so nothing outside tmp_path is
touched. journald is real: entries are read back with ``journalctl -o json`` filtered by the
``STATICPODD_ROOT`` field, which is unique per test.
"""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from spd_testlib import KUBEADM, REPO, Run, Sandbox, corpus_dir, journald_alive, staticpodctl_cmd

STRICT = os.environ.get("STATICPODD_TESTS_STRICT") == "1"


# The tier of each test directory (markers registered in pyproject.toml): what a test there needs.
# ``fast`` runs in-process or with the CLI in a sandbox root: no Go, containerd, booted root or
# package build (``make check`` runs it). A file that needs more than its directory is listed
# in TIER_OF_FILE.
TIER_OF_DIR = {
    "core": "fast",
    "validate": "fast",
    "proof": "fast",
    "adversarial": "daemon",  # several files start a real daemon (symlinked dirs, SIGHUP, restores)
    "hooks": "daemon",
    "metrics": "daemon",
    "daemon": "daemon",
    "systemd": "daemon",
    "faults": "faults",
    "cm": "cm",
    "packaging": "packaging",
    "node": "node",
    "e2e": "e2e",
    "controlplane": "controlplane",  # a real kubeadm control plane in namespaces of its own
    "docs": "fast",  # the commands of README.md and docs/ on sandbox roots
}
TIER_OF_FILE = {
    # builds tests/validate/y2j with Go (the sigs.k8s.io/yaml differential)
    "validate/test_differential_go.py": "go",
    # the dev blocks of the docs: .ci/demo, the benchmarks (daemons), pip building the project
    "docs/test_dev_doc_blocks.py": "daemon",
}
TESTS = Path(__file__).resolve().parent


#: STATICPODD_TESTS_TIERS="e2e ...": keep only the tests of these tiers (the test command's second
#: run of the real-kubelet tier, on another kubelet minor and runtime, selects it this way so that
#: it composes with the caller's own -k/-m and paths); unset: every tier.
ONLY_TIERS = set(os.environ.get("STATICPODD_TESTS_TIERS", "").split())


#: The tiers that need the Go fixtures run after every other tier, in this order: the test command
#: builds those fixtures in the background meanwhile (.ci/test, tests/e2e/background_builds.py),
#: so that on a new machine the other tiers hide the builds' 20 minutes.
LATE_TIERS = ("node", "e2e", "controlplane")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tier, from its path (TIER_OF_FILE, else TIER_OF_DIR); with
    STATICPODD_TESTS_TIERS, deselect the tests of every other tier; move the LATE_TIERS last
    (a stable sort: each tier keeps its own order)."""
    deselected: list[pytest.Item] = []
    rank: dict[pytest.Item, int] = {}
    for item in items:
        try:
            rel = item.path.resolve().relative_to(TESTS)
        except ValueError:
            continue
        tier = TIER_OF_FILE.get(rel.as_posix()) or TIER_OF_DIR.get(rel.parts[0])
        if tier is None:  # a new test directory: say which tier it is (CONTRIBUTING.md)
            raise pytest.UsageError(f"{rel}: tests/{rel.parts[0]} has no tier in tests/conftest.py TIER_OF_DIR")
        item.add_marker(getattr(pytest.mark, tier))
        rank[item] = LATE_TIERS.index(tier) + 1 if tier in LATE_TIERS else 0
        if ONLY_TIERS and tier not in ONLY_TIERS:
            deselected.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        dropped = set(deselected)
        items[:] = [i for i in items if i not in dropped]
    items.sort(key=lambda i: rank.get(i, 0))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under the test command (STATICPODD_TESTS_STRICT=1) journald must answer before anything
    runs: without it every journal assertion would wait out its timeout, one test at a time."""
    if STRICT and not journald_alive():
        pytest.exit("journald does not answer on /run/systemd/journal/socket (a stale socket from a "
                    "killed journald looks the same as a live one); bash .ci/setup starts it", returncode=3)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Under the test command a skip is a failure: on CI a skip means a missing install step
    (journald, rpmbuild, the corpus …), which must not pass as green."""
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under STATICPODD_TESTS_STRICT=1 (the test command): {reason}"


@pytest.fixture
def corpus() -> Path:
    c = corpus_dir()
    if c is None:
        pytest.skip("../shared/corpus is absent (set STATICPODD_CORPUS to run the corpus tests)")
    return c


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """An empty node root with an (empty) kubelet manifest directory."""
    sb = Sandbox(tmp_path / "root")
    sb.manifests.mkdir(parents=True)
    return sb


@pytest.fixture
def kubeadm(sandbox: Sandbox, corpus: Path) -> Sandbox:
    """A sandbox holding kubeadm's four control-plane manifests (corpus 01–04), 0600."""
    for name, src in KUBEADM.items():
        sandbox.write(name, (corpus / "manifests" / src).read_bytes())
    return sandbox


@pytest.fixture
def ctl(sandbox: Sandbox) -> Callable[..., Run]:
    """Run staticpodctl in-process with ``--root <sandbox>``; returns Run(rc, out, err)."""
    from staticpodd import cli

    def run(*args: str, root: Path | None = None) -> Run:
        out, err = io.StringIO(), io.StringIO()
        argv = [*args, "--root", str(root or sandbox.root)]
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:  # argparse usage errors
                rc = int(exc.code or 0)
        return Run(rc, out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def ctl_proc(sandbox: Sandbox) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run staticpodctl as a real process with ``--root <sandbox>``."""

    def run(*args: str, env: dict[str, str] | None = None, input: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        e = dict(os.environ)
        e.update(env or {})
        e["PYTHONPATH"] = str(REPO)
        return subprocess.run([*staticpodctl_cmd(), *args, "--root", str(sandbox.root)], env=e,
                              input=input, capture_output=True, text=True, timeout=timeout)

    return run
