"""The control-plane lab: a real one-node kubeadm control plane in namespaces of its own.

Test fixture only (nothing here ships). ``tests/controlplane/cplane-lab`` is the command-line
wrapper::

    tests/controlplane/cplane-lab up            # prints the work directory
    tests/controlplane/cplane-lab sh [CMD...]   # a shell (or CMD) inside the node's namespaces
    tests/controlplane/cplane-lab down [--keep]

What it runs (tests/controlplane/README.md says why each setting is needed): kubeadm v1.37.2's
``init`` with its real configuration file, so etcd, kube-apiserver, kube-controller-manager and
kube-scheduler run as static pods from ``/etc/kubernetes/manifests`` on a real kubelet, with
Debian's containerd and runc, and pod networking by the bridge CNI plugin. All of it runs behind
one *holder* process in its own mount, network and UTS namespaces:

- mount: a tmpfs over ``/run`` (with the host's journald socket directory bound back in, so the
  tools log to the real journal), overlays over ``/etc /var /usr /opt /srv`` whose upper layers
  live in the work directory, work-directory binds over ``/var/lib/{kubelet,containerd,etcd}``,
  and binds over the ``/proc/sys`` files the kubelet would write (its values, so it writes none);
- network: no ``dummy`` driver on these kernels, so a veth pair inside the namespace carries the
  node address (10.77.0.10/24) with a default route to a gateway that does not exist; nothing
  leaves the namespace;
- UTS: the host name ``controlplane`` is the node name (``staticpodctl --wait`` needs no
  ``--node-name``);
- no systemd as PID 1: kubeadm calls ``systemctl``; a stand-in (``systemctl`` first on kubeadm's
  PATH) answers its questions and supervises the kubelet with kubeadm's flags.

Images are built locally under the names ``kubeadm config images list`` prints: each component
image holds its static binary and Debian's busybox-static; ``pause`` exits 0 on ``-v`` (kubeadm
upgrade's health check runs it that way); ``httpd:2.4-alpine`` is busybox ``httpd -f -p 80``.

``down`` leaves nothing on the host: no process (kubelet, containers, shims, containerd, holder),
mount (they lived in the namespace), cgroup (every v1 controller *and* the ``unified`` tree) or
file (the work directory). :func:`leftovers` says what is left, for the teardown test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
E2E = REPO / "tests" / "e2e"
if str(E2E) not in sys.path:
    sys.path.insert(0, str(E2E))

import background_builds  # noqa: E402
from kubelet_lab import CACHE, _build_pause, _digest, _docker_archive  # noqa: E402
from lab_host import (  # noqa: E402
    LabError,
    _alive,
    _need,
    _stop_pid,
    bind_sysctls,
    cgroup_dirs,
    hold,
    import_images,
    make_cgroup_root,
    mount_overlays,
    remove_cgroups,
    remove_work,
    start_containerd,
    wait_for_socket,
    write_sysctl_files,
)

KUBE_VERSION = os.environ.get("STATICPODD_CP_KUBE_VERSION", "v1.37.2")
ETCD_VERSION = os.environ.get("STATICPODD_CP_ETCD_VERSION", "v3.7.3")
CRICTL_VERSION = os.environ.get("STATICPODD_CP_CRICTL_VERSION", "v1.37.0")
PROGRAMS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kubeadm")
NODE_NAME = "controlplane"
NODE_IP = "10.77.0.10"
GATEWAY = "10.77.0.1"
POD_SUBNET = "10.244.0.0/16"
HTTPD_IMAGE = "docker.io/library/httpd:2.4-alpine"
CNI_BIN = Path("/usr/lib/cni")
LAST = Path("/tmp/cplane-lab.last")
#: kube-system's static pods of a kubeadm control plane (component -> mirror pod name prefix)
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def bin_dir() -> Path:
    """The directory with the six Kubernetes programs, etcd and crictl: ``$STATICPODD_CP_BIN`` (a
    directory, or ``wait:…`` for a build .ci/test runs in the background), else what
    ``tests/e2e/build-binaries`` prints for the control plane's versions (it builds them the first
    time: about 10 min on 2 cores, then cached by version). The booted-node tier uses it too.

    Raises LabError when they cannot be had.
    """
    env = os.environ.get("STATICPODD_CP_BIN")
    if env:
        d = background_builds.resolve(env)  # `wait:…` from .ci/test: built in the background
    else:
        proc = subprocess.run(
            ["bash", str(E2E / "build-binaries")], capture_output=True, text=True, check=False,
            env={**os.environ, "KUBE_VERSION": KUBE_VERSION, "CRICTL_VERSION": CRICTL_VERSION,
                 "ETCD_VERSION": ETCD_VERSION, "KUBE_CMDS": " ".join(PROGRAMS)},
        )
        if proc.returncode != 0:
            raise LabError(f"tests/e2e/build-binaries failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        d = Path(proc.stdout.strip().splitlines()[-1])
    missing = [b for b in (*PROGRAMS, "etcd", "crictl") if not os.access(d / b, os.X_OK)]
    if missing:
        raise LabError(f"{', '.join(missing)} not found in {d}: run tests/e2e/build-binaries with "
                       "KUBE_CMDS and ETCD_VERSION (or set STATICPODD_CP_BIN)")
    return d


def image_names(bins: Path) -> dict[str, str]:
    """``kubeadm config images list`` for :data:`KUBE_VERSION`: short name -> full reference
    (``kube-apiserver`` -> ``registry.k8s.io/kube-apiserver:v1.37.2``, ``pause``, ``etcd``,
    ``coredns``)."""
    out = subprocess.run([str(bins / "kubeadm"), "config", "images", "list", "--kubernetes-version", KUBE_VERSION],
                         capture_output=True, text=True, check=False, timeout=60)
    if out.returncode != 0:
        raise LabError(f"kubeadm config images list failed: {out.stderr.strip()[-500:]}")
    names = {}
    for ref in out.stdout.split():
        short = ref.rsplit("/", 1)[-1].split(":", 1)[0]
        names[short] = ref
    return names


def _busybox() -> bytes:
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise LabError("/bin/busybox not found: install the Debian package busybox-static")
    return busybox.read_bytes()


def _userland(bb: bytes) -> list[tuple[str, dict[str, Any]]]:
    applets = subprocess.run(["/bin/busybox", "--list"], capture_output=True, text=True, check=True).stdout.split()
    files: list[tuple[str, dict[str, Any]]] = [
        ("bin", {"directory": True}), ("usr", {"directory": True}), ("usr/local", {"directory": True}),
        ("usr/local/bin", {"directory": True}), ("tmp", {"directory": True}), ("etc", {"directory": True}),
        ("var", {"directory": True}), ("www", {"directory": True}),
        ("www/index.html", {"data": b"<html><body>It works!</body></html>\n", "mode": 0o644}),
        ("etc/passwd", {"data": b"root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n", "mode": 0o644}),
        ("etc/group", {"data": b"root:x:0:\nnobody:x:65534:\n", "mode": 0o644}),
        ("bin/busybox", {"data": bb}),
    ]
    files += [(f"bin/{a}", {"link": "busybox"}) for a in applets if a != "busybox"]
    return files


def build_images(bins: Path, names: dict[str, str]) -> list[Path]:
    """Docker-archive tarballs of every image kubeadm names, plus the httpd stand-in, cached
    under ``$STATICPODD_E2E_CACHE/images`` by the digest of what they hold. Returns their paths."""
    out = CACHE / "images"
    out.mkdir(parents=True, exist_ok=True)
    bb = _busybox()
    env = {"PATH": "/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}
    tars = []
    pause = _build_pause(out).read_bytes()
    t = out / f"cp-pause-{_digest(pause, names['pause'].encode())}.tar"
    if not t.exists():
        _docker_archive(t, names["pause"], [("pause", {"data": pause})], {"Entrypoint": ["/pause"]})
    tars.append(t)
    for prog in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"):
        ref = names["etcd" if prog == "etcd" else prog]
        data = (bins / prog).read_bytes()
        t = out / f"cp-{prog}-{_digest(data, bb, ref.encode())}.tar"
        if not t.exists():
            files = _userland(bb) + [(f"usr/local/bin/{prog}", {"data": data})]
            _docker_archive(t, ref, files, {"Env": [f"PATH={env['PATH']}"]})
        tars.append(t)
    for ref, cmd in ((names.get("coredns"), ["/bin/sleep", "3600"]), (HTTPD_IMAGE, ["/bin/httpd", "-f", "-p", "80", "-h", "/www"])):
        if ref is None:
            continue
        t = out / f"cp-{ref.rsplit('/', 1)[-1].replace(':', '-')}-{_digest(bb, ref.encode(), b'v2')}.tar"
        if not t.exists():
            _docker_archive(t, ref, _userland(bb), {"Cmd": cmd, "Env": [f"PATH={env['PATH']}"]})
        tars.append(t)
    return tars


# --- configuration files ----------------------------------------------------------------------
def containerd_config(work: Path, pause: str) -> str:
    """containerd 1.6's configuration: its own root, state and sockets under ``/run/containerd``
    (a tmpfs of the namespace), the bridge CNI plugins from Debian, the real-kubelet tier's settings (tests/e2e/kubelet_lab.py)."""
    return f"""version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{work}/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "/run/runc-k8s"
"""


