"""Fixtures of the real-kubelet tier: one real kubelet + containerd per fileCheckFrequency,
shared by the tests of a session (clean directory and store between tests).

Strict: a missing kubelet, crictl, containerd, runc, gcc or busybox-static is a failure naming
what to install, never a skip (``tests/e2e/build-binaries`` builds the Go binaries; .ci/test
runs it and exports STATICPODD_E2E_BIN).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_lib import Node
from kubelet_lab import Lab, LabError, down, up

_labs: dict[str, tuple[Lab, Path]] = {}


def _lab(frequency: str, factory: pytest.TempPathFactory) -> tuple[Lab, Path]:
    if frequency not in _labs:
        if os.geteuid() != 0:
            pytest.fail("the real-kubelet tier runs as root (containerd, mounts, cgroups)")
        root = factory.mktemp(f"node-{frequency}") / "root"
        (root / "etc" / "kubernetes" / "manifests").mkdir(parents=True)
        try:
            lab = up(root / "etc" / "kubernetes" / "manifests", file_check_frequency=frequency)
        except LabError as exc:
            pytest.fail(f"cannot start the kubelet lab: {exc}", pytrace=False)
        _labs[frequency] = (lab, root)
    return _labs[frequency]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Tear every lab down; anything left on the host (a cgroup, a mount) fails the session."""
    for lab, _ in _labs.values():
        problems = down(lab, keep=bool(os.environ.get("STATICPODD_E2E_KEEP")))
        for p in problems:
            print(f"kubelet-lab: not cleaned: {p}", file=sys.stderr)
        if problems and session.exitstatus == 0:
            session.exitstatus = 1
    _labs.clear()


def _node(frequency: str, factory: pytest.TempPathFactory) -> Iterator[Node]:
    lab, root = _lab(frequency, factory)
    node = Node(lab, root)
    node.clean()
    try:
        yield node
    finally:
        node.clean()


@pytest.fixture(autouse=True)
def _run_tag(request: pytest.FixtureRequest) -> Iterator[None]:
    """Give this test's pods UIDs of their own (e2e_lib.RUN_TAG)."""
    import hashlib

    import e2e_lib

    e2e_lib.RUN_TAG = hashlib.sha256(f"{request.node.nodeid}{os.getpid()}".encode()).hexdigest()[:10]
    yield
    e2e_lib.RUN_TAG = "none"


@pytest.fixture
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node whose kubelet relists every 20 s (the kubelet's default), empty and clean."""
    yield from _node("20s", tmp_path_factory)


@pytest.fixture
def node5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node whose kubelet relists every 5 s."""
    yield from _node("5s", tmp_path_factory)
