"""Helpers of the real-kubelet tier: a node root watched by a real kubelet.

A :class:`Node` is a staticpodd ``--root`` whose ``etc/kubernetes/manifests`` is the lab
kubelet's ``staticPodPath``. Its ``var/lib/kubelet/config.yaml`` carries the kubelet's
``staticPodPath`` and ``fileCheckFrequency`` as on a node (the prover reads the relist period
there), and its ``etc/staticpodd/staticpodd.yaml`` names the lab's crictl, CRI endpoint and node
name, so every ``staticpodctl --wait`` talks to the lab's containerd.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

from kubelet_lab import APP_IMAGE, Lab, rewrite_image_text  # noqa: E402

CORPUS = Path(os.environ.get("STATICPODD_CORPUS") or REPO.parent / "shared" / "corpus")
SCHEDULER_SRC = CORPUS / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml"

#: Lines in the kubelet log that mean it could not parse a file (seen on real kubelets; docs/kubelet-contract.md, "How a file is decoded").
PARSE_ERRORS = ("Unable to process watch event", "Could not process manifest file", "Can't process config file")


#: A label value unique to the running test (set by tests/e2e/conftest.py), so that each test's
#: pods get UIDs of their own: the kubelet keeps a container restart back-off per pod UID (10 s,
#: doubling, forgotten only after minutes), and one shared kubelet would otherwise carry one
#: test's restarts into the next test's timings.
RUN_TAG = "none"


def scheduler_bytes(*, extra_args: tuple[str, ...] = (), readiness_port: int | None = None) -> bytes:
    """kubeadm's kube-scheduler manifest (corpus 03) with its image rewritten to the lab's app
    image; probes, volumes and everything else kept, plus one label ``staticpodd.test/run``
    (:data:`RUN_TAG`). ``extra_args`` go after ``--leader-elect``; ``readiness_port`` adds a
    readinessProbe on that port (a port nothing serves never passes)."""
    if not SCHEDULER_SRC.is_file():
        pytest.fail(f"corpus manifest {SCHEDULER_SRC} is missing (../shared/corpus, or set STATICPODD_CORPUS)")
    text = rewrite_image_text(SCHEDULER_SRC.read_text())
    assert APP_IMAGE in text
    text = text.replace("    tier: control-plane\n", f"    tier: control-plane\n    staticpodd.test/run: r{RUN_TAG}\n", 1)
    if extra_args:
        text = text.replace("    - --leader-elect=true\n", "    - --leader-elect=true\n" + "".join(f"    - {a}\n" for a in extra_args))
    if readiness_port is not None:
        probe = (
            "    readinessProbe:\n"
            "      httpGet:\n"
            "        host: 127.0.0.1\n"
            "        path: /healthz\n"
            f"        port: {readiness_port}\n"
            "      periodSeconds: 1\n"
            "      failureThreshold: 1\n"
        )
        text = text.replace("    name: kube-scheduler\n", "    name: kube-scheduler\n" + probe)
    return text.encode()


@dataclass
class PodState:
    """One look at a pod in the runtime: the newest ready sandbox and its running containers."""

    sandbox_id: str
    config_hash: str
    containers: dict[str, tuple[str, int]]  # name -> (container id, attempt)

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str, int], ...]]:
        """(sandbox id, ((name, container id, attempt), ...)): equal means nothing restarted."""
        return self.sandbox_id, tuple(sorted((n, i, a) for n, (i, a) in self.containers.items()))

    def change_to(self, other: PodState | None) -> str:
        """In words, what differs in ``other`` (a later look at the same pod): nothing, no
        running pod, a new sandbox (the pod was killed and created again: a new config.hash
        means a new UID), or a container restarted inside the same sandbox (id and attempt)."""
        if other is None:
            return "no ready sandbox with running containers (the pod was being killed or re-created)"
        if other.key == self.key:
            return "the same sandbox, containers and attempts"
        if other.sandbox_id != self.sandbox_id:
            uid = ("same config.hash" if other.config_hash == self.config_hash
                   else f"config.hash {self.config_hash[:12]} -> {other.config_hash[:12]}")
            return f"sandbox replaced: {self.sandbox_id[:13]} -> {other.sandbox_id[:13]} ({uid}): the pod was re-created"
        parts = []
        for name in sorted(set(self.containers) | set(other.containers)):
            a, b = self.containers.get(name), other.containers.get(name)
            if a != b:
                parts.append(f"container {name} {a[0][:13] if a else '-'} attempt {a[1] if a else '-'} -> "
                             f"{b[0][:13] if b else 'not running'} attempt {b[1] if b else '-'}")
        return "same sandbox, " + "; ".join(parts) + ": restarted in place (a probe, or the process exited)"


def hms(t: float) -> str:
    """``HH:MM:SS.mmm`` of an epoch time, local time as the kubelet's log writes it."""
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