CNI_CONFLIST = json.dumps({
    "cniVersion": "0.4.0",
    "name": "staticpodd-cp",
    "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    ],
}, indent=1)


def kubeadm_config(cgroup_root: str) -> str:
    """kubeadm's v1beta4 configuration (docs/development.md, "The control-plane tier"): the
    veth address, images only from the node (IfNotPresent), SystemVerification ignored (an ERROR
    on cgroup v1 for kubelet >= 1.35 even with ``failCgroupV1: false``), no kube-proxy, no DNS,
    and a kubelet on cgroupfs under a cgroupRoot of the lab's own.

    ``timeouts.kubernetesAPICall``: kubeadm v1.37's wait-control-plane phase first bootstraps the
    admin ClusterRoleBinding (cmd/kubeadm/app/cmd/init.go ``Client``), polling the API server for
    that timeout (default 1 min) *before* it waits for the control plane; on a loaded 2-core
    machine the API server is not up within a minute of the kubelet's start and init fails with
    "unable to create ClusterRoleBinding: client rate limiter Wait returned an error".

    ``timeouts.controlPlaneComponentHealthCheck: 6m0s`` also sets each static pod's startupProbe
    ``failureThreshold`` (36); ``kubeadm upgrade`` does not see it (InitConfiguration is not kept
    in the cluster) and writes 24, so the session's first upgrade rewrites all four manifests."""
    return f"""apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: {NODE_IP}
  bindPort: 6443
nodeRegistration:
  name: {NODE_NAME}
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: IfNotPresent
  ignorePreflightErrors:
  - SystemVerification
timeouts:
  kubernetesAPICall: 4m0s
  controlPlaneComponentHealthCheck: 6m0s
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: {KUBE_VERSION}
networking:
  podSubnet: {POD_SUBNET}
proxy:
  disabled: true
dns:
  disabled: true
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: {cgroup_root}
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
serializeImagePulls: false
"""


