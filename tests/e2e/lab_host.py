"""What the two labs share on the host: the real-kubelet lab (kubelet_lab.py) and the control-plane
lab (tests/controlplane/cplane_lab.py) each run containerd and a kubelet behind one namespace
*holder* process, with the same settings on the host and the same clean-up.

Test fixture only (nothing here ships). The parts, in the order a lab uses them:

- on the host, before the holder starts: :func:`make_cgroup_root` (the kubelet's ``cgroupRoot`` in
  every v1 controller) and :func:`write_sysctl_files` (the ``/proc/sys`` values the kubelet wants);
- inside the holder's mount namespace: :func:`bind_sysctls`, :func:`mount_overlays`,
  :func:`start_containerd`, :func:`wait_for_socket`, :func:`import_images`, then :func:`hold` until SIGTERM;
- on the way down: :func:`kill_cgroup_tasks`, :func:`remove_cgroups` (every hierarchy, the
  ``unified`` tree too), :func:`remove_work` (the work directory, unless its mounts still show).

The functions that run inside the holder return ``None`` or what failed, in words (the holder
writes it to ``failed``); the others return the problems left (empty when all is well).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The /proc/sys values the kubelet sets unless they already hold them
#: (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables).
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": "1",
    "vm/panic_on_oom": "0",
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "kernel/keys/root_maxkeys": "1000000",
    "kernel/keys/root_maxbytes": "25000000",
}

#: Host trees covered by an overlay inside the lab's mount namespace (writes land in the lab).
OVERLAY_DIRS = ("/etc", "/var", "/usr", "/opt", "/srv")


class LabError(RuntimeError):
    """A part of the lab is missing or failed; the message says which and what to do."""


def _need(tool: str, package: str) -> str:
    """The path of ``tool`` (PATH, else /usr/sbin). Raises LabError naming the Debian package."""
    path = shutil.which(tool) or (f"/usr/sbin/{tool}" if os.access(f"/usr/sbin/{tool}", os.X_OK) else None)
    if not path:
        raise LabError(f"{tool} not found: install the Debian package {package} (.ci/apt-packages.txt)")
    return path


# --- processes --------------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _stop_pid(pid: int | None, grace: float) -> None:
    """SIGTERM ``pid``, SIGKILL after ``grace`` seconds; reaps it when it is our child."""
    if not pid or not _alive(pid):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and _alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + 5
        while time.monotonic() < end and _alive(pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)


def hold(*, subreaper: bool = False) -> int:
    """The holder's last step: wait for SIGTERM (or SIGINT), reaping children meanwhile; returns 0.
    ``subreaper``: adopt orphaned descendants too (PR_SET_CHILD_SUBREAPER), so their zombies are ours."""
    stop = False

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    if subreaper:
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    while not stop:
        time.sleep(0.2)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
    return 0


# --- cgroups ----------------------------------------------------------------------------------
def _v1_controllers() -> list[Path]:
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():  # cgroup v2 unified: one tree
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "unified")


def _hierarchies() -> list[Path]:
    """Every cgroup hierarchy the kubelet makes its cgroups in: each v1 controller and, on a
    hybrid host, ``/sys/fs/cgroup/unified`` too (the kubelet creates ``<cgroupRoot>/kubepods/...``
    there as well: a clean-up that walked only the v1 controllers left empty cgroups behind)."""
    out = _v1_controllers()
    unified = Path("/sys/fs/cgroup/unified")
    if unified.is_dir() and unified not in out:
        out.append(unified)
    return out


def _cgroup_pids(d: Path) -> list[int]:
    pids: list[int] = []
    for procs in d.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(x) for x in procs.read_text().split()]
    return pids


def cgroup_dirs(cgroup_root: str) -> list[Path]:
    """The lab's cgroup directories in every hierarchy: each v1 controller and ``unified``."""
    return [r / cgroup_root.lstrip("/") for r in _hierarchies()]


def make_cgroup_root(cgroup_root: str) -> None:
    """Create ``cgroup_root`` ("/staticpodd-e2e-x") in every v1 controller: the kubelet wants its
    ``cgroupRoot`` to exist before it starts; cpuset's cpus and mems are copied from the parent."""
    for ctrl in _v1_controllers():
        d = ctrl / cgroup_root.lstrip("/")
        d.mkdir(exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):
            if (ctrl / f).exists() and (d / f).exists() and not (d / f).read_text().strip():
                (d / f).write_text((ctrl / f).read_text())


