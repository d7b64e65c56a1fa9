"""Harness for the staticpodd.node collection tests: a venv with ansible-core of its own, the
collection built into a tarball and installed from it, and a fleet of sandbox ``--root`` nodes in
one inventory (every host ``ansible_connection: local``; each has its own root, node name and
stand-in crictl, see standin_runtime.py).

The ansible-core venv is ``$STATICPODD_ANSIBLE_BIN`` (its bin directory), else ``<repo>/.venv-ansible/bin``
(.ci/test creates it with ``pip install ansible-core``, as it creates Salt's).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COLLECTION_SRC = REPO / "packaging" / "ansible"
PLAYBOOKS = HERE / "ansible" / "collection"
VENV_BIN = Path(sys.executable).parent  # the project's venv: staticpodctl, staticpodd


def ansible_bin() -> Path:
    """The bin directory of the venv holding ansible-core (fails the test when there is none)."""
    env = os.environ.get("STATICPODD_ANSIBLE_BIN")
    path = Path(env) if env else REPO / ".venv-ansible" / "bin"
    if not (path / "ansible-playbook").exists():
        pytest.skip(
            f"no ansible-core venv at {path}: run .ci/test, or `python3 -m venv .venv-ansible && "
            ".venv-ansible/bin/pip install ansible-core`, or set STATICPODD_ANSIBLE_BIN"
        )
    return path


def tree_digest(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every regular file under ``root`` (dot-directories, the store too)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@dataclass
class Node:
    """One sandbox control-plane node: a --root with the kubelet's directory."""

    name: str
    root: Path
    crictl: Path | None = None

    @property
    def manifest_dir(self) -> Path:
        return self.root / "etc" / "kubernetes" / "manifests"

    def live(self, name: str = "kube-scheduler.yaml") -> Path:
        return self.manifest_dir / name

    def parked(self, name: str = "kube-scheduler.yaml") -> Path:
        return self.manifest_dir / ".staticpodd" / "parked" / name

    def ctl(self, *args: str, check: bool = False) -> dict[str, Any]:
        """``staticpodctl ARGS --root ROOT --json`` -> its JSON reply (plus ``_rc``)."""
        proc = subprocess.run(
            [str(VENV_BIN / "staticpodctl"), *args, "--root", str(self.root), "--json"],
            capture_output=True, text=True, check=False, env=_node_env(),
        )
        reply = json.loads(proc.stdout.strip().splitlines()[-1])
        reply["_rc"] = proc.returncode
        if check:
            assert reply["ok"], (args, reply, proc.stderr)
        return reply

    def history(self, component: str = "kube-scheduler") -> list[dict[str, Any]]:
        return self.ctl("history", component)["versions"]

    def snapshot(self) -> dict[str, tuple[str, int, int]]:
        """{name: (sha256, inode, mtime_ns)} of the manifest directory's files (what the kubelet reacts to)."""
        out = {}
        for entry in sorted(os.listdir(self.manifest_dir)):
            p = self.manifest_dir / entry
            if p.is_file():
                st = p.stat()
                out[entry] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_ino, st.st_mtime_ns)
        return out

    def directory(self) -> dict[str, str]:
        """sha256 of every file under the manifest directory, its .staticpodd area (parked, staging) too."""
        return tree_digest(self.manifest_dir)

    def everything(self) -> dict[str, str]:
        """sha256 of every file under the root except the run directory's own (lock, heartbeat)."""
        return {k: v for k, v in tree_digest(self.root).items() if not k.startswith("run/")}


def _node_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHON"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["STATICPODD_NO_JOURNAL"] = "1"
    return env


@dataclass
class Run:
    """One ansible-playbook run: rc, the cm_json callback's object, stderr."""

    rc: int
    out: dict[str, Any]
    stderr: str

    def results(self, task: str) -> dict[str, dict[str, Any]]:
        """{host: {"status", "result"}} of the task named ``task`` (loop items: the last one per host)."""
        hits = {t["host"]: t for t in self.out["tasks"] if t["task"] == task}
        assert hits, f"task {task!r} did not run: {[t['task'] for t in self.out['tasks']]}"
        return hits

    def one(self, task: str, host: str) -> dict[str, Any]:
        hits = [t for t in self.out["tasks"] if t["task"] == task and t["host"] == host]
        assert len(hits) == 1, (task, host, [(t["task"], t["host"]) for t in self.out["tasks"]])
        return hits[0]

    def stats(self, host: str) -> dict[str, int]:
        return self.out["stats"].get(host, {})


@dataclass
class Fleet:
    """Sandbox nodes in one inventory, and the way to run playbooks against them."""

    nodes: list[Node]
    inventory: Path
    env: dict[str, str]
    bin: Path
    work: Path
    daemons: list[subprocess.Popen] = field(default_factory=list)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def playbook(self, playbook: str | Path, extra: dict[str, Any] | None = None, *, check: bool = False,
                 diff: bool = False, limit: str | None = None, env: dict[str, str] | None = None) -> Run:
        """Run ``ansible-playbook`` (the venv's) on the fleet's inventory with the cm_json callback."""
        if Path(playbook).is_absolute() or not str(playbook).endswith(".yml"):
            path = str(playbook)  # a file, or a playbook of an installed collection (staticpodd.node.rolling_drill)
        else:
            path = str(PLAYBOOKS / playbook)
        args = [str(self.bin / "ansible-playbook"), "-i", str(self.inventory), path,
                "-e", json.dumps(extra or {})]
        if check:
            args.append("--check")
        if diff:
            args.append("--diff")
        if limit:
            args += ["--limit", limit]
        proc = subprocess.run(args, env=dict(self.env, **(env or {})), capture_output=True, text=True,
                              cwd=self.work, timeout=600)
        start = proc.stdout.find("{")
        assert start >= 0, f"no JSON from ansible-playbook (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return Run(proc.returncode, json.loads(proc.stdout[start:]), proc.stderr)

    def start_daemon(self, node: Node) -> subprocess.Popen:
        """The real staticpodd on ``node`` (foreground, no systemd); returns once its heartbeat says running."""
        log = open(node.root.parent / f"staticpodd-{node.name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(node.root)],
                                env=_node_env(), stdout=subprocess.DEVNULL, stderr=log, cwd=str(REPO))
        self.daemons.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"staticpodd on {node.name} exited {proc.returncode}")
            if node.ctl("status")["daemon"].get("running"):
                return proc
            time.sleep(0.1)
        pytest.fail(f"staticpodd on {node.name} did not report running within 30 s")

    def stop_daemons(self) -> None:
        for proc in self.daemons:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.daemons.clear()