#: Kubelet log messages that tell a pod's story (its sandbox, containers, probes, file events);
#: the volume and node-status chatter is left out.
STORY_MESSAGES = (
    "SyncLoop", "Unable to process watch event", "Could not process manifest file", "Can't process config file",
    "Probe failed", "Killing container", "No sandbox for pod", "No ready sandbox", "Error syncing pod",
    "Generic (PLEG)", "failed liveness", "failed startup", "back-off", "StartContainer", "RunPodSandbox",
    "waiting for", "static pod", "Pod is", "Terminat",
)


class Node:
    """A staticpodd root watched by the lab's kubelet. ``lab``: the running kubelet-lab."""

    def __init__(self, lab: Lab, root: Path) -> None:
        self.lab = lab
        self.root = root
        self.daemons: list[Any] = []

    # -- layout --------------------------------------------------------------------------------
    @property
    def manifests(self) -> Path:
        return self.root / "etc" / "kubernetes" / "manifests"

    @property
    def parked(self) -> Path:
        return self.manifests / ".staticpodd" / "parked"

    def configure(self, extra: str = "") -> None:
        """Write the node's kubelet config copy and staticpodd.yaml (``extra``: more YAML)."""
        kcfg = self.root / "var" / "lib" / "kubelet" / "config.yaml"
        kcfg.parent.mkdir(parents=True, exist_ok=True)
        kcfg.write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"staticPodPath: /etc/kubernetes/manifests\nfileCheckFrequency: {self.lab.file_check_frequency}\n"
        )
        cfg = self.root / "etc" / "staticpodd" / "staticpodd.yaml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(
            f"node_name: {self.lab.node_name}\n"
            "wait:\n"
            f"  crictl: {self.lab.crictl_path}\n"
            f"  runtime_endpoint: {self.lab.endpoint}\n" + extra
        )

    # -- staticpodctl ----------------------------------------------------------------------------
    def ctl(self, *args: str, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run ``staticpodctl ARGS --root ROOT`` (the installed entry point of the venv)."""
        exe = Path(sys.executable).parent / "staticpodctl"
        argv = [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "staticpodd.cli"])]
        proc = subprocess.run([*argv, *args, "--root", str(self.root)], capture_output=True, text=True,
                              timeout=timeout, check=False)
        if check and proc.returncode != 0:
            pytest.fail(f"staticpodctl {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def write(self, name: str, data: bytes) -> Path:
        """Put ``data`` in the directory as ``name`` atomically (a dot-named temp file, 0600,
        renamed into place), so the kubelet never reads a partial file from the test itself."""
        p = self.manifests / name
        tmp = self.manifests / f".e2e-tmp-{name}"
        tmp.write_bytes(data)
        os.chmod(tmp, 0o600)
        os.rename(tmp, p)
        return p

    def start_daemon(self, config: str) -> Any:
        """Write ``config`` (more staticpodd.yaml keys) and start the real staticpodd on this
        root (tests/daemon/daemon_harness: real inotify, SQLite, journald); waits for READY=1."""
        from daemon_harness import Daemon, NotifySocket

        self.configure(config)
        d = Daemon(self.root, NotifySocket(), watchdog_usec=None)
        d.wait_ready()
        self.daemons.append(d)
        return d

    # -- the runtime ----------------------------------------------------------------------------
    def state(self, base: str, namespace: str = "kube-system") -> PodState | None:
        """The pod ``<base>-<node>`` if a ready sandbox of it has every container running."""
        name = self.lab.pod_name(base)
        pods = [p for p in self.lab.pods() if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace
                and p["state"] == "SANDBOX_READY"]
        if not pods:
            return None
        pods.sort(key=lambda p: int(p.get("createdAt") or 0))
        sb = pods[-1]
        conts = {c["metadata"]["name"]: (c["id"], int(c["metadata"].get("attempt") or 0))
                 for c in self.lab.containers() if c["podSandboxId"] == sb["id"] and c["state"] == "CONTAINER_RUNNING"}
        if not conts:
            return None
        h = (sb.get("annotations") or {}).get("kubernetes.io/config.hash") or sb["metadata"].get("uid", "")
        return PodState(sb["id"], h, conts)

    def anything_running(self, base: str) -> bool:
        """Whether any sandbox of the pod is ready or any of its containers runs."""
        name = self.lab.pod_name(base)
        ids = {p["id"] for p in self.lab.pods() if p["metadata"]["name"] == name}
        ready = any(p["state"] == "SANDBOX_READY" for p in self.lab.pods() if p["id"] in ids)
        return ready or any(c["state"] == "CONTAINER_RUNNING" for c in self.lab.containers() if c["podSandboxId"] in ids)

    def kubelet_ready(self, base: str, namespace: str = "kube-system") -> bool:
        """The kubelet's own Ready condition for the pod (read-only port /pods)."""
        for p in self.lab.kubelet_pods():
            if p["metadata"]["name"] == self.lab.pod_name(base) and p["metadata"].get("namespace") == namespace:
                return any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
        return False

    def wait(self, cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
        end = time.monotonic() + timeout
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() > end:
                pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}\n{self.kubelet_tail()}")
            time.sleep(interval)

    def wait_running(self, base: str, timeout: float = 60) -> PodState:
        return self.wait(lambda: self.state(base), timeout, f"{base} running")

    def wait_stopped(self, base: str, timeout: float = 60) -> None:
        self.wait(lambda: not self.anything_running(base), timeout, f"{base} stopped")

    def runtime_history(self, base: str) -> str:
        """Every sandbox and container of the pod ``<base>-<node>`` the runtime still knows, in
        any state, oldest first, one line each (created time, short id, state, config.hash,
        attempt): what a failure message needs to tell a restart from a re-creation."""
        name = self.lab.pod_name(base)
        try:
            pods = [p for p in self.lab.pods() if p["metadata"]["name"] == name]
            conts = self.lab.containers()
        except Exception as exc:  # noqa: BLE001 - a diagnostic must not hide the failure
            return f"(crictl failed: {exc})"
        lines = []
        for p in sorted(pods, key=lambda p: int(p.get("createdAt") or 0)):
            h = (p.get("annotations") or {}).get("kubernetes.io/config.hash") or p["metadata"].get("uid", "")
            lines.append(f"  {hms(int(p.get('createdAt') or 0) / 1e9)} sandbox {p['id'][:13]} {p['state']} "
                         f"config.hash {h[:12]}")
            for c in sorted((c for c in conts if c["podSandboxId"] == p["id"]), key=lambda c: int(c.get("createdAt") or 0)):
                lines.append(f"  {hms(int(c.get('createdAt') or 0) / 1e9)}   container {c['metadata']['name']} "
                             f"{c['id'][:13]} attempt {c['metadata'].get('attempt') or 0} {c['state']}")
        return "\n".join(lines) or "  (none)"

    def kubelet_story(self, offset: int, base: str, limit: int = 80) -> str:
        """The kubelet's log lines since ``offset`` that tell the story of the pod ``base``:
        its SyncLoop ADD/REMOVE/UPDATE, sandbox and container starts and kills, probe
        failures, and every refused read of a manifest (a watch event or a relist), with their
        times; at most ``limit`` lines (the first and the last ones)."""
        pod = self.lab.pod_name(base)
        keep = []
        for t, line in self.lab.log_lines(offset):
            if (pod in line or str(self.manifests) in line) and any(m in line for m in STORY_MESSAGES):
                msg = line.split("] ", 1)[-1]
                keep.append(f"  {hms(t)} {msg[:230]}")
        if len(keep) > limit:
            keep = keep[: limit // 4] + [f"  ... {len(keep) - limit} lines left out ..."] + keep[-(limit - limit // 4):]
        return "\n".join(keep) or "  (none)"

    def kubelet_tail(self, lines: int = 30) -> str:
        try:
            return "--- kubelet log (tail) ---\n" + "\n".join(self.lab.kubelet_log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- between tests --------------------------------------------------------------------------
    def clean(self) -> None:
        """Stop daemons, empty the manifest directory and the store, wait until no pod runs."""
        for d in self.daemons:
            if d.proc.poll() is None:
                d.stop()
        self.daemons.clear()
        if self.manifests.exists():
            for entry in self.manifests.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        for sub in ("var/lib/staticpodd", "run/staticpodd", "etc/staticpodd"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        self.manifests.mkdir(parents=True, exist_ok=True)
        os.chmod(self.manifests, 0o700)
        self.configure()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if not any(p["state"] == "SANDBOX_READY" for p in self.lab.pods()) and not any(
                c["state"] == "CONTAINER_RUNNING" for c in self.lab.containers()
            ):
                return
            time.sleep(0.2)
        pytest.fail("pods of an earlier test still run 60 s after their manifests were removed\n" + self.kubelet_tail())

    def parse_errors(self, offset: int) -> list[str]:
        """kubelet log lines since ``offset`` that report a file it could not parse."""
        return [ln for ln in self.lab.log_since(offset).splitlines() if any(e in ln for e in PARSE_ERRORS)]

    def relists_since(self, offset: int) -> int:
        """How many times the kubelet logged a full relist since ``offset`` (none at --v=2: 0)."""
        return len(re.findall(r"Reading config file", self.lab.log_since(offset)))


def wait_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``--json`` reply of a staticpodctl call."""
    try:
        return json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"not JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
