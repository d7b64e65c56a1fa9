"""A stand-in kubelet + container runtime for one sandbox node, answered through ``crictl``.

No kubelet or container runtime can run in these tests (the real-kubelet tier is tests/e2e), so
``staticpodctl --wait`` is proven against this stand-in, as tests/proof does: each node gets a
``crictl`` executable (:func:`install`) that, on every call, first plays the kubelet on that node's
manifest directory and then answers with tests/proof/proof_fakes.py's stand-in crictl (the same
protojson shapes real crictl prints):

- every non-dot regular file in the directory that parses as a Pod runs as one ready sandbox named
  ``<metadata.name>-<node name>`` whose ``kubernetes.io/config.hash`` hashes the node name, the full
  file path and the bytes (docs/kubelet-contract.md "Identity and restarts"), with one running container per
  ``spec.containers`` entry, created when the stand-in first saw those bytes;
- a file that goes away, or whose bytes change, leaves its old sandbox NOTREADY and its containers
  exited (docs/kubelet-contract.md, seen on a real kubelet in tests/e2e: removing a manifest stops the pod; a change recreates it under a new UID).

Its memory is a JSON file per node; the timeline file proof_fakes' crictl reads is rewritten with
one phase (the present) before each call.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROOF = HERE.parent / "proof"


def install(bindir: Path, manifest_dir: Path, node_name: str, python: str = sys.executable) -> Path:
    """Write ``bindir/crictl`` for one node; returns its path. Its state lives in ``bindir``."""
    sys.path.insert(0, str(PROOF))
    from proof_fakes import FAKE_CRICTL

    bindir.mkdir(parents=True, exist_ok=True)
    fake = bindir / "proof-fake-crictl"
    fake.write_text(FAKE_CRICTL.replace("__PYTHON__", python))
    fake.chmod(0o755)
    exe = bindir / "crictl"
    exe.write_text(
        f"#!{python}\n"
        "import os, sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import standin_runtime\n"
        f"standin_runtime.main({str(bindir)!r}, {str(manifest_dir)!r}, {node_name!r}, sys.argv[1:])\n"
    )
    exe.chmod(0o755)
    return exe


def _pods_in(manifest_dir: Path) -> dict[str, dict]:
    import yaml

    out: dict[str, dict] = {}
    try:
        names = sorted(os.listdir(manifest_dir))
    except FileNotFoundError:
        return out
    for name in names:
        path = manifest_dir / name
        if name.startswith(".") or not path.is_file():
            continue
        data = path.read_bytes()
        try:
            doc = yaml.safe_load(data)
        except yaml.YAMLError:
            continue  # the kubelet drops a file it cannot parse
        if not isinstance(doc, dict) or doc.get("kind") != "Pod":
            continue
        meta = doc.get("metadata") or {}
        conts = [c.get("name") for c in (doc.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
        out[str(path)] = {
            "digest": hashlib.sha256(data).hexdigest(),
            "name": meta.get("name"),
            "namespace": meta.get("namespace") or "default",
            "containers": conts,
        }
    return out


def main(bindir: str, manifest_dir: str, node: str, argv: list[str]) -> None:
    """Play the kubelet on ``manifest_dir`` for node ``node``, then run proof_fakes' crictl with ``argv``."""
    sys.path.insert(0, str(PROOF))
    from proof_fakes import container, sandbox

    base = Path(bindir)
    memory_path = base / "kubelet-memory.json"
    try:
        memory = json.loads(memory_path.read_text())
    except (OSError, ValueError):
        memory = {"running": {}, "dead": []}
    now = time.time()
    seen = _pods_in(Path(manifest_dir))
    running = memory["running"]
    for path, old in list(running.items()):
        if path not in seen or seen[path]["digest"] != old["digest"]:
            memory["dead"].append(old)
            del running[path]
    for path, pod in seen.items():
        if path not in running:
            uid = hashlib.sha256(f"{node}\0{path}\0{pod['digest']}".encode()).hexdigest()[:32]
            running[path] = dict(pod, id=uuid.uuid4().hex, hash=uid, created=now)
    sandboxes, containers = [], []
    for entry, ready in [(e, False) for e in memory["dead"]] + [(e, True) for e in running.values()]:
        sb = sandbox(entry["id"], f"{entry['name']}-{node}", entry["namespace"], entry["hash"], ready=ready,
                     created=entry["created"])
        sandboxes.append(sb)
        for i, cname in enumerate(entry["containers"]):
            containers.append(container(f"{entry['id'][:12]}c{i}", sb, cname, created=entry["created"],
                                        state="CONTAINER_RUNNING" if ready else "CONTAINER_EXITED"))
    tmp = memory_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(memory))
    os.replace(tmp, memory_path)
    state = base / "crictl-state.json"
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps({"t0": now, "phases": [{"at": 0, "sandboxes": sandboxes, "containers": containers}]}))
    os.replace(tmp, state)
    env = dict(os.environ, FAKE_CRICTL_STATE=str(state), FAKE_CRICTL_LOG=str(base / "crictl-calls.log"))
    fake = str(base / "proof-fake-crictl")
    os.execve(fake, [fake, *argv], env)
