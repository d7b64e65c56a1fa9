"""Fixtures for the config-management tests: a sandbox --root, the corpus, and real tool runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent


def corpus_dir() -> Path:
    env = os.environ.get("STATICPODD_CORPUS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"


@pytest.fixture(scope="session")
def corpus() -> Path:
    d = corpus_dir()
    if not (d / "manifests").is_dir():
        pytest.skip(f"corpus not found at {d} (set STATICPODD_CORPUS)")
    return d


@pytest.fixture(scope="session")
def staticpodctl() -> Path:
    exe = VENV_BIN / "staticpodctl"
    if not exe.exists():
        pytest.skip(f"{exe} is missing: install the project into the virtualenv (bash .ci/setup)")
    return exe


@dataclass
class Sandbox:
    """A --root under tmp_path with the kubelet's directory and the manifests to deploy."""

    root: Path
    manifest_dir: Path
    work: Path
    env: dict[str, str]

    def live(self, name: str = "kube-scheduler.yaml") -> Path:
        return self.manifest_dir / name

    def snapshot(self) -> dict[str, tuple[str, int, int]]:
        """{name: (sha256, inode, mtime_ns)} of every entry of the manifest directory, dot-names too."""
        out = {}
        for entry in sorted(os.listdir(self.manifest_dir)):
            p = self.manifest_dir / entry
            if p.is_file():
                st = p.stat()
                out[entry] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_ino, st.st_mtime_ns)
        return out

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``staticpodctl ARGS --root ROOT`` (JSON-parsable when --json is among ARGS)."""
        return subprocess.run(
            ["staticpodctl", *args, "--root", str(self.root)],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            cwd=self.work,
        )


@pytest.fixture
def sandbox(tmp_path: Path, staticpodctl: Path) -> Sandbox:
    root = tmp_path / "root"
    mdir = root / "etc" / "kubernetes" / "manifests"
    mdir.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["STATICPODD_NO_JOURNAL"] = "1"  # the CM tests do not read the journal; keep it clean
    return Sandbox(root=root, manifest_dir=mdir, work=work, env=env)


@dataclass
class PlaybookRun:
    rc: int
    out: dict[str, Any]
    stderr: str

    def task(self, name: str) -> dict[str, Any]:
        hits = [t for t in self.out["tasks"] if t["task"] == name]
        assert len(hits) == 1, f"task {name!r}: {[t['task'] for t in self.out['tasks']]}"
        return hits[0]

    @property
    def stats(self) -> dict[str, int]:
        return self.out["stats"]["localhost"]


@pytest.fixture
def run_playbook(sandbox: Sandbox, tmp_path: Path) -> Callable[..., PlaybookRun]:
    """``run_playbook("apply.yml", {"source": ...}, check=False, diff=False)`` with real ansible-core.

    Offline and hermetic: no Galaxy collections, no ansible.cfg, ANSIBLE_HOME and temp dirs
    under tmp_path, the test's Python as the module interpreter, a JSON stdout callback shipped
    in tests/cm/ansible/callback_plugins (ansible-core ships none).
    """
    exe = VENV_BIN / "ansible-playbook"
    if not exe.exists():
        pytest.skip(f"{exe} is missing (ansible-core is in the test extra)")
    home = tmp_path / "ansible-home"
    (home / "tmp").mkdir(parents=True)
    (home / "collections").mkdir()
    env = dict(sandbox.env)
    env.update(
        ANSIBLE_CONFIG=str(home / "none.cfg"),
        ANSIBLE_HOME=str(home),
        ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
        ANSIBLE_REMOTE_TMP=str(home / "tmp"),
        ANSIBLE_COLLECTIONS_PATH=str(home / "collections"),
        ANSIBLE_CALLBACK_PLUGINS=str(HERE / "ansible" / "callback_plugins"),
        ANSIBLE_STDOUT_CALLBACK="cm_json",
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_DEPRECATION_WARNINGS="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
    )

    def run(playbook: str, extra: dict[str, Any], *, check: bool = False, diff: bool = False) -> PlaybookRun:
        args = [str(exe), "-i", "localhost,", str(HERE / "ansible" / playbook), "-e", json.dumps(extra)]
        if check:
            args.append("--check")
        if diff:
            args.append("--diff")
        proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=sandbox.work, timeout=300)
        start = proc.stdout.find("{")
        assert start >= 0, f"no JSON from ansible-playbook (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return PlaybookRun(proc.returncode, json.loads(proc.stdout[start:]), proc.stderr)

    return run


@pytest.fixture
def scheduler(corpus: Path, sandbox: Sandbox) -> tuple[Path, Path, Path]:
    """(good, changed, invalid) manifests for kube-scheduler under the sandbox's work dir.

    good: kubeadm's kube-scheduler from the corpus; changed: the same with one flag flipped;
    invalid: the same with a TAB in the indentation of its image line (the corpus's case B22a:
    the kubelet cannot parse it and drops the running pod at the next relist).
    """
    good = sandbox.work / "kube-scheduler.yaml"
    shutil.copyfile(corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml", good)
    changed = sandbox.work / "kube-scheduler-changed.yaml"
    text = good.read_text()
    assert "--leader-elect=true" in text
    changed.write_text(text.replace("--leader-elect=true", "--leader-elect=false"))
    invalid = sandbox.work / "kube-scheduler-invalid.yaml"
    assert "\n    image: " in text
    invalid.write_text(text.replace("\n    image: ", "\n\timage: ", 1))
    return good, changed, invalid


# ---- the staticpodd.node collection (test_collection*.py) ------------------------------------------

from collection_harness import Fleet, ansible_bin, build_collection, install_collection, make_fleet  # noqa: E402


@pytest.fixture(scope="session")
def ansible_venv() -> Path:
    """bin/ of the venv with ansible-core of its own (STATICPODD_ANSIBLE_BIN, else .venv-ansible/bin)."""
    return ansible_bin()


@pytest.fixture(scope="session")
def collection(ansible_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(tarball, collections path): packaging/ansible built with ansible-galaxy and installed from the tarball."""
    base = tmp_path_factory.mktemp("collection")
    tarball = build_collection(ansible_venv, base / "dist")
    return tarball, install_collection(ansible_venv, tarball, base / "collections")


@pytest.fixture
def fleet(tmp_path: Path, ansible_venv: Path, collection: tuple[Path, Path], staticpodctl: Path, corpus: Path):
    """Three sandbox control-plane nodes cp-1..cp-3 in one inventory (group control_plane)."""
    f: Fleet = make_fleet(tmp_path, ansible_venv, collection[1], ["cp-1", "cp-2", "cp-3"])
    yield f
    f.stop_daemons()


@pytest.fixture
def probe_server():
    """A real HTTP server on 127.0.0.1 answering 200 (the stand-in runtime's pods' probes)."""
    from proof_fakes import ProbeServer

    srv = ProbeServer([200])
    yield srv
    srv.close()
