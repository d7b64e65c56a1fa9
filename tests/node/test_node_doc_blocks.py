"""The command blocks of README.md and docs/ marked ``<!-- doc-test: node (tier: node) -->``: the
install pages, run as written on a booted Debian 12 node (systemd as PID 1, tests/node/nodelib.py).

Each block runs "from a clone": a ``git clone`` of this checkout (with the working tree's tracked
files copied over it) bound writable into the node at the same path. Its command lines run in
order, with bash (``set -euo pipefail``), each where :data:`WHERE` says:

- ``host``: on this machine, from the clone: building the packages (the build machine is the host:
  the node is a clean target; its Debian archive is out of reach, ``--private-network``). ``sudo``
  is a stand-in that runs its command (the test runs as root; the host has no sudo);
- ``standin``: a line that cannot run on Debian (``dnf``), replaced by the check written beside it,
  which says why;
- every other line: inside the node, as root, in the clone, with the node's real ``sudo``, apt,
  dpkg, systemctl, journalctl and man. The node has no network: its ``/etc/pip.conf`` says
  ``no-index`` and no build isolation (the stand-in for the package index, which ``sudo pip`` reads
  whatever sudo keeps of the environment: Debian's setuptools and wheel, in the node's root, build
  the project, as the venv is made ``--system-site-packages``).

Every node starts as a kubeadm node: kubeadm's four manifests (corpus 01-04) in
``/etc/kubernetes/manifests``. A block runs on a fresh node unless :data:`CONTINUES` says it
continues the previous block of its page (the page's next step on the same machine).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from doc_blocks import Block, blocks_for
from nodelib import HOST_PATH, REPO, BootedNode
from spd_testlib import KUBEADM, corpus_dir

pytestmark = pytest.mark.slow

TIER = "node"
BLOCKS = blocks_for(TIER)

#: (a regular expression matching a command line, where it runs, the stand-in and why)
WHERE: list[tuple[str, str, str]] = [
    (r"^sudo apt-get install -y debhelper ", "host", ""),
    (r"^packaging/build-(deb|rpm)\.sh$", "host", ""),
    # Debian has no dnf: what it installs for the build must be here (CI builds the .rpm on Debian)
    (r"^sudo dnf install rpm-build .*$", "standin", "command -v rpmbuild"),
    # ... and the package it installs must be the .rpm the build made, one rpm can read
    (r"^sudo dnf install (\./packaging/out/\S+\.rpm)$", "standin", r"rpm -qp --requires \1"),
]

#: Blocks that continue the previous block's node: (page, a regular expression matching a line).
CONTINUES: list[tuple[str, str]] = [
    ("docs/tasks/install.md", r"^sed 's#/usr/bin/staticpodd#/opt/staticpodd/bin/staticpodd#'"),
    ("docs/tasks/install.md", r"^sudo systemctl enable --now staticpodd$"),
]


def _rel(block: Block) -> str:
    return block.page.relative_to(REPO).as_posix()


def lines_of(block: Block) -> list[str]:
    """The block's command lines, continuation lines joined, comments kept."""
    return [line.strip() for line in block.commands().replace("\\\n", " ").splitlines() if line.strip()]


def where(line: str) -> tuple[str, str]:
    """(``host`` | ``standin`` | ``node``, the line as it runs there)."""
    code = line.split(" #", 1)[0].strip()
    for rx, kind, standin in WHERE:
        m = re.search(rx, code)
        if m:
            return kind, m.expand(standin) if kind == "standin" else line
    return "node", line


def continues(block: Block) -> bool:
    return any(page == _rel(block) and any(re.search(rx, line) for line in lines_of(block))
               for page, rx in CONTINUES)


def test_the_tables_match_the_pages() -> None:
    """Every entry of WHERE and CONTINUES still matches a line (a changed page makes them stale)."""
    assert {"README.md", "docs/tasks/install.md"} <= {_rel(b) for b in BLOCKS}
    every = [line for b in BLOCKS for line in lines_of(b)]
    for rx, _, _ in WHERE:
        assert any(re.search(rx, line) for line in every), rx
    for page, rx in CONTINUES:
        assert any(_rel(b) == page and any(re.search(rx, line) for line in lines_of(b)) for b in BLOCKS), rx


def _clone(tmp: Path) -> Path:
    """A clone of this checkout with the working tree's tracked files over it."""
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", "--shared", str(REPO), str(clone)], check=True, capture_output=True)
    subprocess.run(f"git -C {shlex.quote(str(REPO))} ls-files -z | xargs -0 -r sh -c "
                   f"'for f; do [ -e \"$f\" ] && cp -a --parents \"$f\" {shlex.quote(str(clone))}; done' sh",
                   shell=True, cwd=REPO, check=True, capture_output=True)
    return clone


def _host(script: str, clone: Path, bindir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=clone, capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL,
                          env={"PATH": f"{bindir}:{HOST_PATH}", "HOME": "/root", "LC_ALL": "C.UTF-8",
                               "DEBIAN_FRONTEND": "noninteractive"})


def _segments(block: Block) -> list[tuple[str, str]]:
    """Consecutive lines that run in the same place, as (``host``/``node``, script)."""
    out: list[tuple[str, str]] = []
    for line in lines_of(block):
        kind, text = where(line)
        place = "node" if kind == "node" else "host"
        if out and out[-1][0] == place:
            out[-1] = (place, out[-1][1] + "\n" + text)
        else:
            out.append((place, text))
    return out


PAGES = sorted({_rel(b) for b in BLOCKS})


@pytest.mark.parametrize("page", PAGES)
def test_every_node_block_of_a_page_runs_as_written(node_root: Path, page: str, tmp_path: Path) -> None:
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip("../shared/corpus is absent (set STATICPODD_CORPUS)")
    clone = _clone(tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')  # the host's stand-in (see the docstring)
    (bindir / "sudo").chmod(0o755)
    node: BootedNode | None = None
    try:
        for n, block in enumerate(b for b in BLOCKS if _rel(b) == page):
            if node is None or not continues(block):
                if node is not None:
                    node.shutdown()
                node = BootedNode(node_root, tmp_path / f"node-{n}", rw_binds=(clone,))
                node.boot()
                node.sh("mkdir -p -m 0700 /etc/kubernetes/manifests")
                # pip's inverted spelling: no-build-isolation = 0 turns build isolation off
                node.sh("printf '[global]\\nno-index = 1\\nno-build-isolation = 0\\n' >/etc/pip.conf")
                for name, src in KUBEADM.items():
                    node.path(f"/etc/kubernetes/manifests/{name}").write_bytes((corpus / "manifests" / src).read_bytes())
            for place, script in _segments(block):
                if place == "host":
                    r = _host(script, clone, bindir)
                else:
                    r = node.sh(f"cd {shlex.quote(str(clone))} && exec bash -c {shlex.quote('set -euo pipefail' + chr(10) + script)}",
                                check=False, timeout=900,
                                env={"PAGER": "cat", "SYSTEMD_PAGER": "cat", "MANPAGER": "cat"})
                print(f"--- {block.where} on the {place} (exit {r.returncode}) ---\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
                assert r.returncode == 0, (
                    f"{block.where}: a documented command failed (exit {r.returncode}) on the {place}\n"
                    f"--- as run ---\n{script}\n--- stdout ---\n{r.stdout[-3000:]}\n--- stderr ---\n{r.stderr[-3000:]}")
    finally:
        if node is not None:
            node.shutdown()
