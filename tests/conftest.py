"""Fixtures shared by every test area: the corpus, sandbox roots, running staticpodctl, journald.

A sandbox root is a directory laid out like a node (``<root>/etc/kubernetes/manifests`` …);
every staticpodctl/staticpodd call in the tests passes ``--root`` so nothing outside tmp_path is
touched. journald is real: entries are read back with ``journalctl -o json`` filtered by the
``STATICPODD_ROOT`` field, which is unique per test.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def corpus_dir() -> Path | None:
    """``../shared/corpus`` beside the repository (or $STATICPODD_CORPUS), None when absent."""
    env = os.environ.get("STATICPODD_CORPUS")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "corpus")
    for c in candidates:
        if (c / "manifests").is_dir():
            return c
    return None


@pytest.fixture
def corpus() -> Path:
    c = corpus_dir()
    if c is None:
        pytest.skip("../shared/corpus is absent (set STATICPODD_CORPUS to run the corpus tests)")
    return c


KUBEADM = {
    "kube-apiserver.yaml": "01-zetaoss-kubeadm-kube-apiserver.yaml",
    "kube-controller-manager.yaml": "02-zetaoss-kubeadm-kube-controller-manager.yaml",
    "kube-scheduler.yaml": "03-zetaoss-kubeadm-kube-scheduler.yaml",
    "etcd.yaml": "04-zetaoss-kubeadm-etcd.yaml",
}


@dataclass
class Sandbox:
    """A node-like root under tmp_path."""

    root: Path

    @property
    def manifests(self) -> Path:
        return self.root / "etc" / "kubernetes" / "manifests"

    @property
    def parked(self) -> Path:
        return self.manifests / ".staticpodd" / "parked"

    def write(self, name: str, data: bytes | str, mode: int = 0o600) -> Path:
        p = self.manifests / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        os.chmod(p, mode)
        return p

    def visible(self) -> list[str]:
        """Non-dot names in the manifest directory: what the kubelet reads."""
        return sorted(n for n in os.listdir(self.manifests) if not n.startswith("."))

    def snapshot(self) -> dict[str, bytes]:
        """Every file under the manifest directory (dot-area included) -> bytes."""
        out = {}
        for dirpath, _, files in os.walk(self.manifests):
            for f in files:
                p = Path(dirpath) / f
                out[str(p.relative_to(self.manifests))] = p.read_bytes()
        return out


def small_pod(name: str = "web", image: str = "nginx:1.27", namespace: str | None = None, extra: str = "") -> str:
    """A minimal valid static pod manifest (YAML)."""
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n"
        f"  name: {name}\n{ns}spec:\n  containers:\n  - name: {name}\n    image: {image}\n{extra}"
    )


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """An empty node root with an (empty) kubelet manifest directory."""
    sb = Sandbox(tmp_path / "root")
    sb.manifests.mkdir(parents=True)
    return sb


@pytest.fixture
def kubeadm(sandbox: Sandbox, corpus: Path) -> Sandbox:
    """A sandbox holding kubeadm's four control-plane manifests (corpus 01–04), 0600."""
    for name, src in KUBEADM.items():
        sandbox.write(name, (corpus / "manifests" / src).read_bytes())
    return sandbox


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def json(self) -> dict:
        lines = [ln for ln in self.out.splitlines() if ln.strip()]
        assert lines, f"no stdout (stderr: {self.err!r})"
        return json.loads(lines[-1])


@pytest.fixture
def ctl(sandbox: Sandbox) -> Callable[..., Run]:
    """Run staticpodctl in-process with ``--root <sandbox>``; returns Run(rc, out, err)."""
    from staticpodd import cli

    def run(*args: str, root: Path | None = None) -> Run:
        out, err = io.StringIO(), io.StringIO()
        argv = [*args, "--root", str(root or sandbox.root)]
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except SystemExit as exc:  # argparse usage errors
                rc = int(exc.code or 0)
        return Run(rc, out.getvalue(), err.getvalue())

    return run


def staticpodctl_cmd() -> list[str]:
    """How to start staticpodctl as a real process (the venv's interpreter, this checkout)."""
    return [sys.executable, "-m", "staticpodd.cli"]


@pytest.fixture
def ctl_proc(sandbox: Sandbox) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run staticpodctl as a real process with ``--root <sandbox>``."""

    def run(*args: str, env: dict[str, str] | None = None, input: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        e = dict(os.environ)
        e.update(env or {})
        e["PYTHONPATH"] = str(REPO)
        return subprocess.run([*staticpodctl_cmd(), *args, "--root", str(sandbox.root)], env=e,
                              input=input, capture_output=True, text=True, timeout=timeout)

    return run


JOURNAL_SOCKET = Path("/run/systemd/journal/socket")


def journal_entries(root: Path, *, want: Callable[[list[dict]], bool] | None = None,
                    timeout: float = 10.0) -> list[dict]:
    """journald entries whose STATICPODD_ROOT is ``root`` (polls until ``want(entries)``)."""
    if not JOURNAL_SOCKET.exists() or shutil.which("journalctl") is None:
        pytest.skip("journald is not running here (.ci/setup starts it)")
    deadline = time.monotonic() + timeout
    while True:
        res = subprocess.run(
            ["journalctl", "--no-pager", "-o", "json", f"STATICPODD_ROOT={root}"],
            capture_output=True, text=True, timeout=30,
        )
        entries = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
        if want is None or want(entries) or time.monotonic() > deadline:
            return entries
        time.sleep(0.2)
