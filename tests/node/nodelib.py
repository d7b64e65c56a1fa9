"""A booted Debian 12 node for the tests: systemd 252 as PID 1 in a systemd-nspawn container.

The root comes from ``tests/node/build-root`` (debootstrap, cached outside the clone). Each
:class:`BootedNode` boots an overlayfs copy of it (the cache stays clean; a boot costs ~2 s), with
``systemd-nspawn --boot --register=no --keep-unit``: this machine's PID 1 is not systemd, so there
is no systemd-machined to register with and no unit to create a scope in; the container's systemd
runs its own units in the cgroup v1 hierarchy it is given. Commands run inside with ``nsenter``
into the container's namespaces (``systemd-run -M``/``machinectl shell`` need machined).
Nothing here is a stand-in: the unit, its sandbox, dpkg, journald and systemctl are the real ones.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD_ROOT = REPO / "tests" / "node" / "build-root"
HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
NODE_ENV = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": "/root", "TERM": "dumb"}


def build_root(timeout: float = 1800) -> Path:
    """The cached Debian 12 root's directory (built by ``tests/node/build-root`` when missing).

    Raises AssertionError with the script's output when it fails (no network to the Debian
    archive, no debootstrap).
    """
    r = subprocess.run(["bash", str(BUILD_ROOT)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PATH": HOST_PATH})
    assert r.returncode == 0, f"tests/node/build-root failed ({r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return Path(r.stdout.strip().splitlines()[-1])


class BootedNode:
    """One booted container. ``with BootedNode(root, work) as node: node.sh("systemctl ...")``.

    ``binds``: host paths bound read-only at the same path inside (the .deb files, kubeadm);
    ``rw_binds``: the same, writable (a clone the docs' commands build and install from).
    """

    def __init__(self, lower: Path, work: Path, *, binds: tuple[Path, ...] = (),
                 rw_binds: tuple[Path, ...] = ()) -> None:
        self.lower = lower
        self.work = work
        self.binds = binds
        self.rw_binds = rw_binds
        self.name = f"spdnode{uuid.uuid4().hex[:8]}"
        self.merged = work / "merged"
        self.proc: subprocess.Popen[bytes] | None = None
        self.leader: int | None = None
        self.console = work / "console.log"

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> BootedNode:
        self.boot()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def boot(self, timeout: float = 90) -> None:
        """Mount the overlay, start ``systemd-nspawn --boot``, wait until systemd has finished
        booting (``systemctl is-system-running --wait``: running or degraded)."""
        for d in ("upper", "workdir", "merged"):
            (self.work / d).mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={self.lower},upperdir={self.work / 'upper'},workdir={self.work / 'workdir'}",
             str(self.merged)], check=True, capture_output=True)
        cmd = ["systemd-nspawn", "-q", "-D", str(self.merged), "--register=no", "--keep-unit",
               "-M", self.name, "--boot", "--console=passive", "--private-network"]
        for b in self.binds:
            cmd.append(f"--bind-ro={b}")
        for b in self.rw_binds:
            cmd.append(f"--bind={b}")
        with open(self.console, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env={"PATH": HOST_PATH, "LANG": "C.UTF-8"}, start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.leader is None:
            if self.proc.poll() is not None:
                raise AssertionError(f"systemd-nspawn exited {self.proc.returncode}:\n{self.console_text()}")
            self.leader = self._find_leader()
            if time.monotonic() > deadline:
                raise AssertionError(f"no container init after {timeout}s:\n{self.console_text()}")
            time.sleep(0.05)
        while True:
            r = self.sh("systemctl is-system-running --wait", check=False, timeout=timeout)
            state = r.stdout.strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the node did not finish booting ({state!r}):\n{self.console_text()}")
            time.sleep(0.2)

    def _find_leader(self) -> int | None:
        """The container's PID 1 as seen from the host: the descendant of systemd-nspawn that
        runs in another pid namespace."""
        assert self.proc is not None
        own_ns = os.readlink(f"/proc/{self.proc.pid}/ns/pid")
        todo = [self.proc.pid]
        while todo:
            parent = todo.pop()
            try:
                children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
            except OSError:
                continue
            for c in map(int, children):
                try:
                    if os.readlink(f"/proc/{c}/ns/pid") != own_ns:
                        return c
                except OSError:
                    continue
                todo.append(c)
        return None

    def shutdown(self, timeout: float = 60) -> None:
        """Power the node off (SIGTERM to systemd-nspawn: a clean ``poweroff`` of the container),
        kill it if it hangs, unmount the overlay. Safe to call twice."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.proc = None
        if self.merged.is_mount():
            subprocess.run(["umount", "-l", str(self.merged)], check=False, capture_output=True)

    def console_text(self) -> str:
        try:
            return self.console.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    # -- running things inside ----------------------------------------------------------------------
    def sh(self, script: str, *, check: bool = True, timeout: float = 120,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``/bin/sh -c script`` as root inside the node (all its namespaces, a clean
        environment). ``check``: AssertionError naming the command, its status and output."""
        assert self.leader is not None, "the node is not booted"
        full_env = {**NODE_ENV, **(env or {})}
        cmd = ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "-C", "--",
               "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in full_env.items()), "/bin/sh", "-c", script]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"in the node: {script}\n-> {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
        return r

    def path(self, inside: str) -> Path:
        """The host path of a file inside the node (through the overlay's merged view)."""
        return self.merged / inside.lstrip("/")

    def show(self, unit: str, prop: str) -> str:
        """``systemctl show -P PROP UNIT``."""
        return self.sh(f"systemctl show -P {shlex.quote(prop)} {shlex.quote(unit)}").stdout.strip()

    def wait_for(self, script: str, *, timeout: float = 30, interval: float = 0.25) -> subprocess.CompletedProcess[str]:
        """Run ``script`` until it exits 0; AssertionError with its last output after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.sh(script, check=False)
            if r.returncode == 0:
                return r
            if time.monotonic() > deadline:
                raise AssertionError(f"in the node, not true after {timeout}s: {script}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            time.sleep(interval)

    def journal(self, *args: str) -> str:
        """``journalctl --no-pager ARGS`` inside the node."""
        return self.sh("journalctl --no-pager " + " ".join(shlex.quote(a) for a in args), check=False).stdout
