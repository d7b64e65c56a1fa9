"""What the daemon's restore (``Engine.restore_last_good``, ``on_invalid: restore``) does before its
rename, counted, never timed (the latency is tests/bench/bench_e2e.py ``--restore-only`` and
tests/bench/bench_restore.py): every step there is time a kubelet relist may read the refused
bytes in (docs/kubelet-contract.md "What a broken file does to a running pod").

- the version put back is validated once, not once to choose it and again in the gate, and not
  again by the next restore of the same version;
- history is read newest first a page at a time, not whole (it grows with every bad write);
- one commit of the store is synced (fsync) before the rename: the intent's;
- bytes the caller read and judged but did not record (``unrecorded``, the daemon's restore on a
  writer's close) are recorded after the rename, before the restore's version, and recorded all
  the same when the restore does not happen.

A crash between that rename and the recording is in tests/daemon/test_daemon_policies.py.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from spd_testlib import small_pod

from staticpodd.engine import Actor, Engine
from staticpodd.errors import ChangedMeanwhile, Conflict, UsageError
from staticpodd.journal import Journal
from staticpodd.layout import Layout
from staticpodd.node import fsops
from staticpodd.store.versions import VersionStore

GOOD = small_pod("web").encode()
BAD = b"apiVersion: v1\nkind: Pod\n"  # no metadata.name: the kubelet refuses it


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _engine(root: Path) -> Engine:
    return Engine(Layout.build(root), actor=Actor("staticpodd", 0), journal=Journal("staticpodd", str(root)))


def _adopted(sandbox) -> tuple[Engine, Path]:
    live = sandbox.write("web.yaml", GOOD)
    eng = _engine(sandbox.root)
    with eng.locked():
        eng.scan()
    return eng, live


def _actions(eng: Engine) -> list[tuple[str, str]]:
    return [(v.action, v.digest) for v in eng.store.history("web")]


def test_a_restore_validates_the_version_it_puts_back_once_and_the_next_restore_not_again(sandbox, monkeypatch):
    import staticpodd.validate as validate

    eng, live = _adopted(sandbox)
    validated: list[str] = []
    real = validate._validate

    def counted(data, path, options):
        validated.append(sha(data))
        return real(data, path, options)

    monkeypatch.setattr(validate, "_validate", counted)
    for bad in (BAD, BAD + b"# again\n"):
        live.write_bytes(bad)
        res = eng.restore_last_good("web", reason="test")
        assert res.changed and res.digest == sha(GOOD) and live.read_bytes() == GOOD
    assert validated.count(sha(GOOD)) == 1, validated
    eng.close()
    again = _engine(sandbox.root)  # a restarted daemon: the verdict is kept in the store
    live.write_bytes(BAD + b"# after a restart\n")
    with again.locked():
        res = again.restore_last_good("web", reason="test")
    assert res.changed and live.read_bytes() == GOOD
    assert validated.count(sha(GOOD)) == 1, validated


def test_a_kept_verdict_holds_only_for_the_options_it_was_made_with(sandbox):
    """A verdict depends on the options (here ``max_manifest_bytes``): one kept under other
    options is not trusted, so a version that fails now is never put back."""
    from types import SimpleNamespace

    eng, live = _adopted(sandbox)
    live.write_bytes(BAD)
    assert eng.restore_last_good("web", reason="test").changed  # GOOD passes, and is kept so
    eng.close()
    live.write_bytes(BAD + b"# 2\n")
    tight = Engine(Layout.build(sandbox.root), actor=Actor("staticpodd", 0),
                   journal=Journal("staticpodd", str(sandbox.root)), config=SimpleNamespace(max_manifest_bytes=20))
    with pytest.raises(Conflict):
        tight.restore_last_good("web", reason="test")
    assert live.read_bytes() == BAD + b"# 2\n"


def test_a_restore_reads_a_page_of_history_not_all_of_it(sandbox, monkeypatch):
    eng, live = _adopted(sandbox)
    with eng.store.transaction():
        for i in range(300):  # three hundred bad writes, each recorded (and each restored)
            eng.store.record("web", "web.yaml", BAD + f"# {i}\n".encode(), action="external", actor="external")
            eng.store.record("web", "web.yaml", GOOD, action="restore", actor="staticpodd")
    live.write_bytes(BAD)
    rows: list[int] = []
    for name in ("history", "older"):
        real = getattr(VersionStore, name)

        def counting(self, *a, _real=real, **kw):
            out = _real(self, *a, **kw)
            rows.append(len(out))
            return out

        monkeypatch.setattr(VersionStore, name, counting)
    res = eng.restore_last_good("web", reason="test")
    assert res.changed and live.read_bytes() == GOOD
    assert sum(rows) <= 32, rows  # not the 601 versions


def _synced_commits_before_rename(eng: Engine, monkeypatch) -> list[int]:
    """Count the store's COMMITs of a write made under ``synchronous=FULL`` (each an fsync of its
    log; a transaction that wrote nothing writes no log) until the restore's rename; returns a
    list that holds the count once the rename came."""
    state = {"full": True, "wrote": False, "commits": 0}
    out: list[int] = []

    def trace(sql: str) -> None:
        q = sql.strip().upper()
        if q.startswith("PRAGMA SYNCHRONOUS"):
            state["full"] = q.endswith("FULL")
        elif q.startswith("BEGIN"):
            state["wrote"] = False
        elif q.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")):
            state["wrote"] = True
        elif q == "COMMIT" and state["full"] and state["wrote"] and not out:
            state["commits"] += 1

    eng.store._db.set_trace_callback(trace)
    real = fsops.replace

    def renaming(*a, **kw):
        out.append(state["commits"])
        return real(*a, **kw)

    monkeypatch.setattr(fsops, "replace", renaming)
    return out


def test_one_commit_is_synced_before_the_rename_of_a_restore_on_close(sandbox, monkeypatch):
    """The daemon's restore on a writer's close: the intent's commit, with the refused bytes in
    it, is the only one synced before the rename (caches and the judged bytes' identity need
    none); new refused bytes every time, as real bad writes are."""
    eng, live = _adopted(sandbox)
    for i in range(3):
        live.write_bytes(BAD + f"# bad write {i}\n".encode())
        with eng.locked():
            st = fsops.read_state(live)
            assert st is not None
            counted = _synced_commits_before_rename(eng, monkeypatch)
            assert eng.restore_last_good("web.yaml", reason="test", unrecorded=st).changed
        assert counted == [1], (i, counted)


def test_unrecorded_bytes_are_recorded_after_the_rename_before_the_restore(sandbox):
    eng, live = _adopted(sandbox)
    live.write_bytes(BAD)
    os.chmod(live, 0o644)
    with eng.locked():
        st = fsops.read_state(live)
        assert st is not None
        assert [a for a, _ in _actions(eng)] == ["external"]  # the bad bytes are not in history yet
        res = eng.restore_last_good("web.yaml", reason="test", unrecorded=st)
    assert live.read_bytes() == GOOD
    hist = eng.store.history("web")
    assert [(v.action, v.digest) for v in hist] == [("external", sha(GOOD)), ("external", sha(BAD)),
                                                     ("restore", sha(GOOD))]
    assert hist[1].mode == 0o644 and hist[1].actor == "external"
    assert res.extra["external_version"] == 2 and res.version is not None and res.version.seq == 3
    assert eng.store.observed()["live/web.yaml"].digest == sha(GOOD)
    assert eng.store.intents() == []


def test_unrecorded_bytes_are_a_files_not_a_components(sandbox):
    eng, live = _adopted(sandbox)
    live.write_bytes(BAD)
    with eng.locked():
        st = fsops.read_state(live)
        assert st is not None
        with pytest.raises(UsageError):  # a component may have another file than the one read
            eng.restore_last_good("web", reason="test", unrecorded=st)
    assert live.read_bytes() == BAD and [a for a, _ in _actions(eng)] == ["external"]


def test_unrecorded_bytes_are_recorded_when_nothing_can_be_restored(sandbox):
    live = sandbox.write("web.yaml", BAD)
    eng = _engine(sandbox.root)
    with eng.locked():
        eng.scan()  # adopted: only bad bytes in history
        live.write_bytes(BAD + b"# 2\n")
        st = fsops.read_state(live)
        assert st is not None
        with pytest.raises(Conflict) as err:
            eng.restore_last_good("web.yaml", reason="test", unrecorded=st)
    assert err.value.details["external_version"] == 2
    assert _actions(eng)[-1] == ("external", sha(BAD + b"# 2\n"))
    assert eng.store.observed()["live/web.yaml"].digest == sha(BAD + b"# 2\n")


def test_unrecorded_bytes_written_over_before_the_rename_are_kept_and_the_new_write_is_not_reverted(sandbox):
    eng, live = _adopted(sandbox)
    live.write_bytes(BAD)
    fix = GOOD + b"# fixed by hand\n"
    with eng.locked():
        st = fsops.read_state(live)
        assert st is not None
        live.write_bytes(fix)  # after the judgement, before the rename's check
        with pytest.raises(ChangedMeanwhile) as err:
            eng.restore_last_good("web.yaml", reason="test", unrecorded=st)
    assert live.read_bytes() == fix
    assert err.value.details["external_version"] == 2
    assert _actions(eng)[1:] == [("external", sha(BAD)), ("external", sha(fix))]
    assert eng.store.intents() == []