SYSTEMCTL = r"""#!/bin/bash
# systemctl stand-in for kubeadm on a node whose PID 1 is not systemd (tests/controlplane).
# It answers what kubeadm asks and supervises the kubelet with kubeadm's own flags.
work=__WORK__
bins=__BINS__
verb=""; unit=""
for a in "$@"; do
  case "$a" in -*) ;; *) if [ -z "$verb" ]; then verb=$a; elif [ -z "$unit" ]; then unit=${a%.service}; fi ;; esac
done
echo "$(date +%T.%N) systemctl $*" >> "$work/systemctl.log"
pidfile="$work/kubelet.pid"
running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
stop_kubelet() {
  if running; then
    pid=$(cat "$pidfile"); kill "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}
start_kubelet() {
  running && return 0
  KUBELET_KUBEADM_ARGS=""
  [ -f /var/lib/kubelet/kubeadm-flags.env ] && . /var/lib/kubelet/kubeadm-flags.env
  args=(--config=/var/lib/kubelet/config.yaml --kubeconfig=/etc/kubernetes/kubelet.conf)
  [ -f /etc/kubernetes/bootstrap-kubelet.conf ] && args+=(--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf)
  # no iptables on its PATH: the kubelet adds no netfilter rules
  PATH="$work/kubelet-path:/usr/local/bin:/usr/bin:/bin" setsid "$bins/kubelet" "${args[@]}" $KUBELET_KUBEADM_ARGS --v=2 \
    >> "$work/kubelet.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
}
case "$verb" in
  daemon-reload|enable|disable|reset-failed) exit 0 ;;
  is-enabled) [ "$unit" = kubelet ] && { echo enabled; exit 0; }; echo disabled; exit 1 ;;
  is-active|status)
    if [ "$unit" = kubelet ] && running; then echo active; exit 0; fi
    echo inactive; exit 3 ;;
  start) [ "$unit" = kubelet ] && start_kubelet; exit 0 ;;
  stop) [ "$unit" = kubelet ] && stop_kubelet; exit 0 ;;
  restart) [ "$unit" = kubelet ] && { stop_kubelet; start_kubelet; }; exit 0 ;;
  *) echo "systemctl stand-in: $verb $unit: not supported" >&2; exit 1 ;;
esac
"""


