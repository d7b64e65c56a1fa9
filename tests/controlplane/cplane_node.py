"""The control-plane node as the tests use it (tests/controlplane/conftest.py makes one per
session): staticpodctl and kubectl run on it, inside its namespaces."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cplane_lab import NODE_NAME, ControlPlane, mirror_ready

REPO = Path(__file__).resolve().parents[2]


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

    def reset(self, *, settle: bool = True) -> None:
        """No park left, no test pods left in ``default``, and with ``settle`` the scheduler Ready
        (a test's set-up settles; its teardown need not, so the session's last test does not wait
        out a scheduler's crash back-off that no later test needs)."""
        # Every park a test left (one that failed half-way may leave kube-apiserver parked, and
        # then every later test would wait for a scheduler whose API server is gone): etcd and
        # kube-apiserver first, a broken park ended by keeping the live copy.
        status = self.ctl_json("status")
        parked = [c for c in status.get("components", []) if c.get("parked")]
        first = {"etcd": 0, "kube-apiserver": 1}
        for c in sorted(parked, key=lambda c: (first.get(c["component"], 2), c["component"])):
            how = ["--discard"] if c.get("park_broken") else []
            self.ctl("unpark", c["component"], *how, "--reason", "test reset", check=True)
        if any(c["component"] in first for c in parked):
            self.wait(lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, 120,
                      "the API server to answer again")
        self.kubectl("delete", "pods", "--all", "-n", "default", "--grace-period=0", "--force", "--wait=true",
                     check=False)
        if not settle:
            return
        # 330 s: a scheduler that exited (its lease lost while the API server was away) is started
        # again under the kubelet's crash back-off, at most 5 min
        self.wait(lambda: mirror_ready(self.lab, "kube-scheduler"), 330, "kube-scheduler Ready again")
