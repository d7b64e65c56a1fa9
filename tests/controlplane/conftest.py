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

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cplane_lab import NODE_NAME, ControlPlane, LabError, down, leftovers, mirror_ready, up

REPO = Path(__file__).resolve().parents[2]

_state: dict[str, Any] = {}


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
    control_plane.reset()


class Node:
    """The control-plane node as the tests use it: staticpodctl and kubectl run on it."""

    def __init__(self, lab: ControlPlane) -> None:
        self.lab = lab
        self.name = NODE_NAME

    def ctl(self, *args: str, check: bool = False, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """``staticpodctl ARGS`` on the node (``--root /``: the node's own directory and store)."""
        p = self.lab.run(sys.executable, "-m", "staticpodd.cli", *args, timeout=timeout,
                         env={"PYTHONPATH": str(REPO)})
        if check:
            assert p.returncode == 0, f"staticpodctl {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
        return p

    def ctl_json(self, *args: str) -> dict[str, Any]:
        p = self.ctl(*args, "--json")
        assert p.stdout.strip(), p.stderr
        return json.loads(p.stdout)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                kubeconfig: str = "/etc/kubernetes/admin.conf") -> subprocess.CompletedProcess[str]:
        return self.lab.kubectl(*args, check=check, input=input, kubeconfig=kubeconfig)

    def kubectl_json(self, *args: str) -> Any:
        return self.lab.kubectl_json(*args)

    def events(self, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        """Events whose involvedObject is the pod ``name``."""
        items = self.kubectl_json("get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}")
        return list(items.get("items") or [])

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        p = self.kubectl("get", "pod", "-n", namespace, name, "-o", "json", check=False)
        return json.loads(p.stdout) if p.returncode == 0 else None

    def wait(self, cond: Any, timeout: float, what: str) -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = cond()
            if v:
                return v
            time.sleep(0.25)
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")

    def running(self, name: str, namespace: str = "default") -> bool:
        pod = self.pod(name, namespace)
        return bool(pod) and pod["status"].get("phase") == "Running"

    def reset(self) -> None:
        """The scheduler live and Ready, no test pods left in ``default``."""
        status = self.ctl_json("status")
        comps = {c["component"]: c for c in status.get("components", [])}
        if (comps.get("kube-scheduler") or {}).get("state") == "parked":
            self.ctl("unpark", "kube-scheduler", "--reason", "test reset", check=True)
        self.kubectl("delete", "pods", "--all", "-n", "default", "--grace-period=0", "--force", "--wait=true",
                     check=False)
        self.wait(lambda: mirror_ready(self.lab, "kube-scheduler"), 90, "kube-scheduler Ready again")