# --- the lab ----------------------------------------------------------------------------------
@dataclass
class ControlPlane:
    """One running control plane, described by ``state.json`` in ``work``."""

    work: Path
    bin: Path
    cgroup_root: str
    holder: int

    @classmethod
    def load(cls, work: Path | str | None = None) -> ControlPlane:
        if work is None:
            work = os.environ.get("CPLANE_LAB") or (LAST.read_text().strip() if LAST.exists() else None)
        if not work:
            raise LabError("no control plane: run `tests/controlplane/cplane-lab up` first")
        st = json.loads((Path(work) / "state.json").read_text())
        return cls(work=Path(st["work"]), bin=Path(st["bin"]), cgroup_root=st["cgroup_root"], holder=int(st["holder"]))

    def save(self) -> None:
        (self.work / "state.json").write_text(json.dumps(
            {"work": str(self.work), "bin": str(self.bin), "cgroup_root": self.cgroup_root, "holder": self.holder}))

    @property
    def node_name(self) -> str:
        return NODE_NAME

    @property
    def kubelet_log(self) -> Path:
        return self.work / "kubelet.log"

    def env(self) -> dict[str, str]:
        """The environment of a command run on the node: the lab's programs first on PATH."""
        return {"PATH": f"{self.work / 'path'}:{self.bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": str(self.work / "home"), "LANG": "C.UTF-8", "KUBECONFIG": "/etc/kubernetes/admin.conf"}

    def run(self, *argv: str, check: bool = False, timeout: float = 120, input: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on the node: inside the holder's mount, network and UTS namespaces."""
        proc = subprocess.run(
            ["nsenter", f"--target={self.holder}", "--mount", "--net", "--uts", "--", *argv],
            capture_output=True, text=True, timeout=timeout, input=input, env={**self.env(), **(env or {})},
            check=False,
        )
        if check and proc.returncode != 0:
            raise LabError(f"{' '.join(argv)} failed (exit {proc.returncode}):\n{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")
        return proc

    def popen(self, *argv: str, log: Path) -> subprocess.Popen[bytes]:
        """Start ``argv`` on the node in the background, its output appended to ``log``."""
        with log.open("ab") as fh:
            return subprocess.Popen(
                ["nsenter", f"--target={self.holder}", "--mount", "--net", "--uts", "--", *argv],
                stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env(),
            )

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60, input: str | None = None,
                kubeconfig: str = "/etc/kubernetes/admin.conf") -> subprocess.CompletedProcess[str]:
        """``kubectl --kubeconfig admin.conf ARGS`` on the node."""
        return self.run(str(self.bin / "kubectl"), f"--kubeconfig={kubeconfig}", *args, check=check,
                        timeout=timeout, input=input)

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def read(self, path: str) -> bytes:
        """A file of the node (``/etc/kubernetes/...``), through the holder's root."""
        return (Path(f"/proc/{self.holder}/root") / path.lstrip("/")).read_bytes()

    def path(self, path: str) -> Path:
        """A node path as seen from the host (through the holder's mount namespace)."""
        return Path(f"/proc/{self.holder}/root") / path.lstrip("/")


