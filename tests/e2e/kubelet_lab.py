"""The real-kubelet lab: containerd + a standalone kubelet watching one directory.

Test fixture only (nothing here ships). ``tests/e2e/kubelet-lab`` is the command-line wrapper::

    tests/e2e/kubelet-lab up DIR [--file-check-frequency 20s] [--node-name e2e-node]
    tests/e2e/kubelet-lab status [--lab WORK]
    tests/e2e/kubelet-lab crictl [--lab WORK] ARGS...
    tests/e2e/kubelet-lab down [--lab WORK] [--keep]

``up`` prints the lab's work directory (everything lives under it: containerd's root/state,
sockets, runc's root, the kubelet's --root-dir, pod logs, logs of both daemons, images) and
remembers it in ``/tmp/kubelet-lab.last`` for the other commands. Nothing on the host is changed
(found when the tier was first brought up; docs/development.md, "The real-kubelet tier"):

- containerd and the kubelet run in a private mount namespace (``unshare --mount --propagation
  private``), in which files holding the values the kubelet wants are bind-mounted over the
  ``/proc/sys`` entries it would write (``vm.overcommit_memory=1``, ``kernel.panic=10`` ...), a
  lab directory over ``/run/containerd`` (containerd 1.6 puts shim sockets there whatever its
  config says), and an overlay (upper layer in the lab) over each of ``/etc /var /usr /opt /srv``:
  what the kubelet and the pods write there (``hostPath`` ``FileOrCreate``/``DirectoryOrCreate``
  such as ``/etc/kubernetes/scheduler.conf``, ``/var/lib/etcd``, ``/var/log/containers``) lands in
  the lab, never on the host. So the work directory lives in ``/tmp``, outside those overlays;
- no iptables on the kubelet's PATH (it adds no netfilter rules), no CNI (hostNetwork pods only);
- the kubelet's cgroups live under a ``cgroupRoot`` of the lab's own (``/staticpodd-e2e-<id>``
  in every v1 controller), removed by ``down``;
- ``down`` stops everything by pid: kubelet, then ``crictl rmp -fa``, containerd, the lab's
  leftover ``containerd-shim-runc-v2`` processes (found by their ``-address``), the namespace
  holder; then the cgroups. When the last process of the namespace exits its mounts go with it.

Images are built locally (nothing can be pulled): a static C pause (``gcc -static``) as the
sandbox image, and an app image with Debian's ``busybox-static`` plus ``healthz`` (a Go fixture
under images/healthz: 200 on /healthz over HTTP *and* HTTPS on the component's probe port, so
kubeadm's manifests run with their probes unchanged; busybox httpd speaks no TLS and kubeadm's
probes use scheme HTTPS). Both are docker-archive tarballs imported with
``ctr -n k8s.io images import``.

The runtime is Debian's containerd 1.6 unless ``STATICPODD_E2E_CONTAINERD`` names a directory
holding ``containerd``, ``containerd-shim-runc-v2`` and ``ctr`` (``tests/e2e/build-containerd``
builds v2.4.x there): it goes first on PATH, so containerd, its shims and ctr all come from it
(the lab's version-2 configuration is migrated by containerd 2). The control-plane lab, which
imports this module, uses it too.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import background_builds
from lab_host import (  # the host side shared with tests/controlplane/cplane_lab.py
    LabError,
    _alive,
    _need,
    _stop_pid,
    _v1_controllers,
    bind_sysctls,
    hold,
    import_images,
    kill_cgroup_tasks,
    make_cgroup_root,
    mount_overlays,
    remove_cgroups,
    remove_work,
    start_containerd,
    wait_for_socket,
    write_sysctl_files,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("STATICPODD_E2E_CACHE", "/var/cache/staticpodd-e2e"))
LAST = Path("/tmp/kubelet-lab.last")

#: a containerd build to run instead of Debian's (see the module docstring)
CONTAINERD_DIR = os.environ.get("STATICPODD_E2E_CONTAINERD", "")
if CONTAINERD_DIR:
    for _prog in ("containerd", "containerd-shim-runc-v2", "ctr"):
        if not os.access(os.path.join(CONTAINERD_DIR, _prog), os.X_OK):
            raise RuntimeError(f"STATICPODD_E2E_CONTAINERD={CONTAINERD_DIR} has no {_prog}: run tests/e2e/build-containerd")
    os.environ["PATH"] = f"{CONTAINERD_DIR}:{os.environ.get('PATH', '')}"

PAUSE_IMAGE = "staticpodd.test/pause:e2e"
APP_IMAGE = "staticpodd.test/app:e2e"
DEFAULT_NODE = "e2e-node"
DEFAULT_FCF = "20s"

#: Files of a kubeadm control-plane node under /etc/kubernetes (empty: the app image reads none)
#: that kubeadm's manifests mount with hostPath type FileOrCreate, whose parent must exist.
NODE_FILES = ("scheduler.conf", "controller-manager.conf", "admin.conf", "kubelet.conf", "super-admin.conf")

#: Names the healthz fixture is installed under in the app image (manifest commands).
APP_NAMES = (
    "kube-scheduler",
    "kube-apiserver",
    "kube-controller-manager",
    "etcd",
    "kube-proxy",
    "kube-vip",
    "haproxy",
    "keepalived",
    "nginx",
    "konnectivity-server",
    "kube-addon-manager",
    "node_exporter",
    "healthz",
)


# --- binaries and images ----------------------------------------------------------------------
def bin_dir() -> Path:
    """The directory with kubelet, kubeadm and crictl: ``$STATICPODD_E2E_BIN`` (a directory, or
    ``wait:…`` for a build .ci/test runs in the background: tests/e2e/background_builds.py), else what
    ``tests/e2e/build-binaries`` prints (it builds them the first time: minutes).

    Raises LabError when they cannot be had.
    """
    env = os.environ.get("STATICPODD_E2E_BIN")
    if env:
        d = background_builds.resolve(env)  # `wait:…` from .ci/test: built in the background
    else:
        proc = subprocess.run(
            ["bash", str(HERE / "build-binaries")], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise LabError(f"tests/e2e/build-binaries failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        d = Path(proc.stdout.strip().splitlines()[-1])
    missing = [b for b in ("kubelet", "crictl") if not os.access(d / b, os.X_OK)]
    if missing:
        raise LabError(
            f"{', '.join(missing)} not found in {d}: run tests/e2e/build-binaries (or set STATICPODD_E2E_BIN)"
        )
    return d


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.hexdigest()[:16]


def _build_pause(out: Path) -> Path:
    src = (HERE / "images" / "pause.c").read_bytes()
    target = out / f"pause-{_digest(src)}"
    if not target.exists():
        gcc = _need("gcc", "gcc and libc6-dev")
        tmp = target.with_suffix(".tmp")
        proc = subprocess.run(
            [gcc, "-static", "-Os", "-o", str(tmp), str(HERE / "images" / "pause.c")],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise LabError(f"gcc -static pause.c failed (need gcc and libc6-dev): {proc.stderr[-1000:]}")
        tmp.rename(target)
    return target


def _build_healthz(out: Path) -> Path:
    src_dir = HERE / "images" / "healthz"
    src = b"".join((src_dir / n).read_bytes() for n in ("go.mod", "main.go"))
    target = out / f"healthz-{_digest(src)}"
    if not target.exists():
        go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
        if not go:
            raise LabError("go not found: the healthz image fixture is built with Go (.ci/setup installs it)")
        tmp = target.with_suffix(".tmp")
        env = {
            **os.environ,
            "CGO_ENABLED": "0",
            "GOFLAGS": "-buildvcs=false",
            "GOTOOLCHAIN": "local",
            "GOCACHE": str(CACHE / "gobuild"),
        }
        proc = subprocess.run(
            [go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp), "."],
            cwd=src_dir,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise LabError(f"go build of images/healthz failed: {proc.stderr[-1000:]}")
        tmp.rename(target)
    return target


def _tar_add(tar: tarfile.TarFile, name: str, *, data: bytes | None = None, mode: int = 0o755,
             link: str | None = None, directory: bool = False) -> None:
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uid = info.gid = 0
    if directory:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
    elif link is not None:
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, link, 0o777
        tar.addfile(info)
    else:
        assert data is not None
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))


def _docker_archive(path: Path, tag: str, files: Sequence[tuple[str, dict[str, Any]]], config: dict[str, Any]) -> None:
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kw in files:
            _tar_add(t, name, **kw)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    cfg = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tests/e2e/kubelet_lab.py"}],
    }
    cfg_bytes = json.dumps(cfg, sort_keys=True).encode()
    cfg_name = hashlib.sha256(cfg_bytes).hexdigest() + ".json"
    manifest = [{"Config": cfg_name, "RepoTags": [tag], "Layers": ["layer.tar"]}]
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as t:
        _tar_add(t, "layer.tar", data=layer_bytes, mode=0o644)
        _tar_add(t, cfg_name, data=cfg_bytes, mode=0o644)
        _tar_add(t, "manifest.json", data=json.dumps(manifest).encode(), mode=0o644)
    tmp.rename(path)


def build_images(out: Path | None = None) -> list[Path]:
    """Build the pause and app image tarballs (docker-archive), cached under
    ``$STATICPODD_E2E_CACHE/images`` by the digest of their sources. Returns their paths.

    Raises LabError naming the missing tool (gcc/libc6-dev, busybox-static, go).
    """
    out = out or CACHE / "images"
    out.mkdir(parents=True, exist_ok=True)
    pause = _build_pause(out)
    healthz = _build_healthz(out)
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise LabError("/bin/busybox not found: install the Debian package busybox-static")
    bb = busybox.read_bytes()
    if b"GLIBC_" in bb[:4096] or subprocess.run(["ldd", str(busybox)], capture_output=True, check=False).returncode == 0:
        raise LabError("/bin/busybox is dynamically linked: install busybox-static (not busybox)")
    hz = healthz.read_bytes()
    pause_tar = out / f"pause-{_digest(pause.read_bytes(), b'v1')}.tar"
    if not pause_tar.exists():
        _docker_archive(pause_tar, PAUSE_IMAGE, [("pause", {"data": pause.read_bytes()})], {"Entrypoint": ["/pause"]})
    app_tar = out / f"app-{_digest(bb, hz, b'v1')}.tar"
    if not app_tar.exists():
        applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
        files: list[tuple[str, dict[str, Any]]] = [
            ("bin", {"directory": True}),
            ("usr", {"directory": True}),
            ("usr/local", {"directory": True}),
            ("usr/local/bin", {"directory": True}),
            ("tmp", {"directory": True}),
            ("etc", {"directory": True}),
            ("etc/passwd", {"data": b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n", "mode": 0o644}),
            ("etc/group", {"data": b"root:x:0:\nnobody:x:65534:\n", "mode": 0o644}),
            ("bin/busybox", {"data": bb}),
            ("usr/local/bin/healthz", {"data": hz}),
        ]
        files += [(f"bin/{a}", {"link": "busybox"}) for a in applets if a != "busybox"]
        files += [(f"usr/local/bin/{n}", {"link": "healthz"}) for n in APP_NAMES if n != "healthz"]
        _docker_archive(
            app_tar,
            APP_IMAGE,
            files,
            {"Cmd": ["/usr/local/bin/healthz"], "Env": ["PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        )
    return [pause_tar, app_tar]


# --- the lab ----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_seconds(text: str) -> float:
    """``20s``, ``1m``, ``500ms``, ``5`` -> seconds."""
    t = text.strip()
    for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if t.endswith(suffix) and t[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(t[: -len(suffix)]) * mult
    return float(t)


@dataclass
class Lab:
    """One lab, described by its ``state.json`` in ``work``. Create with :func:`up`."""

    work: Path
    manifest_dir: Path
    node_name: str
    file_check_frequency: str
    bin: Path
    socket: Path
    read_only_port: int
    healthz_port: int
    cgroup_root: str
    pids: dict[str, int]

    # -- persistence ---------------------------------------------------------------------------
    @classmethod
    def load(cls, work: Path | str | None = None) -> Lab:
        """The lab in ``work`` (default: ``$KUBELET_LAB``, else the last ``up``)."""
        if work is None:
            work = os.environ.get("KUBELET_LAB") or (LAST.read_text().strip() if LAST.exists() else None)
        if not work:
            raise LabError("no lab: run `tests/e2e/kubelet-lab up DIR` first (or pass --lab WORK)")
        st = json.loads((Path(work) / "state.json").read_text())
        return cls(
            work=Path(st["work"]),
            manifest_dir=Path(st["manifest_dir"]),
            node_name=st["node_name"],
            file_check_frequency=st["file_check_frequency"],
            bin=Path(st["bin"]),
            socket=Path(st["socket"]),
            read_only_port=int(st["read_only_port"]),
            healthz_port=int(st["healthz_port"]),
            cgroup_root=st["cgroup_root"],
            pids={k: int(v) for k, v in st.get("pids", {}).items()},
        )

    def save(self) -> None:
        data = {
            "work": str(self.work),
            "manifest_dir": str(self.manifest_dir),
            "node_name": self.node_name,
            "file_check_frequency": self.file_check_frequency,
            "bin": str(self.bin),
            "socket": str(self.socket),
            "read_only_port": self.read_only_port,
            "healthz_port": self.healthz_port,
            "cgroup_root": self.cgroup_root,
            "pids": self.pids,
        }
        tmp = self.work / "state.json.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        tmp.rename(self.work / "state.json")

    # -- what tests use ------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def crictl_path(self) -> Path:
        return self.bin / "crictl"

    @property
    def kubelet_log(self) -> Path:
        return self.work / "kubelet.log"

    @property
    def relist_seconds(self) -> float:
        return parse_seconds(self.file_check_frequency)

    @property
    def kubelet_minor(self) -> str:
        """The lab kubelet's minor, ``"1.NN"`` (from ``kubelet --version``: "Kubernetes v1.35.4"):
        what ``staticpodctl validate --kubernetes-version`` must judge against to speak for it."""
        out = subprocess.run([str(self.bin / "kubelet"), "--version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout.split()[-1]
        major, minor = out.removeprefix("v").split(".")[:2]
        return f"{major}.{minor}"

    def pod_name(self, base: str) -> str:
        """``<metadata.name>-<node name>``."""
        return f"{base}-{self.node_name}"

    def crictl(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run crictl against the lab's containerd."""
        proc = subprocess.run(
            [str(self.crictl_path), "--runtime-endpoint", self.endpoint, "--image-endpoint", self.endpoint, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise LabError(f"crictl {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")
        return proc

    def crictl_json(self, *args: str) -> Any:
        return json.loads(self.crictl(*args, "-o", "json").stdout or "null")

    def pods(self) -> list[dict[str, Any]]:
        """``crictl pods -o json`` items (every state)."""
        return list((self.crictl_json("pods") or {}).get("items") or [])

    def containers(self) -> list[dict[str, Any]]:
        """``crictl ps -a -o json`` containers (every state)."""
        return list((self.crictl_json("ps", "-a") or {}).get("containers") or [])

    def kubelet_pods(self) -> list[dict[str, Any]]:
        """The kubelet's own view: the read-only port's ``/pods`` (PodList items, with status,
        phase, reason such as ``UnexpectedAdmissionError``, and conditions)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.read_only_port}/pods", timeout=5) as r:
            return list(json.loads(r.read()).get("items") or [])

    def healthy(self) -> bool:
        """Whether the kubelet's /healthz answers ok."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as r:
                return r.read().strip() == b"ok"
        except OSError:
            return False

    def log_offset(self) -> int:
        """The kubelet log's current size (bytes): pass to :meth:`log_since`."""
        try:
            return self.kubelet_log.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset: int) -> str:
        with self.kubelet_log.open("rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", "replace")

    def log_lines(self, offset: int = 0) -> list[tuple[float, str]]:
        """The kubelet log's lines since ``offset`` with their wall-clock times (epoch seconds,
        :func:`klog_time`); lines without a klog header (a wrapped message) are left out."""
        out = []
        for line in self.log_since(offset).splitlines():
            t = klog_time(line)
            if t is not None:
                out.append((t, line))
        return out

    def relists(self, start: float, end: float) -> list[float]:
        """When the kubelet's file source relists the manifest directory between ``start`` and
        ``end`` (epoch seconds, past or future): every ``fileCheckFrequency`` from the
        ``"Watching path"`` line of the kubelet running at ``end`` (pkg/kubelet/config/file.go:
        NewSourceFile logs it, then ``run()`` starts a ``time.NewTicker(period)``, and a Go ticker
        keeps its phase). Seen within 2 ms of the kubelet's own "Could not process manifest file"
        lines; a tick runs a little late only while its goroutine reads a watch event. At --v=2
        the kubelet logs no relist of its own. Empty when the log has no such line."""
        period = self.relist_seconds
        try:
            data = self.kubelet_log.read_bytes()
        except OSError:
            return []
        starts = []
        for line in data.split(b"\n"):
            if b'"Watching path"' in line:
                t = klog_time(line.decode("utf-8", "replace"))
                if t is not None and t <= end:
                    starts.append(t)
        if not starts or period <= 0:
            return []
        t0 = starts[-1]
        k = max(1, int((start - t0) // period))
        out = []
        while t0 + k * period <= end:
            if t0 + k * period >= start:
                out.append(t0 + k * period)
            k += 1
        return out

    def alive(self, name: str) -> bool:
        pid = self.pids.get(name)
        return bool(pid) and _alive(pid)

    # -- kubelet restart (test 6) --------------------------------------------------------------
    def stop_kubelet(self) -> None:
        """Stop the kubelet by pid (SIGTERM, then SIGKILL after 10 s); containers keep running."""
        _stop_pid(self.pids.get("kubelet"), 10)

    def start_kubelet(self, timeout: float = 60) -> None:
        """Start the kubelet again inside the lab's mount namespace (``nsenter`` into the
        namespace holder's) and wait for its /healthz."""
        holder = self.pids["holder"]
        log = self.kubelet_log.open("ab")
        proc = subprocess.Popen(
            ["nsenter", f"--mount=/proc/{holder}/ns/mnt", "--", *self._kubelet_argv()],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self._kubelet_env(),
            start_new_session=True,
        )
        log.close()
        self.pids["kubelet"] = proc.pid
        self.save()
        _wait(self.healthy, timeout, "kubelet /healthz after restart", self)

    def _kubelet_argv(self) -> list[str]:
        return [
            str(self.bin / "kubelet"),
            f"--config={self.work / 'kubelet-config.yaml'}",
            f"--root-dir={self.work / 'kubelet'}",
            f"--hostname-override={self.node_name}",
            "--v=2",
        ]

    def _kubelet_env(self) -> dict[str, str]:
        # no iptables on its PATH: it adds no netfilter rules (Debian keeps iptables in /usr/sbin)
        path = f"{self.work / 'path'}:/usr/local/bin:/usr/bin:/bin"
        return {"PATH": path, "HOME": str(self.work), "LANG": "C.UTF-8"}


def klog_time(line: str, *, now: float | None = None) -> float | None:
    """The wall-clock time (epoch seconds) of a klog line such as ``I1202 01:04:05.910572 22502
    file.go:68] ...`` (the kubelet writes local time, without a year: the year is the one of
    ``now`` that puts the line in the past), or None when ``line`` has no such header."""
    import datetime

    if len(line) < 21 or line[0] not in "IWEF" or line[5] != " " or line[8] != ":" or line[14] != ".":
        return None
    try:
        month, day = int(line[1:3]), int(line[3:5])
        hh, mm, ss, us = int(line[6:8]), int(line[9:11]), int(line[12:14]), int(line[15:21])
        ref = datetime.datetime.fromtimestamp(time.time() if now is None else now)
        stamp = datetime.datetime(ref.year, month, day, hh, mm, ss, us)
        if stamp > ref + datetime.timedelta(days=1):  # a December line read in January
            stamp = stamp.replace(year=ref.year - 1)
    except ValueError:
        return None
    return stamp.timestamp()


def _wait(cond: Any, timeout: float, what: str, lab: Lab | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    tail = ""
    if lab is not None:
        for name in ("kubelet.log", "containerd.log", "holder.log"):
            p = lab.work / name
            if p.exists():
                tail += f"\n--- {p} (tail) ---\n" + "\n".join(p.read_text(errors="replace").splitlines()[-25:])
    raise LabError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def _containerd_config(work: Path) -> str:
    return f"""version = 2
root = "{work}/containerd/root"
state = "{work}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{work}/containerd.sock"
[ttrpc]
  address = "{work}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{work}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{work}/cni/bin"
    conf_dir = "{work}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{work}/runc"
"""


def _kubelet_config(lab: Lab, port: int) -> str:
    return f"""apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: {lab.manifest_dir}
fileCheckFrequency: {lab.file_check_frequency}
containerRuntimeEndpoint: {lab.endpoint}
imageServiceEndpoint: {lab.endpoint}
cgroupDriver: cgroupfs
cgroupRoot: {lab.cgroup_root}
failSwapOn: false
failCgroupV1: false
address: 127.0.0.1
port: {port}
healthzBindAddress: 127.0.0.1
healthzPort: {lab.healthz_port}
readOnlyPort: {lab.read_only_port}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: {lab.work}/pod-logs
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
resolvConf: ""
serializeImagePulls: false
registerNode: false
"""


def up(
    manifest_dir: Path | str,
    *,
    file_check_frequency: str = DEFAULT_FCF,
    node_name: str = DEFAULT_NODE,
    work: Path | str | None = None,
    timeout: float = 90,
) -> Lab:
    """Start containerd and a standalone kubelet watching ``manifest_dir`` (created if missing).

    ``file_check_frequency``: the kubelet's relist period (default its own 20 s).
    Returns the Lab once the kubelet's /healthz answers and both images are imported.
    Raises LabError (what is missing or what failed, with the logs' tails); a failed ``up`` is
    torn down before raising.
    """
    if os.geteuid() != 0:
        raise LabError("the kubelet lab needs root (containerd, mounts, cgroups)")
    for tool, pkg in (("containerd", "containerd"), ("runc", "runc"), ("ctr", "containerd"),
                      ("unshare", "util-linux"), ("nsenter", "util-linux"), ("mount", "mount")):
        _need(tool, pkg)
    bins = bin_dir()
    images = build_images()
    manifest_dir = Path(manifest_dir).resolve()
    manifest_dir.mkdir(parents=True, exist_ok=True)
    work = Path(work) if work else Path(tempfile.mkdtemp(prefix="kubelet-lab.", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    for d in ("containerd", "runc", "kubelet", "pod-logs", "run-containerd", "sysctl", "path", "cni/bin", "cni/net.d"):
        (work / d).mkdir(parents=True, exist_ok=True)
    lab = Lab(
        work=work,
        manifest_dir=manifest_dir,
        node_name=node_name,
        file_check_frequency=file_check_frequency,
        bin=bins,
        socket=work / "containerd.sock",
        read_only_port=_free_port(),
        healthz_port=_free_port(),
        cgroup_root=f"/staticpodd-e2e-{work.name.split('.')[-1]}",
        pids={},
    )
    (work / "containerd.toml").write_text(_containerd_config(work))
    (work / "kubelet-config.yaml").write_text(_kubelet_config(lab, _free_port()))
    write_sysctl_files(work)
    make_cgroup_root(lab.cgroup_root)  # before the kubelet starts
    lab.save()
    LAST.write_text(str(work) + "\n")
    holder_log = (work / "holder.log").open("ab")
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "--", sys.executable, str(Path(__file__).resolve()),
         "_inner", str(work), *[str(i) for i in images]],
        stdout=holder_log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    holder_log.close()
    lab.pids["holder"] = holder.pid
    lab.save()
    try:
        _wait(lambda: (work / "ready").exists() or holder.poll() is not None, timeout, "containerd and the kubelet", lab)
        if holder.poll() is not None or (work / "failed").exists():
            raise LabError("the lab did not start:\n" + (work / "holder.log").read_text(errors="replace")[-3000:])
        lab = Lab.load(work)
        _wait(lab.healthy, timeout, "the kubelet's /healthz", lab)
    except BaseException:
        with contextlib.suppress(Exception):
            down(Lab.load(work), keep=True)
        raise
    return lab


def _inner(work: Path, images: list[str]) -> int:
    """Runs as the mount namespace holder (``unshare --mount``): bind mounts, containerd, image
    import, kubelet; then waits until SIGTERM. Writes the pids to state.json and ``ready``."""
    lab = Lab.load(work)

    def fail(msg: str) -> int:
        print(f"kubelet-lab: {msg}", flush=True)
        (work / "failed").write_text(msg)
        return 1

    err = bind_sysctls(work)
    if err:
        return fail(err)
    if not os.path.isdir("/run/containerd"):
        os.makedirs("/run/containerd", exist_ok=True)  # /run is tmpfs; removed again by down
        (work / "created-run-containerd").touch()
    r = subprocess.run(["mount", "--bind", str(work / "run-containerd"), "/run/containerd"],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return fail(f"bind mount over /run/containerd failed: {r.stderr.strip()}")

    def node_files(lower: str, upper: Path) -> None:
        if lower == "/etc":  # what a kubeadm control-plane node has and its manifests mount
            kube = upper / "kubernetes"
            (kube / "pki" / "etcd").mkdir(parents=True, exist_ok=True)
            for conf in NODE_FILES:
                (kube / conf).touch()

    err = mount_overlays(work, node_files)
    if err:
        return fail(err)
    cd = start_containerd(work, _need("containerd", "containerd"))
    lab.pids["containerd"] = cd.pid
    lab.save()
    err = wait_for_socket(cd, lab.socket) or import_images(images, lab.socket)
    if err:
        return fail(err)
    klog = lab.kubelet_log.open("ab")
    kl = subprocess.Popen(lab._kubelet_argv(), stdout=klog, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          env=lab._kubelet_env(), start_new_session=True)
    lab.pids["kubelet"] = kl.pid
    lab.save()
    (work / "ready").touch()
    return hold()


def _shims(work: Path) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and str(work).encode() in b" ".join(cmd):
            out.append(int(p.name))
    return out


def down(lab: Lab, *, keep: bool = False) -> list[str]:
    """Stop the lab by pid and leave nothing behind; returns what could not be cleaned (empty
    when all is well). ``keep``: keep the work directory (logs) instead of removing it."""
    problems: list[str] = []
    _stop_pid(lab.pids.get("kubelet"), 15)
    if lab.alive("containerd"):
        with contextlib.suppress(Exception):
            lab.crictl("rmp", "-fa", check=False, timeout=60)
    _stop_pid(lab.pids.get("containerd"), 15)
    for pid in _shims(lab.work):
        _stop_pid(pid, 5)
    # containers left running (a shim killed first): kill by cgroup
    kill_cgroup_tasks(lab.cgroup_root, _v1_controllers())
    _stop_pid(lab.pids.get("holder"), 10)
    time.sleep(0.1)
    # a cgroup stays busy until its last task is reaped (a container killed just now): retry a while
    problems += remove_cgroups(lab.cgroup_root, deadline=10)
    if (lab.work / "created-run-containerd").exists():
        with contextlib.suppress(OSError):
            os.rmdir("/run/containerd")
    return problems + remove_work(lab.work, LAST, keep=keep)


# --- helpers the tests share ------------------------------------------------------------------
def rewrite_for_lab(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A manifest as the lab can run it: every container image -> the local app image, and
    ``imagePullPolicy: Always`` -> ``IfNotPresent`` (nothing can be pulled). Returns the new
    document and what was changed, in words. Everything else (probes, ports, volumes) is kept."""
    import copy

    d = copy.deepcopy(doc)
    changes: list[str] = []
    spec = d.get("spec") if isinstance(d, dict) else None
    if not isinstance(spec, dict):
        return d, changes
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            if c.get("image") != APP_IMAGE:
                changes.append(f"{key}[{c.get('name')}].image {c.get('image')} -> {APP_IMAGE}")
                c["image"] = APP_IMAGE
            if c.get("imagePullPolicy") == "Always":
                c["imagePullPolicy"] = "IfNotPresent"
                changes.append(f"{key}[{c.get('name')}].imagePullPolicy Always -> IfNotPresent")
    return d, changes


def rewrite_image_text(text: str) -> str:
    """Byte-level variant for files that must stay as they are (comments, JSON, multi-doc,
    broken ones): every ``image:`` / ``"image":`` value -> the local app image."""
    import re

    text = re.sub(r'(?m)^(\s*-?\s*image:\s*)("?)[^\s"#]+("?)', lambda m: f"{m.group(1)}{m.group(2)}{APP_IMAGE}{m.group(3)}", text)
    text = re.sub(r'("image"\s*:\s*")[^"]*(")', lambda m: f"{m.group(1)}{APP_IMAGE}{m.group(2)}", text)
    text = re.sub(r"(?m)^(\s*-?\s*imagePullPolicy:\s*)Always", r"\1IfNotPresent", text)
    return text


@contextlib.contextmanager
def running(manifest_dir: Path | str, **kw: Any) -> Iterator[Lab]:
    """``with running(DIR) as lab:`` up, yield, down."""
    lab = up(manifest_dir, **kw)
    try:
        yield lab
    finally:
        down(lab)


# --- command line -----------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kubelet-lab", description="a real kubelet + containerd watching DIR")
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up", help="start containerd + kubelet watching DIR as staticPodPath")
    u.add_argument("dir")
    u.add_argument("--file-check-frequency", default=DEFAULT_FCF, help="the kubelet's relist period (default 20s)")
    u.add_argument("--node-name", default=DEFAULT_NODE)
    u.add_argument("--work", default=None, help="work directory (default: a new /tmp/kubelet-lab.*; not under /etc /var /usr /opt /srv)")
    for name in ("down", "status", "crictl"):
        s = sub.add_parser(name)
        s.add_argument("--lab", default=None, help="the lab's work directory (default: $KUBELET_LAB, else the last up)")
        if name == "down":
            s.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
        if name == "crictl":
            s.add_argument("args", nargs=argparse.REMAINDER)
    i = sub.add_parser("_inner")
    i.add_argument("work")
    i.add_argument("images", nargs="*")
    a = p.parse_args(argv)
    try:
        if a.cmd == "_inner":
            return _inner(Path(a.work), a.images)
        if a.cmd == "up":
            lab = up(a.dir, file_check_frequency=a.file_check_frequency, node_name=a.node_name, work=a.work)
            print(f"kubelet-lab: kubelet watching {lab.manifest_dir} (fileCheckFrequency {lab.file_check_frequency}, "
                  f"node {lab.node_name}), read-only port {lab.read_only_port}", file=sys.stderr)
            print(f"  crictl --runtime-endpoint {lab.endpoint} pods", file=sys.stderr)
            print(f"  staticpodctl ... --wait --crictl {lab.crictl_path} --runtime-endpoint {lab.endpoint} "
                  f"--node-name {lab.node_name}", file=sys.stderr)
            print(f"  logs: {lab.work}/kubelet.log, containerd.log; stop: kubelet-lab down", file=sys.stderr)
            print(lab.work)
            return 0
        lab = Lab.load(a.lab)
        if a.cmd == "status":
            print(json.dumps({
                "work": str(lab.work), "manifest_dir": str(lab.manifest_dir), "node_name": lab.node_name,
                "file_check_frequency": lab.file_check_frequency, "runtime_endpoint": lab.endpoint,
                "read_only_port": lab.read_only_port,
                "processes": {k: {"pid": v, "alive": lab.alive(k)} for k, v in lab.pids.items()},
                "kubelet_healthz": lab.healthy(),
            }, indent=1))
            return 0 if lab.healthy() else 1
        if a.cmd == "crictl":
            args = [x for x in a.args if x != "--"]
            return subprocess.call([str(lab.crictl_path), "--runtime-endpoint", lab.endpoint,
                                    "--image-endpoint", lab.endpoint, *args])
        if a.cmd == "down":
            problems = down(lab, keep=a.keep)
            for msg in problems:
                print(f"kubelet-lab: not cleaned: {msg}", file=sys.stderr)
            return 1 if problems else 0
    except LabError as exc:
        print(f"kubelet-lab: {exc}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
