"""What the daemon's restore (``Engine.restore_last_good``, ``on_invalid: restore``) does before its
rename, counted, never timed (the latency is tests/bench/bench_e2e.py ``--restore-only`` and
tests/bench/bench_restore.py): every step there is time a kubelet relist may read the refused
bytes in (KUBELET.md "What a broken file does to a running pod").

- the version put back is validated once, not once to choose it and again in the gate, and not
  again by the next restore of the same version;
- history is read newest first a page at a time, not whole (it grows with every bad write).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from spd_testlib import small_pod

from staticpodd.engine import Actor, Engine
from staticpodd.journal import Journal
from staticpodd.layout import Layout
from staticpodd.store import VersionStore

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