def _wait(cond: Any, timeout: float, what: str, work: Path | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(Exception):
            if cond():
                return
        time.sleep(0.25)
    tail = ""
    if work is not None:
        for name in ("holder.log", "kubeadm.log", "kubelet.log", "containerd.log"):
            p = work / name
            if p.exists():
                tail += f"\n--- {name} (tail) ---\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
    raise LabError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def up(work: Path | str | None = None, *, timeout: float = 480,
       before_init: Callable[[ControlPlane], None] | None = None) -> ControlPlane:
    """Build what is missing, start the node's namespaces and containerd, run ``kubeadm init``,
    remove the control-plane taint and wait until the four static pods' mirror pods are Ready.

    ``before_init``: called once the node's namespaces and containerd are up, before ``kubeadm
    init`` (the tests start staticpodd there, as on a node where it is installed first).

    Returns the ControlPlane. Raises LabError (what is missing or failed, with logs' tails); a
    failed ``up`` is torn down before raising.
    """
    if os.geteuid() != 0:
        raise LabError("the control-plane lab needs root (namespaces, containerd, mounts, cgroups)")
    for tool, pkg in (("containerd", "containerd"), ("runc", "runc"), ("ctr", "containerd"), ("ip", "iproute2"),
                      ("unshare", "util-linux"), ("nsenter", "util-linux"), ("mount", "mount")):
        _need(tool, pkg)
    if not (CNI_BIN / "bridge").exists():
        raise LabError(f"{CNI_BIN}/bridge not found: install the Debian package containernetworking-plugins")
    bins = bin_dir()
    names = image_names(bins)
    images = build_images(bins, names)
    work = Path(work) if work else Path(tempfile.mkdtemp(prefix="cplane-lab.", dir="/tmp"))
    for d in ("path", "kubelet-path", "home", "sysctl", "journal", "var-lib/kubelet", "var-lib/containerd",
              "var-lib/etcd", "containerd-opt", "patches"):
        (work / d).mkdir(parents=True, exist_ok=True)
    cp = ControlPlane(work=work, bin=bins, cgroup_root=f"/staticpodd-cp-{work.name.split('.')[-1]}", holder=0)
    (work / "containerd.toml").write_text(containerd_config(work, names["pause"]))
    (work / "kubeadm.yaml").write_text(kubeadm_config(cp.cgroup_root))
    (work / "10-staticpodd-cp.conflist").write_text(CNI_CONFLIST)
    stand_in = work / "path" / "systemctl"
    stand_in.write_text(SYSTEMCTL.replace("__WORK__", str(work)).replace("__BINS__", str(bins)))
    stand_in.chmod(0o755)
    write_sysctl_files(work)
    make_cgroup_root(cp.cgroup_root)  # before the kubelet starts
    cp.save()
    LAST.write_text(str(work) + "\n")
    log = (work / "holder.log").open("ab")
    holder = subprocess.Popen(
        ["unshare", "--mount", "--net", "--uts", "--propagation", "private", "--", sys.executable,
         str(Path(__file__).resolve()), "_inner", str(work), *[str(i) for i in images]],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    log.close()
    cp.holder = holder.pid
    cp.save()
    try:
        _wait(lambda: (work / "ready").exists() or (work / "failed").exists() or holder.poll() is not None,
              90, "the node's namespaces and containerd", work)
        if holder.poll() is not None or (work / "failed").exists():
            raise LabError("the node did not start:\n" + (work / "holder.log").read_text(errors="replace")[-3000:])
        if before_init is not None:
            before_init(cp)
        t0 = time.monotonic()
        init = cp.run(str(bins / "kubeadm"), "init", f"--config={work / 'kubeadm.yaml'}", "--v=1", timeout=timeout)
        (work / "kubeadm.log").write_text(init.stdout + init.stderr)
        if init.returncode != 0:
            raise LabError(f"kubeadm init failed (exit {init.returncode}):\n{init.stdout[-2000:]}\n{init.stderr[-3000:]}")
        cp.kubectl("taint", "nodes", NODE_NAME, "node-role.kubernetes.io/control-plane:NoSchedule-")
        wait_ready(cp, timeout=timeout - (time.monotonic() - t0))
    except BaseException:
        with contextlib.suppress(Exception):
            down(cp, keep=True)
        raise
    return cp


def mirror_ready(cp: ControlPlane, component: str) -> bool:
    """Whether the mirror pod ``<component>-<node>`` in kube-system reports Ready=True."""
    r = cp.kubectl("get", "pod", "-n", "kube-system", f"{component}-{NODE_NAME}", "-o", "json", check=False)
    if r.returncode != 0:
        return False
    conds = json.loads(r.stdout).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def wait_ready(cp: ControlPlane, timeout: float = 180) -> None:
    """Wait until the node is Ready and every control-plane mirror pod is Ready."""
    def node_ready() -> bool:
        n = cp.kubectl_json("get", "node", NODE_NAME)
        return any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])

    _wait(node_ready, max(timeout, 30), "the Node to be Ready", cp.work)
    for c in COMPONENTS:
        _wait(lambda c=c: mirror_ready(cp, c), max(timeout, 30), f"the mirror pod {c}-{NODE_NAME} to be Ready", cp.work)


