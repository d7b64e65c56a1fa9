"""The command blocks of README.md and docs/ marked ``<!-- doc-test: node (tier: kubelet) -->``, run as
written against the real kubelet and containerd of this tier, page by page in reading order.

A block runs with bash on the host in a working directory of its own, its ``staticpodctl`` this
checkout's with ``--root`` the lab node's root (its staticpodd.yaml names the lab's crictl, CRI
endpoint and node name, so ``--wait`` asks the lab's containerd). The node is a kubeadm node as the
pages assume: kubeadm's kube-scheduler live and recorded, and a haproxy static pod (kubeadm's
documented HA manifest) in front of the apiserver; the working directory holds the manifest a
block applies by its file name (``kube-apiserver.yaml``: kubeadm's, its probes aimed at this host,
the lab's stand-in serving them). Images are the lab's local app image (nothing can be pulled).

A block of a page that runs the lab's own commands on the host (:data:`ON_HOST`: docs/development.md)
runs from a working directory that looks like a clone (``tests`` and ``.venv`` are links to this
checkout's) holding ``my-pod.yaml`` (a pod of the lab's app image), against this session's lab:
its ``kubelet-lab up DIR`` is what the session's fixture did (``DIR`` becomes the lab's manifest
directory, ``$KUBELET_LAB`` its work directory) and its ``down`` is what the session does, so
neither runs a second time.

Each command line must end the way its comment says: a comment that opens with ``exit N`` or
``WORD (exit N)`` (``# refused (exit 4): ...``) names its exit status; any other line must exit 0.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from doc_blocks import Block, blocks_for
from e2e_lib import CORPUS, REPO, Node, scheduler_bytes
from kubelet_lab import rewrite_image_text

TIER = "kubelet"
EXPECTED_EXIT = re.compile(r"#\s*(?:\w+\s+\()?exit (\d+)\b")


#: Pages whose blocks run the lab's own commands on the host (see the module docstring).
ON_HOST = {"docs/development.md"}
MY_POD = """apiVersion: v1
kind: Pod
metadata:
  name: my-pod
  namespace: kube-system
spec:
  hostNetwork: true  # as static pods are: the lab has no CNI
  containers:
  - name: app
    image: registry.k8s.io/my-app:1.0
"""


def on_host(block: Block, node: Node) -> Block:
    """The block with its ``kubelet-lab up``/``down`` taken to this session's lab."""
    text = re.sub(r"^D=\$\(mktemp -d\); tests/e2e/kubelet-lab up \$D\b.*$",
                  f'D={node.manifests}; echo "$KUBELET_LAB"  # up: the session did it', block.text, flags=re.M)
    text = re.sub(r"tests/e2e/kubelet-lab down\b[^;#]*", "true  # down: the session does it", text)
    # one command a line, so that each is checked (``a; b`` would be judged by b alone)
    text = "\n".join(part.strip() for line in text.splitlines()
                     for part in (line.split("; ") if not line.lstrip().startswith("D=") else [line]))
    return dataclasses.replace(block, text=text)


def _rel(block: Block) -> str:
    return block.page.relative_to(REPO).as_posix()


def checked(block: Block) -> str:
    """The block as a script in which every command line must exit as its comment says."""
    out = []
    for n, line in enumerate(block.commands().splitlines(), start=block.line + 1):
        code = line.split(" #", 1)[0].strip()
        if not code or code.startswith("#"):
            continue
        assert not code.endswith("\\"), f"{block.where}: continued lines are not supported here"
        m = EXPECTED_EXIT.search(line[len(line.split(" #", 1)[0]):])
        want = int(m.group(1)) if m else 0
        said = code.replace('"', "").replace("$", "")
        out.append(f"{code}\nrc=$?\nif [ $rc != {want} ]; then echo \"{block.page.name}:{n}: exit $rc, "
                   f"the page says {want}: {said}\" >&2; exit 1; fi")
    return "\n".join(out)


PAGES = sorted({_rel(b) for b in blocks_for(TIER)})


def test_the_tier_has_blocks_to_run() -> None:
    assert {"docs/reference/wait.md", "docs/development.md"} <= set(PAGES), PAGES
    for block in blocks_for(TIER):  # a page that changed its lab lines makes the rewrite stale
        if _rel(block) in ON_HOST:
            text = on_host(block, SimpleNamespace(manifests=Path("/lab/manifests"))).text  # type: ignore[arg-type]
            assert "kubelet-lab up" not in text and "kubelet-lab down" not in text, text


def _kubeadm_node(node: Node, work: Path) -> None:
    node.write("kube-scheduler.yaml", scheduler_bytes())
    node.wait_running("kube-scheduler", 60)
    haproxy = rewrite_image_text((CORPUS / "manifests" / "07-kubeadm-docs-haproxy.yaml").read_text())
    node.write("haproxy.yaml", haproxy.encode())
    node.ctl("status", check=True)  # adopts both files as version 1
    api = rewrite_image_text((CORPUS / "manifests" / "01-zetaoss-kubeadm-kube-apiserver.yaml").read_text())
    (work / "kube-apiserver.yaml").write_text(api.replace("host: 10.20.0.11", "host: 127.0.0.1"))


@pytest.mark.parametrize("page", PAGES)
def test_every_kubelet_block_of_a_page_runs_against_the_real_kubelet(node: Node, page: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _kubeadm_node(node, work)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "staticpodctl").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m staticpodd.cli --root "{node.root}" "$@"\n')
    (bindir / "staticpodctl").chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": str(tmp_path), "LANG": "C.UTF-8", "PYTHONPATH": str(REPO)}
    if page in ON_HOST:
        for name in ("tests", ".venv"):
            (work / name).symlink_to(REPO / name)
        (work / "my-pod.yaml").write_text(rewrite_image_text(MY_POD))
        env.update(KUBELET_LAB=str(node.lab.work))
    for block in [b for b in blocks_for(TIER) if _rel(b) == page]:
        script = checked(on_host(block, node) if page in ON_HOST else block)
        proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                              timeout=900, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, (
            f"{block.where}: a documented command did not end as the page says, against the real kubelet\n"
            f"--- block as run ---\n{script}\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
        )
    if page in ON_HOST:  # the page's `cp my-pod.yaml $D/` reached the real kubelet
        node.wait_running("my-pod", 60)