def kill_cgroup_tasks(cgroup_root: str, hierarchies: Sequence[Path] | None = None) -> None:
    """SIGKILL every task left in the lab's cgroups (``hierarchies``: default every one)."""
    for ctrl in _hierarchies() if hierarchies is None else hierarchies:
        d = ctrl / cgroup_root.lstrip("/")
        if d.exists():
            for pid in _cgroup_pids(d):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def remove_cgroups(cgroup_root: str, *, deadline: float = 10.0, kill: bool = False) -> list[str]:
    """Remove the lab's cgroups, deepest first, in every hierarchy; a cgroup stays busy until its
    last task is reaped (a container killed just now), so each is retried until ``deadline``
    seconds from now. ``kill``: SIGKILL the tasks of each hierarchy first. Returns what stayed."""
    problems: list[str] = []
    end = time.monotonic() + deadline
    for d in cgroup_dirs(cgroup_root):
        if kill and d.exists():
            for pid in _cgroup_pids(d):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        while d.exists():
            for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                with contextlib.suppress(OSError):
                    sub.rmdir()
            try:
                d.rmdir()
            except OSError as exc:
                if time.monotonic() < end:
                    time.sleep(0.1)
                    continue
                problems.append(f"cgroup {d}: {exc}")
                break
    return problems


# --- the holder's mounts and containerd -------------------------------------------------------
def _mount(*argv: str) -> str | None:
    r = subprocess.run(["mount", *argv], capture_output=True, text=True, check=False)
    return None if r.returncode == 0 else f"mount {' '.join(argv)} failed: {r.stderr.strip()}"


def write_sysctl_files(work: Path) -> None:
    """``work/sysctl/<key>`` holding each value of :data:`KUBELET_SYSCTLS` (bound over /proc/sys)."""
    (work / "sysctl").mkdir(parents=True, exist_ok=True)
    for key, value in KUBELET_SYSCTLS.items():
        (work / "sysctl" / key.replace("/", ".")).write_text(value + "\n")


def bind_sysctls(work: Path) -> str | None:
    """Inside the holder: bind each file of :func:`write_sysctl_files` over its /proc/sys entry,
    so the kubelet finds the values it wants and writes none on the host."""
    for key in KUBELET_SYSCTLS:
        target = Path("/proc/sys") / key
        if target.exists():
            err = _mount("--bind", str(work / "sysctl" / key.replace("/", ".")), str(target))
            if err:
                return err
    return None


def mount_overlays(work: Path, prepare: Callable[[str, Path], None] | None = None) -> str | None:
    """Inside the holder: an overlay over each of :data:`OVERLAY_DIRS` whose upper layer is
    ``work/overlay/<dir>/upper``; ``prepare(lower, upper)`` may put files in an upper layer first."""
    for lower in OVERLAY_DIRS:
        if not os.path.isdir(lower) or os.path.ismount(lower):
            continue
        top = work / "overlay" / lower.strip("/")
        (top / "upper").mkdir(parents=True, exist_ok=True)
        (top / "work").mkdir(parents=True, exist_ok=True)
        if prepare is not None:
            prepare(lower, top / "upper")
        err = _mount("-t", "overlay", "overlay", "-o", f"lowerdir={lower},upperdir={top / 'upper'},workdir={top / 'work'}",
                     lower)
        if err:
            return err
    return None


def start_containerd(work: Path, argv0: str = "containerd") -> subprocess.Popen[bytes]:
    """Inside the holder: start containerd with ``work/containerd.toml``, its output appended to
    ``work/containerd.log`` (the caller records its pid before :func:`wait_for_socket`)."""
    with (work / "containerd.log").open("ab") as clog:
        return subprocess.Popen([argv0, "--config", str(work / "containerd.toml")],
                                stdout=clog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def wait_for_socket(containerd: subprocess.Popen[bytes], socket: Path, timeout: float = 30) -> str | None:
    """Wait until containerd's ``socket`` exists; what failed when it exited or ``timeout`` passed."""
    end = time.monotonic() + timeout
    while not socket.exists():
        if containerd.poll() is not None or time.monotonic() > end:
            return "containerd did not start; see containerd.log"
        time.sleep(0.05)
    return None


def import_images(images: Sequence[str], socket: Path | None = None) -> str | None:
    """Inside the holder: ``ctr -n k8s.io images import`` each tarball (``socket``: containerd's,
    default ctr's own)."""
    for tarball in images:
        r = subprocess.run(["ctr", *(["--address", str(socket)] if socket else []), "-n", "k8s.io", "images",
                            "import", tarball], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            return f"ctr images import {tarball} failed: {r.stderr.strip()}"
    return None


# --- the work directory -----------------------------------------------------------------------
def remove_work(work: Path, last: Path, *, keep: bool = False) -> list[str]:
    """Remove ``work`` (unless ``keep``) when no mount under it still shows on the host (they
    lived in the holder's namespace, gone with its last process: checked anyway), and forget it
    in ``last`` when it is the lab named there. Returns what stayed."""
    problems: list[str] = []
    if not keep:
        if str(work) in Path("/proc/self/mountinfo").read_text():
            problems.append(f"mounts under {work} are still visible on the host")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if last.exists() and last.read_text().strip() == str(work):
        last.unlink()
    return problems
