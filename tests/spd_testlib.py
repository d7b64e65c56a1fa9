"""Helpers shared by every test area (imported as ``spd_testlib``; tests/ is on sys.path through
tests/conftest.py). Fixtures live in tests/conftest.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: When this test session began (whole seconds, a little early): pytest's tmp_path numbers
#: (pytest-of-root/pytest-N) come round again once old ones are cleaned up, and the journal
#: outlives them, so a sandbox root alone can match an earlier session's entries.
SESSION_START = int(time.time()) - 2
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


def wait_out_racy_window(monkeypatch, paths, seconds: float = 0.25) -> None:
    """Narrow the scan's racy window (``staticpodd.engine.fsfacts._RACY_NS``, 2 s: a stat signature
    is stored only for a file whose ctime is older than that) to ``seconds`` for this test, then
    sleep until every file of ``paths`` is past it. For the tests of what the stored signatures
    save, which need files past the window, not the window's size: the test that a file inside the
    window is read again keeps the real one. The engine runs in-process (``eng``, ``ctl``)."""
    from staticpodd.engine import scan

    monkeypatch.setattr(scan, "_RACY_NS", int(seconds * 1e9))
    newest = max(os.stat(p).st_ctime for p in paths)
    time.sleep(max(0.0, newest + seconds + 0.05 - time.time()))


def small_pod(name: str = "web", image: str = "nginx:1.27", namespace: str | None = None, extra: str = "") -> str:
    """A minimal valid static pod manifest (YAML)."""
    ns = f"  namespace: {namespace}\n" if namespace else ""
    return (
        "apiVersion: v1\nkind: Pod\nmetadata:\n"
        f"  name: {name}\n{ns}spec:\n  containers:\n  - name: {name}\n    image: {image}\n{extra}"
    )






@dataclass
class Run:
    rc: int
    out: str
    err: str

    def json(self) -> dict:
        lines = [ln for ln in self.out.splitlines() if ln.strip()]
        assert lines, f"no stdout (stderr: {self.err!r})"
        return json.loads(lines[-1])




def staticpodctl_cmd() -> list[str]:
    """How to start staticpodctl as a real process (the venv's interpreter, this checkout)."""
    return [sys.executable, "-m", "staticpodd.cli"]




JOURNAL_SOCKET = Path("/run/systemd/journal/socket")


def journald_alive() -> bool:
    """True when a journald answers on its socket (and journalctl exists to read entries back).

    The socket file alone proves nothing: when journald is killed its sockets stay behind and
    every send is refused (ECONNREFUSED), which sends our entries to the stderr fallback.
    """
    if shutil.which("journalctl") is None:
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.connect(str(JOURNAL_SOCKET))
    except OSError:
        return False
    finally:
        sock.close()
    return True


def journal_entries(root: Path, *, want: Callable[[list[dict]], bool] | None = None,
                    timeout: float = 10.0) -> list[dict]:
    """journald entries of this test session whose STATICPODD_ROOT is ``root`` (polls until
    ``want(entries)``)."""
    if not journald_alive():
        pytest.skip("journald is not running here (.ci/setup starts it)")
    deadline = time.monotonic() + timeout
    while True:
        res = subprocess.run(
            ["journalctl", "--no-pager", "-o", "json", f"--since=@{SESSION_START}", f"STATICPODD_ROOT={root}"],
            capture_output=True, text=True, timeout=30,
        )
        entries = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
        if want is None or want(entries) or time.monotonic() > deadline:
            return entries
        time.sleep(0.2)


def big_pod(size: int, *, name: str = "big", extra: str = "") -> bytes:
    """A valid static pod of at least ``size`` bytes (kube-system/``name``; ``extra`` goes under
    ``spec:`` before the containers): one container with as many env entries as it takes."""
    head = (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n"
            f"{extra}  containers:\n  - name: big\n    image: registry.k8s.io/pause:3.10\n    env:\n")
    out, total, i = [head], len(head), 0
    while total < size:
        entry = f"    - name: VAR_{i}\n      value: \"{'v' * 40}\"\n"
        out.append(entry)
        total += len(entry)
        i += 1
    return "".join(out).encode()


def count_decodes(monkeypatch) -> list[int]:
    """Record the size of every input this process decodes from now on (every module that
    decodes goes through :func:`staticpodd.manifest.decoding.decode` or the name
    :mod:`staticpodd.validate` imported); returns the list it appends to."""
    import staticpodd.manifest.decoding
    import staticpodd.validate

    sizes: list[int] = []
    real = staticpodd.manifest.decoding.decode

    def counting(data, *a, **kw):
        sizes.append(len(data))
        return real(data, *a, **kw)

    for module in (staticpodd.manifest.decoding, staticpodd.validate):
        monkeypatch.setattr(module, "decode", counting)
    return sizes

