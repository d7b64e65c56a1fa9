"""The command blocks of README.md and docs/: found, with the marker that says where each runs.

A fenced ``sh``/``bash``/``console`` block runs on a sandbox node (tests/docs/test_doc_commands.py)
unless the HTML comment on the line before it says ``<!-- doc-test: node (tier: NAME ...) -->``:
then the tier NAME runs it where it has what it needs: :data:`RUNNERS` names the test module of each
tier, which collects ``blocks_for(TIER)`` and runs every block (tests/docs fails a block whose tier
has no runner).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from spd_testlib import REPO

SHELLS = ("sh", "bash", "console")
#: The test module that runs the blocks of each tier: it sets ``TIER = "<name>"`` and runs every
#: block of ``blocks_for(TIER)``.
RUNNERS = {
    "controlplane": "tests/controlplane/test_cp_doc_blocks.py",  # a real kubeadm control plane
    "kubelet": "tests/e2e/test_e2e_doc_blocks.py",  # a real kubelet and containerd
    "node": "tests/node/test_node_doc_blocks.py",  # a booted systemd node, the .deb built on the host
    "cm": "tests/cm/test_cm_doc_blocks.py",  # ansible-core
    "dev": "tests/docs/test_dev_doc_blocks.py",  # a development checkout: .ci/demo, the benchmarks, pip
}
TIERS = tuple(RUNNERS)
MARKER = re.compile(r"^<!-- doc-test: (?P<kind>node|sandbox)\b(?P<rest>.*)-->\s*$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: str  # "" (run here), "sandbox" (run here, says how), "node"
    tier: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    def commands(self) -> str:
        """The block as a script: for ``console`` only the ``$ `` lines (output lines are not run)."""
        if self.lang != "console":
            return self.text
        return "\n".join(line[2:] for line in self.text.splitlines() if line.startswith("$ "))


def pages() -> list[Path]:
    """README.md, then every Markdown page under docs/ (sorted)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks_of(page: Path) -> list[Block]:
    """The fenced shell blocks of one Markdown page, with the marker on the line before each."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        if lang in SHELLS:
            prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            mk = MARKER.match(prev.strip())
            kind, tier = "", ""
            if mk:
                kind = mk.group("kind")
                t = re.search(r"tier: *([a-z]+)", mk.group("rest"))
                tier = t.group(1) if t else ""
            indent = len(lines[start]) - len(lines[start].lstrip())
            text = "\n".join(line[indent:] for line in lines[start + 1 : j])
            out.append(Block(page, start + 1, lang, text, kind, tier))
        i = j + 1
    return out


def blocks_for(tier: str) -> list[Block]:
    """Every block marked ``node`` that names ``tier``, page by page in reading order."""
    return [b for p in pages() for b in blocks_of(p) if b.marker == "node" and b.tier == tier]
