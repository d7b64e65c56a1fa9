"""Fixtures of the control-plane tier: one real kubeadm v1.37.2 control plane per test session.

``control_plane`` brings it up (tests/controlplane/cplane_lab.py) with staticpodd's daemon started
on the node *before* ``kubeadm init``, as on a node where the package was installed first, and
tears everything down at the end of the session, failing the session when anything of it is left
on the host. ``cp`` gives each test the node with the scheduler live and the default namespace
empty. Strict: a missing part (Go binaries, containerd, CNI plugins) is a failure naming what to
install, never a skip.

``STATICPODD_CP_LAB=WORK`` reuses a control plane already started with ``cplane-lab up`` (and
leaves it running): for working on one test without paying for ``kubeadm init`` each time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cplane_lab import ControlPlane, LabError, down, leftovers, up
from cplane_node import Node

REPO = Path(__file__).resolve().parents[2]

_state: dict[str, Any] = {}

#: Tests that disturb what every other test of the tier needs: with kube-apiserver parked the
#: scheduler and the controller-manager lose their leader leases and exit, and the kubelet starts
#: them again under its crash back-off (10 s, doubling, at most 5 min). They run after the rest of
#: the tier, so that no other test waits out that back-off.
LAST = {"test_with_kube_apiserver_parked_the_verbs_go_on_and_their_events_follow_in_order"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the tests in :data:`LAST` behind the tier's other tests (the rest keeps its order)."""
    last = [i for i in items if i.name in LAST and "controlplane" in i.path.parts]
    if not last:
        return
    rest = [i for i in items if i not in last]
    ours = [n for n, i in enumerate(rest) if "controlplane" in i.path.parts]
    at = ours[-1] + 1 if ours else len(rest)
    items[:] = rest[:at] + last + rest[at:]


def _start_daemon(cp: ControlPlane) -> None:
    _state["daemon"] = cp.popen(sys.executable, "-m", "staticpodd.daemon", "--root", "/", log=cp.work / "staticpodd.log")
    end = time.monotonic() + 30
    while not cp.path("/run/staticpodd/daemon.json").exists():
        if _state["daemon"].poll() is not None or time.monotonic() > end:
            raise LabError("staticpodd did not start on the node:\n" + (cp.work / "staticpodd.log").read_text()[-2000:])
        time.sleep(0.1)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Node]:
    if os.geteuid() != 0:
        pytest.fail("the control-plane tier runs as root (namespaces, containerd, mounts, cgroups)")
    reuse = os.environ.get("STATICPODD_CP_LAB")
    t0 = time.monotonic()
    try:
        cp = ControlPlane.load(reuse) if reuse else up(before_init=_start_daemon)
    except LabError as exc:
        pytest.fail(f"cannot bring up the control plane: {exc}", pytrace=False)
    _state["up_seconds"] = time.monotonic() - t0
    node = Node(cp)
    yield node
    if reuse:
        return
    d = _state.get("daemon")
    if d is not None and d.poll() is None:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(20)
        except subprocess.TimeoutExpired:
            d.kill()
    problems = down(cp) + leftovers(cp)
    assert not problems, f"the control plane left things on the host: {problems}"


@pytest.fixture
def cp(control_plane: Node) -> Iterator[Node]:
    control_plane.reset()
    yield control_plane
    control_plane.reset(settle=False)  # the next test's set-up settles