def _inner(work: Path, images: list[str]) -> int:
    """Runs as the namespace holder: hostname, network, mounts, containerd, image import; then
    waits for SIGTERM, reaping children. Writes ``ready`` (or ``failed`` with the reason)."""
    def fail(msg: str) -> int:
        print(f"cplane-lab: {msg}", flush=True)
        (work / "failed").write_text(msg)
        return 1

    def sh(*argv: str) -> str | None:
        r = subprocess.run(list(argv), capture_output=True, text=True, check=False)
        return None if r.returncode == 0 else f"{' '.join(argv)}: {r.stderr.strip()}"

    try:
        import socket as _socket

        _socket.sethostname(NODE_NAME)
    except OSError as exc:
        return fail(f"sethostname: {exc}")
    for argv in (["ip", "link", "set", "lo", "up"],
                 ["ip", "link", "add", "cp0", "type", "veth", "peer", "name", "cp1"],
                 ["ip", "addr", "add", f"{NODE_IP}/24", "dev", "cp0"],
                 ["ip", "link", "set", "cp0", "up"], ["ip", "link", "set", "cp1", "up"],
                 ["ip", "route", "add", "default", "via", GATEWAY]):
        err = sh(*argv)
        if err:
            return fail(err)
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")  # this namespace's own
    err = bind_sysctls(work)
    if err:
        return fail(err)
    # /run: a tmpfs of the node's own, with the host's journald sockets bound back in
    journal = Path("/run/systemd/journal")
    if journal.is_dir():
        err = sh("mount", "--bind", str(journal), str(work / "journal"))
        if err:
            return fail(err)
    err = sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    if err:
        return fail(err)
    if journal.parent.parent.exists():
        journal.mkdir(parents=True, exist_ok=True)
        err = sh("mount", "--bind", str(work / "journal"), str(journal))
        if err:
            return fail(err)
    err = mount_overlays(work)
    if err:
        return fail(err)
    for name in ("kubelet", "containerd", "etcd"):
        Path(f"/var/lib/{name}").mkdir(parents=True, exist_ok=True)
        err = sh("mount", "--bind", str(work / "var-lib" / name), f"/var/lib/{name}")
        if err:
            return fail(err)
    Path("/etc/cni/net.d").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(work / "10-staticpodd-cp.conflist", "/etc/cni/net.d/10-staticpodd-cp.conflist")
    Path("/run/containerd").mkdir(parents=True, exist_ok=True)
    cd = start_containerd(work)
    (work / "containerd.pid").write_text(str(cd.pid))
    err = wait_for_socket(cd, Path("/run/containerd/containerd.sock")) or import_images(images)
    if err:
        return fail(err)
    (work / "ready").touch()
    return hold(subreaper=True)  # the kubelet's zombies are ours


