"""The command blocks of README.md and docs/ marked ``<!-- doc-test: node (tier: controlplane) -->``,
run as written on the real kubeadm control-plane node, page by page in reading order.

tests/docs runs every other block on a sandbox root; a block marked for this tier needs what only
a real node has (kubectl, kubeadm, a kubelet that stops and starts the scheduler). Each block runs
with bash (``set -euo pipefail``) inside the node's namespaces, as root, in a working directory of
its own that looks like a clone (``packaging`` is a link to this checkout's: a page says "from a
clone" for ``kubectl apply -f packaging/kubernetes/...``), with:

- ``staticpodctl`` this checkout's (``--root /``: the node's own directory and store), ``kubectl``
  and ``kubeadm`` the lab's (``KUBECONFIG=/etc/kubernetes/admin.conf``), ``hostname`` the node name;
- ``sudo`` a stand-in that runs its command (the block already runs as root; a real sudo would
  reset PATH and lose the lab's programs);
- ``kubeadm upgrade plan/apply`` given the preflight errors this host needs ignored (cgroup v1:
  ``SystemVerification``; CoreDNS checks with DNS disabled: ``tests/controlplane/test_cp_upgrade.py``),
  and a "y" on stdin, the operator's answer to kubeadm's "Are you sure you want to proceed?".

What a reader does by hand where a page says so is done the way the page says (:data:`BY_HAND`):
a comment line that tells the reader to edit a file is followed by that edit, and a block the page
offers as the *other* way to do a step starts from that step's starting point. A block whose page
runs lab commands on the host (``tests/controlplane/cplane-lab``, docs/development.md) runs on the
host against this session's control plane: its ``up`` and ``down`` are what the session's fixture
did and does (``cplane_lab.up`` / ``down``), so they are not run a second time.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cplane_lab import ControlPlane
from cplane_node import Node
from doc_blocks import Block, blocks_for

REPO = Path(__file__).resolve().parents[2]
TIER = "controlplane"

# cgroup v1 fails SystemVerification for kubelet >= 1.35 even with failCgroupV1: false; the
# CoreDNS checks fail with "start version '' not supported" although DNS is disabled (as in
# test_cp_upgrade.py)
IGNORE = "--ignore-preflight-errors=SystemVerification,CoreDNSUnsupportedPlugins,CoreDNSMigration"

#: What the reader does by hand, as the page says: (page, a regular expression matching a line of a
#: block, the commands that do it). A comment line is followed by its commands; a command line is
#: preceded by them (the state the page's prose starts that block from).
BY_HAND: list[tuple[str, str, str]] = [
    # "# set spec.nodeName to your node's name (kubectl get nodes), then:"
    ("docs/tasks/manual-scheduling.md", r"^# set spec\.nodeName to your node's name",
     f"""{sys.executable} - manual-schedule.yaml "$(kubectl get nodes -o jsonpath='{{.items[0].metadata.name}}')" <<'EOF'
import sys, yaml
path, node = sys.argv[1], sys.argv[2]
doc = yaml.safe_load(open(path))
doc["spec"]["nodeName"] = node
open(path, "w").write(yaml.safe_dump(doc))
EOF"""),
    # "Or let `staticpodctl pin` do this step": pin starts where step 2 starts, a Pending pod
    ("docs/tasks/manual-scheduling.md", r"^staticpodctl pin manual-schedule .*--dry-run",
     "kubectl delete pod manual-schedule --wait=true\nkubectl run manual-schedule --image=httpd:2.4-alpine"),
]

#: Pages whose blocks run on the host (the lab's own commands), not inside the node.
ON_HOST = {"docs/development.md"}


def _rel(block: Block) -> str:
    return block.page.relative_to(REPO).as_posix()


def by_hand(block: Block) -> str:
    """The block's commands with what the reader does by hand (:data:`BY_HAND`) put in place."""
    out: list[str] = []
    for line in block.commands().splitlines():
        steps = [cmd for page, rx, cmd in BY_HAND if page == _rel(block) and re.search(rx, line.strip())]
        if line.lstrip().startswith("#"):
            out += [line, *steps]
        else:
            out += [*steps, line]
    return "\n".join(out)


def _node_bin(cp: ControlPlane, where: Path) -> Path:
    """The programs a block finds first on PATH on the node (see the module docstring)."""
    where.mkdir(parents=True, exist_ok=True)
    progs = {
        "staticpodctl": f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m staticpodd.cli "$@"\n',
        "sudo": '#!/bin/sh\nexec "$@"\n',
        "kubeadm": (f'#!/bin/sh\ncase "$1 $2" in "upgrade plan"|"upgrade apply") exec "{cp.bin}/kubeadm" "$@" {IGNORE} ;; esac\n'
                    f'exec "{cp.bin}/kubeadm" "$@"\n'),
    }
    for name, text in progs.items():
        (where / name).write_text(text)
        (where / name).chmod(0o755)
    return where


PAGES = sorted({_rel(b) for b in blocks_for(TIER)})


def test_the_tier_has_blocks_to_run() -> None:
    """The extraction: the manual-scheduling drill and the kubeadm upgrade page name this tier."""
    assert {"docs/tasks/manual-scheduling.md", "docs/tasks/kubeadm-upgrade.md", "docs/reference/cluster.md"} <= set(PAGES)
    for page, rx, _ in BY_HAND:  # a step by hand that no longer matches a line is a stale test
        assert any(re.search(rx, line.strip()) for b in blocks_for(TIER) if _rel(b) == page
                   for line in b.commands().splitlines()), (page, rx)


@pytest.mark.parametrize("page", PAGES)
def test_every_controlplane_block_of_a_page_runs_on_the_real_node(cp: Node, page: str, tmp_path: Path) -> None:
    lab = cp.lab
    work = lab.work / "doc-blocks" / Path(page).stem
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "packaging").is_symlink():
        (work / "packaging").symlink_to(REPO / "packaging")
    path = f"{_node_bin(lab, work / 'bin')}:{lab.env()['PATH']}"
    for block in [b for b in blocks_for(TIER) if _rel(b) == page]:
        script = work / f"block-{block.line}.sh"
        script.write_text("set -euo pipefail\n" + by_hand(block) + "\n")
        if page in ON_HOST:
            text = script.read_text()
            text = re.sub(r"^tests/controlplane/cplane-lab up\b.*$", 'echo "$CPLANE_LAB"  # up: the session did it', text,
                          flags=re.M)
            text = re.sub(r"^tests/controlplane/cplane-lab down\b.*$", "true  # down: the session does it", text, flags=re.M)
            script.write_text(text)
            proc = subprocess.run(["bash", str(script)], cwd=REPO, capture_output=True, text=True, timeout=600,
                                  env={**lab.env(), "PATH": f"{sys.prefix}/bin:{lab.env()['PATH']}",
                                       "CPLANE_LAB": str(lab.work)}, stdin=subprocess.DEVNULL)
        else:
            proc = lab.run("bash", "-c", f"cd {work} && bash {script}", timeout=900, input="y\n" * 5,
                           env={"PATH": path})
        print(f"--- {block.where} (exit {proc.returncode}) ---\n{proc.stdout}{proc.stderr}")
        assert proc.returncode == 0, (
            f"{block.where}: a documented command failed (exit {proc.returncode}) on the real control-plane node\n"
            f"--- block as run ---\n{script.read_text()}\n--- stdout ---\n{proc.stdout[-3000:]}\n"
            f"--- stderr ---\n{proc.stderr[-3000:]}"
        )
