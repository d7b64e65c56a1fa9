"""Every command block in README.md and docs/ runs, as written, on a sandbox node.

A fenced ``sh``/``bash``/``console`` block is run by bash (``set -euo pipefail``) in a sandbox
that looks like a control-plane node: kubeadm's four manifests (corpus 01-04) under a tmp root.
The blocks of one page run in order in one sandbox, so a page reads (and runs) like a session.

How a block is taken to the sandbox, and nothing else:
- ``staticpodctl`` and ``staticpodd`` on PATH are this checkout's, with ``--root <sandbox>`` first;
- the node's paths in the block's text (``/etc/kubernetes``, ``/etc/staticpodd``,
  ``/var/lib/staticpodd``, ``/var/lib/kubelet``, ``/run/staticpodd``) and the demo's root
  (``/tmp/staticpodd-demo``) are put under the sandbox root;
- the working directory holds ``.venv`` (a link to this checkout's) and copies of the four
  manifests plus ``new.yaml`` (kube-apiserver with one flag changed), for verbs that take a file;
- ``EDITOR``/``VISUAL`` are ``true`` (an edit that changes nothing);
- a block whose section starts from a state the page's earlier blocks did not make (:data:`AROUND`)
  gets that state made first, and what the prose after it says to run is run after it.

A block that needs a real node (sudo, systemctl, kubectl, a kubelet, a package) is marked by an
HTML comment on the line before it: ``<!-- doc-test: node (tier: NAME ...) -->``. The marker must
name the tier that has such a node (``node``: tests/node's booted nspawn node; ``kubelet``:
tests/e2e's real kubelet; ``controlplane``: a real kubeadm control plane; ``cm``: ansible-core;
``dev``: a development checkout with the test tools), and that tier's runner
(``doc_blocks.RUNNERS``) must exist and run it. Every block, marked or not, must be pasteable: no ``[--opt N]``
optional-argument brackets, which a shell would pass on as literal words.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from doc_blocks import RUNNERS, TIERS, Block, blocks_of, pages
from spd_testlib import KUBEADM, REPO, corpus_dir

NODE_PATHS = ("/etc/kubernetes", "/etc/staticpodd", "/var/lib/staticpodd", "/var/lib/kubelet",
              "/run/staticpodd", "/tmp/staticpodd-demo")
BRACKETED_OPTION = re.compile(r"\[--?[A-Za-z]")


ALL = [b for p in pages() for b in blocks_of(p)]


def test_every_page_has_its_blocks_found() -> None:
    """The extraction itself: README and docs/ hold command blocks, most of them run here."""
    assert len(ALL) >= 20, [b.where for b in ALL]
    assert sum(1 for b in ALL if b.marker != "node") >= 10


@pytest.mark.parametrize("block", ALL, ids=[b.where for b in ALL])
def test_a_block_is_pasteable_and_a_node_block_names_its_tier(block: Block) -> None:
    bad = [line for line in block.commands().splitlines()
           if BRACKETED_OPTION.search(line.split(" #", 1)[0])]
    assert not bad, (f"{block.where}: an optional argument in [brackets] is pasted as a literal word; "
                     f"write the example with a real value, or put the option in a comment: {bad}")
    if block.marker == "node":
        assert block.tier in TIERS, (f"{block.where}: a block marked 'node' must name the tier that runs it "
                                     f"(tier: one of {', '.join(TIERS)})")
        runner = REPO / RUNNERS[block.tier]
        text = runner.read_text() if runner.is_file() else ""
        assert f'TIER = "{block.tier}"' in text and "blocks_for(TIER)" in text, (
            f"{block.where}: no test runs the blocks of tier {block.tier!r}: {RUNNERS[block.tier]} must set "
            f'TIER = "{block.tier}" and run every block of blocks_for(TIER)')


def _sandbox(tmp: Path) -> tuple[Path, Path, dict[str, str]]:
    corpus = corpus_dir()
    if corpus is None or not (corpus / "manifests").is_dir():
        pytest.fail("../shared/corpus is absent: the docs' blocks run on kubeadm's manifests (set STATICPODD_CORPUS)")
    root = tmp / "node"
    manifests = root / "etc/kubernetes/manifests"
    manifests.mkdir(parents=True)
    work = tmp / "work"
    work.mkdir()
    for name, src in KUBEADM.items():
        data = (corpus / "manifests" / src).read_bytes()
        (manifests / name).write_bytes(data)
        (manifests / name).chmod(0o600)
        (work / name).write_bytes(data)
    api = (work / "kube-apiserver.yaml").read_text()
    (work / "new.yaml").write_text(api.replace("    - kube-apiserver\n", "    - kube-apiserver\n    - --profiling=false\n", 1))
    (work / ".venv").symlink_to(REPO / ".venv")
    bindir = tmp / "bin"
    bindir.mkdir()
    venv = REPO / ".venv" / "bin"
    for prog in ("staticpodctl", "staticpodd"):
        w = bindir / prog
        w.write_text(f'#!/bin/sh\nexec "{venv / prog}" --root "{root}" "$@"\n')
        w.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", EDITOR="true", VISUAL="true",
               HOME=str(tmp), PAGER="cat", SYSTEMD_PAGER="cat")
    return root, work, env


def _in_sandbox(text: str, root: Path) -> str:
    for p in NODE_PATHS:
        target = f"{root}{p}" if p != "/tmp/staticpodd-demo" else str(root)
        # a path is a whole word: /etc/staticpodd and /etc/staticpodd/x, never /etc/staticpodd.d
        text = re.sub(r"(?<![\w./-])" + re.escape(p) + r"(?![\w.-])", target, text)
    return text


#: (page, a regular expression matching a line of the block, commands run before it, commands run
#: after it): the state the block's section starts from, and the step its prose says comes next.
AROUND: list[tuple[str, str, str, str]] = [
    # "When the tool itself is broken": a parked scheduler put back by hand, then "run
    # `staticpodctl unpark kube-scheduler` when you can: it sees the identical bytes"
    ("docs/tasks/recover.md", r"mv \.staticpodd/parked/kube-scheduler\.yaml \.$",
     "staticpodctl park kube-scheduler --reason 'recover.md: the state this section starts from'",
     "staticpodctl unpark kube-scheduler\nstaticpodctl doctor"),
]


def _around(block: Block) -> tuple[str, str]:
    rel = block.page.relative_to(REPO).as_posix()
    hits = [(before, after) for page, rx, before, after in AROUND
            if page == rel and any(re.search(rx, line) for line in block.commands().splitlines())]
    return (hits[0] if hits else ("", ""))


def test_every_state_made_around_a_block_still_matches_a_block() -> None:
    """A stale :data:`AROUND` entry (the page changed) fails here, not silently."""
    for page, rx, _, _ in AROUND:
        assert any(_around(b)[0] for b in blocks_of(REPO / page)), (page, rx)


PAGES_WITH_RUNNABLE = sorted({b.page for b in ALL if b.marker != "node"})


@pytest.mark.parametrize("page", PAGES_WITH_RUNNABLE, ids=[str(p.relative_to(REPO)) for p in PAGES_WITH_RUNNABLE])
def test_every_command_block_of_a_page_runs_on_a_sandbox_node(page: Path, tmp_path: Path) -> None:
    root, work, env = _sandbox(tmp_path)
    for block in blocks_of(page):
        if block.marker == "node":
            continue
        before, after = _around(block)
        # the block runs in a subshell: its `cd` does not move what the prose runs after it
        script = (f"set -euo pipefail\n{before}\n(\n" + _in_sandbox(block.commands(), root) + f"\n)\n{after}\n")
        # its own session: a daemon the block started and left (it failed before its `kill`) is
        # ended with the block, by its process group
        proc = subprocess.Popen(["bash", "-c", script], cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        assert proc.returncode == 0, (
            f"{block.where}: a documented command failed (exit {proc.returncode}) on a sandbox node at {root}\n"
            f"--- block ---\n{block.text}\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-3000:]}"
        )


def test_the_journal_page_lists_every_event_with_its_message_id() -> None:
    """docs/reference/journal.md's catalog table names every Event and its MESSAGE_ID."""
    from staticpodd.journal import Event

    text = (REPO / "docs/reference/journal.md").read_text()
    missing = [e.name for e in Event if f"| `{e.name}` | `{e.value}` |" not in text]
    assert not missing, f"docs/reference/journal.md: add these events to the catalog table: {missing}"