def _ns_pids(holder: int) -> list[int]:
    """Every process in the holder's network namespace (the kubelet, containerd, shims, pods)."""
    try:
        netns = os.readlink(f"/proc/{holder}/ns/net")
    except OSError:
        return []
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != holder:
            with contextlib.suppress(OSError):
                if os.readlink(p / "ns/net") == netns:
                    out.append(int(p.name))
    return out


def down(cp: ControlPlane, *, keep: bool = False) -> list[str]:
    """Stop everything by pid and leave nothing on the host; returns what could not be cleaned.

    Order: the kubelet (so it restarts nothing), every pod (crictl rmp -fa), containerd, then
    whatever else still lives in the node's network namespace (shims, containers), the holder
    (its mounts go with it), the cgroups in every hierarchy, and the work directory."""
    with contextlib.suppress(Exception):
        pid = int((cp.work / "kubelet.pid").read_text())
        _stop_pid(pid, 15)
    if cp.holder and _alive(cp.holder):
        with contextlib.suppress(Exception):
            cp.run(str(cp.bin / "crictl"), "--runtime-endpoint", "unix:///run/containerd/containerd.sock",
                   "rmp", "-fa", timeout=90)
    with contextlib.suppress(Exception):
        _stop_pid(int((cp.work / "containerd.pid").read_text()), 15)
    if cp.holder:
        for pid in _ns_pids(cp.holder):
            _stop_pid(pid, 5)
        _stop_pid(cp.holder, 10)
    return remove_cgroups(cp.cgroup_root, deadline=30, kill=True) + remove_work(cp.work, LAST, keep=keep)


def leftovers(cp: ControlPlane) -> list[str]:
    """What of this lab is still on the host: processes, cgroups, mounts, the work directory."""
    out = []
    if cp.holder and _alive(cp.holder):
        out.append(f"holder process {cp.holder}")
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):
                if str(cp.work).encode() in (p / "cmdline").read_bytes():
                    out.append(f"process {p.name}")
    out += [f"cgroup {d}" for d in cgroup_dirs(cp.cgroup_root) if d.exists()]
    if str(cp.work) in Path("/proc/self/mountinfo").read_text():
        out.append(f"mounts under {cp.work}")
    if cp.work.exists():
        out.append(f"work directory {cp.work}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cplane-lab", description="a real one-node kubeadm control plane")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("up")
    s = sub.add_parser("sh")
    s.add_argument("argv", nargs=argparse.REMAINDER)
    d = sub.add_parser("down")
    d.add_argument("--keep", action="store_true")
    i = sub.add_parser("_inner")
    i.add_argument("work")
    i.add_argument("images", nargs="*")
    a = p.parse_args(argv)
    try:
        if a.cmd == "_inner":
            return _inner(Path(a.work), a.images)
        if a.cmd == "up":
            cp = up()
            print(f"cplane-lab: kubeadm {KUBE_VERSION} control plane on node {NODE_NAME} ({NODE_IP}); "
                  "run `tests/controlplane/cplane-lab sh` for a shell on the node", file=sys.stderr)
            print(cp.work)
            return 0
        cp = ControlPlane.load()
        if a.cmd == "sh":
            return subprocess.call(["nsenter", f"--target={cp.holder}", "--mount", "--net", "--uts", "--",
                                    *(a.argv or ["/bin/bash"])], env={**os.environ, **cp.env()})
        if a.cmd == "down":
            problems = down(cp, keep=a.keep)
            for m in problems:
                print(f"cplane-lab: not cleaned: {m}", file=sys.stderr)
            return 1 if problems else 0
    except LabError as exc:
        print(f"cplane-lab: {exc}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
