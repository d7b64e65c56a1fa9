"""Retention: ``staticpodctl prune`` and :mod:`staticpodd.store.retention` keep the newest N
versions and everything younger than D per component, and never prune the current version, a
parked copy's version, the last valid version, or a version a running intent needs. The clock is
ours: versions are recorded with chosen ``created_at`` times and prune is given ``now``."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from spd_testlib import journal_entries, small_pod

from staticpodd.engine import Actor, Engine
from staticpodd.journal import Journal
from staticpodd.layout import Layout
from staticpodd.store.retention import Policy, plan, prune
from staticpodd.store.versions import digest_of

DAY = 86400.0
NOW = 1_800_000_000.0


def _engine(root: Path) -> Engine:
    return Engine(Layout.build(root), actor=Actor("test", 0), journal=Journal("staticpodd", str(root)))


def _pod(name: str, v: int) -> bytes:
    return small_pod(name, image=f"nginx:1.{v}").encode()


def _history(eng: Engine, comp: str, fn: str, datas: list[bytes], *, start: float, step: float = DAY) -> None:
    for i, d in enumerate(datas):
        eng.store.record(comp, fn, d, action="apply", actor="root", created_at=start + i * step)


def _seqs(eng: Engine, comp: str) -> list[int]:
    return [v.seq for v in eng.store.history(comp)]


def test_keep_n_prunes_the_oldest_and_deletes_bytes_no_version_references(sandbox, ctl) -> None:
    datas = [_pod("web", i) for i in range(10)]
    sandbox.write("web.yaml", datas[-1])
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", datas, start=NOW - 100 * DAY)
    with eng.locked():
        eng.scan()
        res = prune(eng, Policy(keep_versions=3), NOW)
    assert _seqs(eng, "web") == [8, 9, 10]
    assert res.versions == 7 and res.blobs == 7
    db = eng.store._db
    assert db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 3
    assert eng.store.data(eng.store.head("web").digest) == datas[-1]


def test_bytes_still_referenced_by_another_version_or_component_are_kept(sandbox) -> None:
    shared = _pod("web", 1)
    sandbox.write("web.yaml", _pod("web", 9))
    sandbox.write("copy.yaml", shared)
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", [shared, _pod("web", 2), _pod("web", 3), _pod("web", 9)],
             start=NOW - 50 * DAY)
    _history(eng, "copy", "copy.yaml", [shared], start=NOW - 50 * DAY)
    with eng.locked():
        eng.scan()
        res = prune(eng, Policy(keep_versions=1), NOW)
    assert _seqs(eng, "web") == [3, 4]  # 3 stays: it is what rollback reaches
    assert res.blobs == 1  # version 2's bytes; version 1's are copy's current bytes
    assert eng.store.data(digest_of(shared)) == shared


def test_everything_younger_than_keep_for_stays(sandbox) -> None:
    datas = [_pod("web", i) for i in range(10)]
    sandbox.write("web.yaml", datas[-1])
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", datas, start=NOW - 9.5 * DAY)  # ages 9.5 … 0.5 days
    with eng.locked():
        eng.scan()
        prune(eng, Policy(keep_versions=2, keep_for=4 * DAY), NOW)
    assert _seqs(eng, "web") == [7, 8, 9, 10]  # ages 3.5 … 0.5 days; the newest 2 are among them


def test_the_current_version_and_the_last_valid_one_are_never_pruned(sandbox) -> None:
    good = [_pod("web", i) for i in range(5)]
    bad = b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n"
    invalid = [bad, bad + b"#1\n", bad + b"#2\n"]
    sandbox.write("web.yaml", invalid[-1])  # an invalid file is live (on_invalid: alert)
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", [*good, *invalid], start=NOW - 90 * DAY)
    with eng.locked():
        eng.scan()
        plans = {p.component: p for p in plan(eng, Policy(keep_versions=1), NOW)}
        prune(eng, Policy(keep_versions=1), NOW)
    assert plans["web"].protected == {8: "current (newest)", 5: "last valid"}
    assert _seqs(eng, "web") == [5, 8]
    with eng.locked():  # and the daemon's restore still has its last good version
        res = eng.restore_last_good("web", reason="test")
    assert res.extra["restored_version"] == 5
    assert (sandbox.manifests / "web.yaml").read_bytes() == good[-1]


def test_the_parked_copys_version_is_never_pruned_and_unpark_still_works(sandbox) -> None:
    sched = [_pod("kube-scheduler", i) for i in range(4)]
    sandbox.write("kube-scheduler.yaml", sched[0])
    eng = _engine(sandbox.root)
    with eng.locked():
        eng.scan()
        eng.park("kube-scheduler", reason="drill")
    # later versions recorded while it is parked (e.g. by an older staticpodd, or imported):
    # the parked copy still holds version 1's (and the park's version 2's) bytes
    _history(eng, "kube-scheduler", "kube-scheduler.yaml", sched[1:], start=NOW - 80 * DAY)
    with eng.locked():
        plans = {p.component: p for p in plan(eng, Policy(keep_versions=1), NOW)}
        prune(eng, Policy(keep_versions=1), NOW)
    # version 2 is the park's own record of the parked bytes; 5 the newest
    assert plans["kube-scheduler"].protected == {5: "current (newest)", 2: "parked copy"}
    assert _seqs(eng, "kube-scheduler") == [2, 5]
    assert (sandbox.parked / "kube-scheduler.yaml").read_bytes() == sched[0]
    assert eng.store.data(eng.store.park_of("kube-scheduler").digest) == sched[0]


def test_a_component_with_an_operation_in_progress_is_left_alone(sandbox) -> None:
    datas = [_pod("web", i) for i in range(6)]
    sandbox.write("web.yaml", datas[-1])
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", datas, start=NOW - 60 * DAY)
    with eng.locked():
        eng.scan()
        eng.store.begin_intent("rollback", "web", {"file_name": "web.yaml", "seq": 1,
                                                   "digest": digest_of(datas[0])})
        assert plan(eng, Policy(keep_versions=1), NOW) == []
    assert _seqs(eng, "web") == [1, 2, 3, 4, 5, 6]


def test_dry_run_changes_nothing_and_says_what_would_go(sandbox, ctl) -> None:
    datas = [_pod("web", i) for i in range(5)]
    sandbox.write("web.yaml", datas[-1])
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", datas, start=NOW - 60 * DAY)
    eng.close()
    db = sandbox.root / "var/lib/staticpodd/versions.sqlite3"
    before = sqlite3.connect(db).execute("SELECT COUNT(*) FROM versions").fetchone()[0]
    r = ctl("prune", "--dry-run", "--keep", "2", "--json")
    assert r.rc == 0, r.err
    body = r.json()
    assert body["dry_run"] is True and body["pruned_versions"] == 3 and body["deleted_blobs"] == 3
    assert body["components"][0]["pruned_versions"] == [1, 2, 3]
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM versions").fetchone()[0] == before
    r = ctl("prune", "--keep", "2")
    assert r.rc == 0 and "web: pruned 3 version(s): 1, 2, 3; kept 2" in r.out
    h = ctl("history", "web", "--json").json()
    assert [v["version"] for v in h["versions"]] == [4, 5]


def test_prune_without_a_policy_prunes_nothing_and_says_how_to_set_one(sandbox, ctl) -> None:
    sandbox.write("web.yaml", _pod("web", 1))
    assert ctl("status").rc == 0
    r = ctl("prune")
    assert r.rc == 0 and "no retention policy" in r.out


def test_the_retention_config_is_the_default_policy_and_flags_override_it(sandbox, ctl) -> None:
    datas = [_pod("web", i) for i in range(6)]
    sandbox.write("web.yaml", datas[-1])
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", datas, start=NOW - 60 * DAY)
    eng.close()
    cfg = sandbox.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("retention:\n  keep_versions: 4\n")
    assert ctl("prune", "--dry-run", "--json").json()["pruned_versions"] == 2
    assert ctl("prune", "--dry-run", "--keep", "1", "--json").json()["pruned_versions"] == 4  # + rollback target
    cfg.write_text("retention:\n  keep_versions: 0\n")
    r = ctl("prune", "--json")
    assert r.rc == 78 and "keep_versions" in r.json()["error"]["message"]


def test_a_removed_stray_leaves_status_after_the_window_and_is_journalled(sandbox, ctl) -> None:
    sandbox.write("web.yaml", _pod("web", 1))
    sandbox.write("web.yaml.bak", _pod("web", 0))
    eng = _engine(sandbox.root)
    with eng.locked():
        eng.scan()  # adopted, .bak included (the kubelet reads it too)
        (sandbox.manifests / "web.yaml.bak").unlink()
        eng.scan()  # removed
    eng.close()
    rows = {c["component"]: c["state"] for c in ctl("status", "--json").json()["components"]}
    assert rows["web.yaml.bak"] == "removed"
    eng = _engine(sandbox.root)


    with eng.locked():
        assert plan(eng, Policy(keep_for=7 * DAY), time.time() + 6 * DAY) == []  # inside the window
        res = prune(eng, Policy(keep_for=7 * DAY), time.time() + 8 * DAY)
    assert [(c.component, c.retired) for c in res.components] == [("web.yaml.bak", True)]
    assert eng.store.history("web.yaml.bak") == [] and eng.store.events("web.yaml.bak") == []
    assert "web.yaml.bak" not in eng.store.components()
    eng.close()
    rows = {c["component"]: c["state"] for c in ctl("status", "--json").json()["components"]}
    assert "web.yaml.bak" not in rows and rows["web"] == "live"
    entries = journal_entries(sandbox.root, want=lambda es: any(e.get("COMPONENT") == "web.yaml.bak"
                                                                and e.get("KIND") == "stray-retired" for e in es))
    e = next(e for e in entries if e.get("KIND") == "stray-retired")
    assert e["MESSAGE_ID"] == "abe21babe36c4499a9f1bf7ed0f67d17"


def test_pruning_never_makes_an_alerting_counter_go_down(sandbox) -> None:
    """The ``_total`` metrics count store rows; Prometheus reads a decrease as a
    counter reset, so the rows a prune deletes are carried over (staticpodd.store.tallies)."""
    from staticpodd.daemon.metrics import store_counters

    sandbox.write("web.yaml", _pod("web", 9))
    eng = _engine(sandbox.root)
    for i in range(6):  # 3 hand edits and 3 restores, long ago
        eng.store.record("web", "web.yaml", _pod("web", i), action="external" if i % 2 else "restore",
                         actor="external" if i % 2 else "staticpodd", created_at=NOW - (60 - i) * DAY)
    eng.store.record("web", "web.yaml", _pod("web", 9), action="apply", actor="root", created_at=NOW - DAY)
    sandbox.write("web.yaml.bak", _pod("web", 8))
    with eng.locked():
        eng.scan()  # the .bak is adopted (an external change) ...
        eng.store.record_event("quarantined", component="web.yaml.bak", file_name="web.yaml.bak", actor="staticpodd")
        (sandbox.manifests / "web.yaml.bak").unlink()
        eng.scan()  # ... and removed: a stray retention retires with its events
    before = store_counters(eng.layout.db_path)
    with eng.locked():
        res = prune(eng, Policy(keep_versions=1, keep_for=7 * DAY), time.time() + 30 * DAY)
    assert res.versions >= 6 and any(c.retired for c in res.components)
    after = store_counters(eng.layout.db_path)
    assert after == before
    assert before["counters"]["external_changes"] >= 3 and before["counters"]["restores"] == 3
    assert before["counters"]["quarantines"] == 1
    with eng.locked():  # a second prune of the same rows' neighbours adds nothing twice
        prune(eng, Policy(keep_versions=1, keep_for=7 * DAY), time.time() + 60 * DAY)
    assert store_counters(eng.layout.db_path) == before
    eng.close()


def test_park_drills_never_push_the_rollback_target_out_of_a_keep_n_prune(kubeadm, ctl) -> None:
    # an apply, then two park drills: five versions of one content after the kubeadm original
    sched = kubeadm.manifests / "kube-scheduler.yaml"
    original = sched.read_bytes()
    changed = kubeadm.root / "changed.yaml"
    changed.write_bytes(original.replace(b"    - --leader-elect=true\n",
                                         b"    - --leader-elect=true\n    - --v=3\n"))
    assert ctl("apply", str(changed), "--as", "kube-scheduler").rc == 0
    for _ in range(2):
        assert ctl("park", "kube-scheduler").rc == 0
        assert ctl("unpark", "kube-scheduler").rc == 0
    dry = ctl("prune", "--keep", "3", "--dry-run", "--json").json()
    plans = {c["component"]: c for c in dry["components"]}
    assert plans["kube-scheduler"]["rollback_to"] == 1
    r = ctl("prune", "--keep", "3")
    assert r.rc == 0 and "rollback reaches version 1" in r.out
    r = ctl("rollback", "kube-scheduler", "--to", "2")  # pruned: the hint offers only what is left
    assert r.rc != 0 and "versions are 1, 6 (others pruned)" in r.err, r.err
    assert ctl("rollback", "kube-scheduler").rc == 0
    assert sched.read_bytes() == original


def test_keep_n_counts_contents_not_rows(sandbox) -> None:
    a, b, c = (_pod("web", i) for i in range(3))
    sandbox.write("web.yaml", c)
    eng = _engine(sandbox.root)
    _history(eng, "web", "web.yaml", [a, b, b, b, c, c, c], start=NOW - 50 * DAY)
    with eng.locked():
        eng.scan()
        prune(eng, Policy(keep_versions=3), NOW)
    assert [eng.store.data(v.digest) for v in eng.store.history("web")] == [a, b, c]
