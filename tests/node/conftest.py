"""Fixtures of the booted-node tests: the cached Debian 12 root, kubeadm, two .deb versions.

Everything is real: debootstrap's root booted by systemd-nspawn (systemd 252 as PID 1), the
.deb built by packaging/build-deb.sh from the tracked files and installed with dpkg, kubeadm
v1.37.2 from the control-plane tier's build (tests/controlplane/cplane_lab.py ``bin_dir``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "controlplane"))
import cplane_lab  # noqa: E402  (its binaries: one build serves both tiers)
from nodelib import HOST_PATH, REPO, BootedNode, build_root

from staticpodd import __version__


def _need_host_tools() -> None:
    if os.geteuid() != 0:
        pytest.skip("boots a container: needs root")
    for tool in ("systemd-nspawn", "debootstrap", "dpkg-buildpackage", "nsenter"):
        if shutil.which(tool, path=HOST_PATH) is None:
            pytest.skip(f"{tool} not installed (apt: .ci/apt-packages.txt)")


@pytest.fixture(scope="session")
def node_root() -> Path:
    """The Debian 12 root (tests/node/build-root; cold: a few minutes, then cached)."""
    _need_host_tools()
    return build_root()


@pytest.fixture(scope="session")
def kube_bin() -> Path:
    """The directory holding kubeadm and kubelet v1.37.2: the control-plane tier's build
    (``cplane_lab.bin_dir``: ``$STATICPODD_CP_BIN``, which .ci/test sets, else built with the
    same settings)."""
    _need_host_tools()
    try:
        return cplane_lab.bin_dir()
    except cplane_lab.LabError as exc:
        failed = str(exc)
    pytest.fail(failed, pytrace=False)


@pytest.fixture(scope="session")
def debs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"old": staticpodd_<v>_all.deb, "new": staticpodd_<v>+node1_all.deb}`` in one directory
    (bound read-only into each node), plus ``kubeadm.yaml`` for kubeadm's phases there."""
    _need_host_tools()
    out = tmp_path_factory.mktemp("node-debs")
    built: dict[str, Path] = {}
    for key, version in (("old", None), ("new", f"{__version__}+node1")):
        env = {"PATH": HOST_PATH, "HOME": os.environ.get("HOME", "/root"), "LC_ALL": "C.UTF-8", "OUT": str(out)}
        if version:
            env["DEB_VERSION"] = version
        r = subprocess.run(["bash", str(REPO / "packaging/build-deb.sh")], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"build-deb.sh failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
        name = f"staticpodd_{version or __version__}_all.deb"
        assert (out / name).is_file(), r.stdout
        built[key] = out / name
    (out / "kubeadm.yaml").write_text(KUBEADM_CONFIG)
    built["kubeadm_config"] = out / "kubeadm.yaml"
    return built


# kubeadm's phases need an address (the node has only a loopback: --private-network) and a
# version (no network to look one up); imagePullPolicy Never: the image check looks, never pulls.
KUBEADM_CONFIG = """\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
  bindPort: 6443
nodeRegistration:
  name: staticpodd-node
  imagePullPolicy: Never
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: """ + cplane_lab.KUBE_VERSION + "\n"


@pytest.fixture
def node(node_root: Path, debs: dict[str, Path], kube_bin: Path, tmp_path: Path) -> Iterator[BootedNode]:
    """A freshly booted node (its own overlay: nothing carries over between tests), with the
    .deb directory and kubeadm's directory bound read-only at their host paths."""
    n = BootedNode(node_root, tmp_path / "node", binds=(debs["old"].parent, kube_bin))
    n.boot()
    try:
        yield n
    finally:
        n.shutdown()
