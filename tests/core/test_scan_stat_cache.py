"""Stored stat signatures (observed.sig): a full scan (the daemon's rescan, every verb's
pre-change scan) reads only files whose stat changed since their bytes were last read and
recorded; anything else (new bytes even with the old size and mtime put back, a chmod, a file
whose ctime was under 2 s old when it was read, a scan that failed) is read again."""

from __future__ import annotations

import os
import time

import pytest
from spd_testlib import small_pod, wait_out_racy_window

from staticpodd.engine import Actor, Engine
from staticpodd.journal import Journal
from staticpodd.layout import Layout
from staticpodd.node import fsops


@pytest.fixture
def eng(sandbox):
    for i in range(20):
        sandbox.write(f"p{i:02d}.yaml", small_pod(f"p{i:02d}"))
        old = time.time() - 60
        os.utime(sandbox.manifests / f"p{i:02d}.yaml", (old, old))
    e = Engine(Layout.build(sandbox.root), actor=Actor("t", 0), journal=Journal("staticpodd", str(sandbox.root)))
    with e.locked():
        e.scan(log=False)
    yield e
    e.close()


def _reads(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = fsops.read_state
    monkeypatch.setattr(fsops, "read_state", lambda p: seen.append(os.path.basename(p)) or real(p))
    return seen


def _wait_out_racy_window(sandbox, monkeypatch) -> None:
    wait_out_racy_window(monkeypatch, [p for p in sandbox.manifests.iterdir() if p.is_file()])


def test_a_full_rescan_of_unchanged_files_reads_none_of_them(eng, sandbox, monkeypatch) -> None:
    _wait_out_racy_window(sandbox, monkeypatch)
    with eng.locked():
        eng.scan(log=False)  # every file read once more after the racy window
    seen = _reads(monkeypatch)
    with eng.locked():
        assert eng.scan(log=False) == []
    assert seen == []


def test_new_bytes_with_the_old_size_and_mtime_are_still_seen(eng, sandbox, monkeypatch) -> None:
    _wait_out_racy_window(sandbox, monkeypatch)
    with eng.locked():
        eng.scan(log=False)
    p = sandbox.manifests / "p03.yaml"
    st = os.stat(p)
    data = p.read_bytes().replace(b"nginx:1.27", b"nginx:1.28")
    assert len(data) == st.st_size
    p.write_bytes(data)
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; ctime cannot be
    with eng.locked():
        changes = eng.scan(log=False)
    assert [(c.file_name, c.kind) for c in changes] == [("p03.yaml", "modified")]
    assert eng.store.data(eng.store.head("p03").digest) == data


def test_a_chmod_alone_is_seen(eng, sandbox, monkeypatch) -> None:
    _wait_out_racy_window(sandbox, monkeypatch)
    with eng.locked():
        eng.scan(log=False)
    os.chmod(sandbox.manifests / "p04.yaml", 0o644)
    with eng.locked():
        changes = eng.scan(log=False)
    assert [(c.file_name, c.kind) for c in changes] == [("p04.yaml", "mode-changed")]


def test_a_file_written_within_the_racy_window_is_read_again(eng, sandbox, monkeypatch) -> None:
    sandbox.write("p05.yaml", small_pod("p05", image="nginx:1.29"))  # just now: ctime is fresh
    with eng.locked():
        eng.scan(log=False)
    seen = _reads(monkeypatch)
    with eng.locked():
        eng.scan(log=False)
    assert "p05.yaml" in seen


def test_a_failed_scan_stores_no_signature(eng, sandbox, monkeypatch) -> None:
    _wait_out_racy_window(sandbox, monkeypatch)
    with eng.locked():
        eng.scan(log=False)
    before = eng.store.sigs()
    assert len(before) == 20
    sandbox.write("p06.yaml", small_pod("p06", image="nginx:1.30"))
    old = time.time() - 60
    os.utime(sandbox.manifests / "p06.yaml", (old, old))
    _wait_out_racy_window(sandbox, monkeypatch)
    monkeypatch.setattr(eng.core, "log", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    with eng.locked(), pytest.raises(RuntimeError):
        eng.scan()
    assert eng.store.sigs() == before  # rolled back with the rest of the scan
    monkeypatch.undo()
    seen = _reads(monkeypatch)
    with eng.locked():
        changes = eng.scan(log=False)
    assert "p06.yaml" in seen and [c.file_name for c in changes] == ["p06.yaml"]


def test_a_verb_on_an_unchanged_node_reads_only_the_file_it_changes(eng, sandbox, monkeypatch) -> None:
    _wait_out_racy_window(sandbox, monkeypatch)
    with eng.locked():
        eng.scan(log=False)
        eng.park("p08")  # the first verb caches every live file's pod identity by digest
        eng.unpark("p08")
    _wait_out_racy_window(sandbox, monkeypatch)
    with eng.locked():
        eng.scan(log=False)
    seen = _reads(monkeypatch)
    fresh = Engine(Layout.build(sandbox.root), actor=Actor("t", 0), journal=Journal("staticpodd", str(sandbox.root)))
    with fresh.locked():
        fresh.park("p07")
    fresh.close()
    assert set(seen) <= {"p07.yaml"}, seen
    assert (sandbox.parked / "p07.yaml").exists()
