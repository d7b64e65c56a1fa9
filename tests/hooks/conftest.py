"""Fixtures for hooks.d tests: a sandbox --root with real hook scripts and real journald."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from spd_testlib import journald_alive

from staticpodd.journal import Journal
from staticpodd.layout import Layout


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    root = tmp_path / "root"
    lay = Layout.build(root)
    lay.manifest_dir.mkdir(parents=True)
    lay.hooks_dir.mkdir(parents=True)
    for d in (lay.config_dir, lay.hooks_dir):
        os.chmod(d, 0o755)
    return lay


HookMaker = Callable[..., Path]


@pytest.fixture
def make_hook(layout: Layout) -> HookMaker:
    """``make_hook("pre", "apply", "10-x", "echo hi")`` writes an executable /bin/sh hook."""

    def make(phase: str, verb: str, name: str, body: str, *, mode: int = 0o755, shebang: bool = True) -> Path:
        d = layout.hooks_dir / f"{phase}-{verb}.d"
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
        path = d / name
        text = ("#!/bin/sh\n" if shebang else "") + body + "\n"
        path.write_text(text)
        os.chmod(path, mode)
        return path

    return make


@pytest.fixture
def journal(layout: Layout) -> Journal:
    return Journal("staticpodctl", str(layout.root))


def read_journal(root: Path, *, want: int = 1, event: str | None = None) -> list[dict[str, str]]:
    """Entries with STATICPODD_ROOT=root (optionally one STATICPODD_EVENT), waiting for journald.

    Polls up to 10 s for at least ``want`` entries: journald writes asynchronously.
    """
    if not journald_alive():
        pytest.skip("journald is not running here (see .ci/setup)")
    match = [f"STATICPODD_ROOT={root}"]
    if event:
        match.append(f"STATICPODD_EVENT={event}")
    deadline = time.monotonic() + 10
    entries: list[dict[str, str]] = []
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["journalctl", "--no-pager", "-o", "json", *match], capture_output=True, text=True, check=False
        ).stdout
        entries = [json.loads(line) for line in out.splitlines() if line.strip()]
        if len(entries) >= want:
            break
        time.sleep(0.1)
    return entries


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (gone, or a zombie waiting for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return fields[0] == "Z"


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)
    return process_gone(pid)


@pytest.fixture
def journal_entries(layout: Layout) -> Callable[..., list[dict[str, str]]]:
    """``journal_entries(want=1, event="HOOK_FAILED")``: this test's journal entries."""
    return lambda **kw: read_journal(layout.root, **kw)


@pytest.fixture
def gone() -> Callable[[int], bool]:
    """``gone(pid)``: waits (bounded) until the process is gone or a zombie."""
    return wait_gone
