"""A write that comes right after READY=1 is restored first: the daemon does its start-up
housekeeping before READY (what the restore on a writer's close needs is loaded) or once it has
been quiet for a moment (the memory trim), never between READY and that write's restore.

Counted and ordered, never timed (the figures are tests/bench/bench_restore.py and bench_e2e.py
``--restore-only``: "the first write after READY"). Real staticpodd processes under
tests/daemon/count_parses.py, real inotify, SQLite and journald.
"""

from __future__ import annotations

from pathlib import Path

from daemon_harness import make_root, wait_journal, wait_until

MANIFESTS = "etc/kubernetes/manifests"
BAD = b"apiVersion: v1\nkind: Pod\n"  # no metadata.name: the kubelet refuses it


def _order(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def test_a_write_right_after_ready_is_restored_before_the_daemon_gives_memory_back(tmp_path, run_daemon,
                                                                                  monkeypatch):
    root = make_root(tmp_path, "on_invalid: restore\n")
    order = tmp_path / "order.txt"
    monkeypatch.setenv("STATICPODD_COUNT_ORDER", str(order))
    d = run_daemon(root, count_parses=tmp_path / "parses.txt")
    d.wait_ready()
    live = root / MANIFESTS / "kube-scheduler.yaml"
    good = live.read_bytes()
    with open(live, "wb") as fh:  # in place, at once
        fh.write(BAD)
    wait_until(lambda: live.read_bytes() == good, what="the good bytes back")
    wait_journal(root, "RESTORED_LAST_GOOD", lambda e: e.get("FILE_NAME") == "kube-scheduler.yaml")
    wait_until(lambda: "trim" in _order(order), what="the memory given back, once quiet")
    seen = _order(order)
    assert seen.index("restore") < seen.index("trim"), seen  # the old daemon trimmed right after READY


def test_the_first_restore_after_ready_imports_nothing_before_its_rename(tmp_path, run_daemon, monkeypatch):
    """A restart on an unchanged directory parses and validates nothing, so what the
    restore on a writer's close needs was imported by the first write's restore, between its
    close and its rename. Under ``on_invalid: restore`` it is imported before READY=1."""
    root = make_root(tmp_path, "on_invalid: restore\n")
    first = run_daemon(root)
    first.wait_ready()
    assert first.stop() == 0
    order = tmp_path / "order.txt"
    monkeypatch.setenv("STATICPODD_COUNT_ORDER", str(order))
    d = run_daemon(root, count_parses=tmp_path / "parses.txt")  # on the unchanged directory
    d.wait_ready()
    live = root / MANIFESTS / "etcd.yaml"
    good = live.read_bytes()
    with open(live, "wb") as fh:
        fh.write(BAD)
    wait_until(lambda: live.read_bytes() == good, what="the good bytes back")
    counts = [line.split()[1] for line in order.read_text().splitlines() if line.startswith("imported-before-rename")]
    assert counts == ["0"], counts