def build_collection(bindir: Path, out: Path) -> Path:
    """``ansible-galaxy collection build packaging/ansible`` into ``out``; returns the tarball."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([str(bindir / "ansible-galaxy"), "collection", "build", str(COLLECTION_SRC),
                           "--output-path", str(out), "--force"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    version = yaml.safe_load((COLLECTION_SRC / "galaxy.yml").read_text())["version"]
    tarball = out / f"staticpodd-node-{version}.tar.gz"
    assert tarball.is_file(), proc.stdout
    return tarball


def install_collection(bindir: Path, tarball: Path, dest: Path) -> Path:
    """Install the tarball (offline: a local file, no dependencies) under ``dest``; returns ``dest``."""
    proc = subprocess.run([str(bindir / "ansible-galaxy"), "collection", "install", "-p", str(dest), str(tarball),
                           "--force", "--offline"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest


def ansible_env(home: Path, collections: Path, bindir: Path) -> dict[str, str]:
    """A hermetic environment for ansible-playbook: no ansible.cfg, no Galaxy, everything under ``home``."""
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = _node_env()
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    env.update(
        ANSIBLE_CONFIG=str(home / "none.cfg"),
        ANSIBLE_HOME=str(home),
        ANSIBLE_LOCAL_TEMP=str(home / "tmp"),
        ANSIBLE_REMOTE_TMP=str(home / "tmp"),
        ANSIBLE_COLLECTIONS_PATH=str(collections),
        ANSIBLE_CALLBACK_PLUGINS=str(HERE / "ansible" / "callback_plugins"),
        ANSIBLE_STDOUT_CALLBACK="cm_json",
        ANSIBLE_PYTHON_INTERPRETER=str(bindir / "python"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_RETRY_FILES_ENABLED="0",
        ANSIBLE_DEPRECATION_WARNINGS="0",
        ANSIBLE_LOCALHOST_WARNING="0",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
        ANSIBLE_HOST_KEY_CHECKING="0",
    )
    return env


def make_fleet(tmp: Path, bindir: Path, collections: Path, names: list[str]) -> Fleet:
    """Sandbox nodes ``names`` (group control_plane) with a stand-in crictl each, and their inventory."""
    import standin_runtime

    nodes = []
    hosts: dict[str, Any] = {}
    for name in names:
        root = tmp / "nodes" / name / "root"
        node = Node(name, root)
        node.manifest_dir.mkdir(parents=True)
        node.crictl = standin_runtime.install(tmp / "nodes" / name / "runtime", node.manifest_dir, name)
        nodes.append(node)
        hosts[name] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": str(bindir / "python"),
            "staticpodd_root": str(root),
            "staticpodd_node_name": name,
            "staticpodd_crictl": str(node.crictl),
        }
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"control_plane": {"hosts": hosts}}}}))
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    env = ansible_env(tmp / "ansible-home", collections, bindir)
    return Fleet(nodes, inventory, env, bindir, work)


def scheduler_manifest(corpus: Path, probe_port: int | None = None) -> str:
    """kubeadm's kube-scheduler (corpus); with ``probe_port``, its startup/liveness probes point at a
    real HTTP server on 127.0.0.1:``probe_port`` every second (the stand-in runtime runs no scheduler
    to answer on 10259)."""
    text = (corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml").read_text()
    if probe_port is None:
        return text
    doc = yaml.safe_load(text)
    c = doc["spec"]["containers"][0]
    probe = {"httpGet": {"host": "127.0.0.1", "port": probe_port, "path": "/healthz", "scheme": "HTTP"}}
    c["startupProbe"] = {**probe, "periodSeconds": 1, "failureThreshold": 3, "timeoutSeconds": 1}
    c["livenessProbe"] = {**probe, "periodSeconds": 1, "failureThreshold": 3, "timeoutSeconds": 1}
    return yaml.safe_dump(doc, sort_keys=False)


def copy_collection_for_ansible_test(dest: Path) -> Path:
    """The collection under ``dest/ansible_collections/staticpodd/node`` (ansible-test needs that shape)."""
    target = dest / "ansible_collections" / "staticpodd" / "node"
    shutil.copytree(COLLECTION_SRC, target, ignore=shutil.ignore_patterns("tests/output", "*.tar.gz", "__pycache__"))
    return target


def corpus_dir_or_exit() -> Path:
    """../shared/corpus (or $STATICPODD_CORPUS) for scripts outside pytest; exits when absent."""
    env = os.environ.get("STATICPODD_CORPUS")
    path = Path(env) if env else REPO.parent / "shared" / "corpus"
    if not (path / "manifests").is_dir():
        sys.exit(f"corpus not found at {path} (set STATICPODD_CORPUS)")
    return path
