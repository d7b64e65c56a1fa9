"""watch.py (events -> debounced hints, re-watch) and reconcile.py (policy) in isolation.

The watcher runs a real watchdog Observer (inotify) on tmp_path; the policy functions are pure.
"""

from __future__ import annotations

import os
import select
import time
from types import SimpleNamespace

import pytest
from daemon_harness import wait_until

from staticpodd.config import Config
from staticpodd.journal import ERR, NOTICE, WARNING, Event
from staticpodd.node.watch import DIRECTORY, Hint, Hints, Watcher, classify
from staticpodd.reconcile import (
    finding_event,
    is_directory_finding,
    plan_changes,
    plan_expired_parks,
    plan_findings,
    status_line,
)
from staticpodd.validate.findings import Finding

ROOT = "/r/etc/kubernetes/manifests"


@pytest.mark.parametrize(
    ("path", "etype", "is_dir", "expected"),
    [
        (f"{ROOT}/kube-scheduler.yaml", "modified", False, Hint("file", "kube-scheduler.yaml")),
        (f"{ROOT}/4913", "created", False, Hint("file", "4913")),
        (f"{ROOT}/apps", "created", True, Hint("file", "apps")),  # a subdirectory: a finding
        (f"{ROOT}/apps/x.yaml", "created", False, None),  # the kubelet does not recurse
        (f"{ROOT}/.ansible_tmp123", "created", False, None),  # dot-names are not read
        (f"{ROOT}/.staticpodd/staging/x.yaml.tmp", "created", False, None),
        (f"{ROOT}/.staticpodd/quarantine/x.bak.1", "created", False, None),
        (f"{ROOT}/.staticpodd/parked/kube-scheduler.yaml", "modified", False, Hint("parked", "kube-scheduler.yaml")),
        (f"{ROOT}/.staticpodd/parked/.tmp", "modified", False, None),
        (f"{ROOT}/.staticpodd/parked", "deleted", True, DIRECTORY),
        (f"{ROOT}/.staticpodd", "moved", True, DIRECTORY),
        (ROOT, "deleted", True, DIRECTORY),
        (ROOT, "modified", True, None),
        ("/r/etc/kubernetes/elsewhere.yaml", "moved", False, None),
    ],
)
def test_classify_maps_event_paths_to_hints(path, etype, is_dir, expected):
    assert classify(ROOT, path, event_type=etype, is_directory=is_dir) == expected


def test_a_hint_is_due_after_quiet_time_but_never_later_than_max_delay():
    h = Hints(debounce=0.3, max_delay=1.0)
    a = Hint("file", "a.yaml")
    h.add(a, now=10.0)
    h.add(a, now=10.2)
    assert h.take_due(now=10.4) == []  # 0.2 s since the last event
    assert h.next_deadline() == pytest.approx(10.5)
    assert h.take_due(now=10.5) == [a]
    assert h.pending() == 0
    # a file written continuously is still looked at after max_delay
    for i in range(20):
        h.add(a, now=20.0 + i * 0.1)
    assert h.take_due(now=21.0) == [a]
    h.close()


def test_a_new_hint_makes_the_wakeup_pipe_readable_once():
    h = Hints(debounce=0.1)
    assert select.select([h.fileno()], [], [], 0)[0] == []
    h.add(Hint("file", "a.yaml"))
    h.add(Hint("file", "a.yaml"))
    assert select.select([h.fileno()], [], [], 0)[0] == [h.fileno()]
    h.drain()
    assert select.select([h.fileno()], [], [], 0)[0] == []
    assert h.take_all() == [Hint("file", "a.yaml")]
    h.close()


def test_the_watcher_turns_real_writes_into_hints_and_ignores_its_own_reads(tmp_path):
    mdir = tmp_path / "manifests"
    (mdir / ".staticpodd/parked").mkdir(parents=True)
    (mdir / "etcd.yaml").write_text("x")
    hints = Hints(debounce=0)
    w = Watcher(mdir, hints)
    assert w.ensure() == "started" and w.watching
    assert w.ensure() is None
    try:
        (mdir / "etcd.yaml").read_text()  # a read (the daemon's own scan) is no hint
        (mdir / "kube-scheduler.yaml").write_text("y")
        (mdir / ".staticpodd/parked/etcd.yaml").write_text("z")
        (mdir / ".hidden").write_text("h")
        seen: set[Hint] = set()

        def got_both() -> bool:
            seen.update(hints.take_all())
            return {Hint("file", "kube-scheduler.yaml"), Hint("parked", "etcd.yaml")} <= seen

        wait_until(got_both, timeout=10)
        assert Hint("file", "etcd.yaml") not in seen
        assert all(not h.name.startswith(".") for h in seen)
    finally:
        w.stop()
        hints.close()


def test_parked_is_watched_once_it_exists_and_subtrees_never(tmp_path):
    mdir = tmp_path / "manifests"
    (mdir / "apps").mkdir(parents=True)
    hints = Hints(debounce=0)
    w = Watcher(mdir, hints)
    try:
        assert w.ensure() == "started" and not w.watching_parked
        (mdir / ".staticpodd/parked").mkdir(parents=True)
        assert w.ensure() is None and w.watching_parked
        assert DIRECTORY in hints.take_all()  # a new parked/ watch asks for a rescan
        (mdir / "apps/web.yaml").write_text("w")  # never read by the kubelet: no watch, no hint
        (mdir / ".staticpodd/parked/etcd.yaml").write_text("p")
        wait_until(lambda: Hint("parked", "etcd.yaml") in hints.take_all(), timeout=10)
        assert [h for h in hints.take_all() if h.name == "web.yaml"] == []
        # parked/ removed and made again: the watch follows
        os.unlink(mdir / ".staticpodd/parked/etcd.yaml")
        (mdir / ".staticpodd/parked").rmdir()
        wait_until(lambda: (w.ensure(), not w.watching_parked)[1], timeout=10)
        (mdir / ".staticpodd/parked").mkdir()
        assert w.ensure() is None and w.watching_parked
        (mdir / ".staticpodd/parked/kube-scheduler.yaml").write_text("s")
        wait_until(lambda: Hint("parked", "kube-scheduler.yaml") in hints.take_all(), timeout=10)
    finally:
        w.stop()
        hints.close()


def test_the_watcher_notices_a_replaced_and_a_missing_directory(tmp_path):
    mdir = tmp_path / "manifests"
    mdir.mkdir()
    hints = Hints(debounce=0)
    w = Watcher(mdir, hints)
    try:
        assert w.ensure() == "started"
        os.rename(mdir, tmp_path / "old")
        (tmp_path / "new").mkdir()
        os.rename(tmp_path / "new", mdir)
        assert w.ensure() == "replaced" and w.generation == 2
        (mdir / "a.yaml").write_text("a")
        wait_until(lambda: Hint("file", "a.yaml") in hints.take_all(), timeout=10)
        os.unlink(mdir / "a.yaml")
        mdir.rmdir()
        assert w.ensure() == "missing" and not w.watching
        assert w.ensure() is None
        mdir.mkdir()
        assert w.ensure() == "recreated" and w.watching
    finally:
        w.stop()
        hints.close()


def change(kind, *, valid=None, location="live", version=2, findings=()):
    return SimpleNamespace(
        component="kube-apiserver",
        file_name="kube-apiserver.yaml",
        location=location,
        kind=kind,
        digest="ab" * 32,
        version=version,
        valid=valid,
        findings=list(findings),
    )


def test_an_external_edit_is_a_warning_with_actor_external():
    plan = plan_changes([change("modified", valid=True)], Config.default())
    assert [r.event for r in plan.reports] == [Event.EXTERNAL_CHANGE]
    r = plan.reports[0]
    assert r.priority == WARNING and r.fields["actor"] == "external" and r.fields["version"] == 2
    assert plan.actions == []


def test_an_invalid_write_is_an_error_and_restored_only_under_restore():
    bad = Finding("yaml-syntax", "error", "kube-apiserver.yaml", 3, 1, None, "tab: --secret=x", None)
    ch = change("modified", valid=False, findings=[bad])
    alert = plan_changes([ch], Config.default())
    assert [r.event for r in alert.reports] == [Event.EXTERNAL_CHANGE, Event.INVALID_LIVE]
    assert alert.reports[1].priority == ERR and alert.actions == []
    assert "--secret" not in alert.reports[1].message  # finding messages are not copied
    assert "yaml-syntax:3" in alert.reports[1].message
    restore = plan_changes([ch], Config.default().with_changes(on_invalid="restore"))
    assert [(a.verb, a.target) for a in restore.actions] == [("restore", "kube-apiserver")]
    # never "restore" over a broken park or an adopted first version
    for kind in ("park-broken", "adopted"):
        assert plan_changes([change(kind, valid=False)], Config(on_invalid="restore")).actions == []


def test_removals_and_broken_parks_use_their_own_events():
    plan = plan_changes(
        [change("removed", version=None), change("parked-copy-removed", location="parked"), change("park-broken")],
        Config.default(),
    )
    assert [r.event for r in plan.reports] == [Event.EXTERNAL_REMOVAL, Event.EXTERNAL_REMOVAL, Event.PARK_BROKEN]
    assert plan.reports[2].priority == ERR
    adopted = plan_changes([change("adopted", valid=True)], Config.default()).reports
    assert [(r.event, r.priority) for r in adopted] == [(Event.EXTERNAL_CHANGE, NOTICE)]  # an edit by hand is adopted, not reverted


def test_directory_findings_are_reported_once_and_strays_quarantined_by_policy():
    stray = Finding("stray", "warning", f"{ROOT}/kube-apiserver.yaml.bak", None, None, None, "stray", "mv")
    dup = Finding("duplicate-pod", "error", f"{ROOT}/kube-apiserver.yaml", None, None, None, "dup", None)
    schema = Finding("schema-type", "error", f"{ROOT}/etcd.yaml", 4, 3, "spec", "bad", None)
    assert [is_directory_finding(f) for f in (stray, dup, schema)] == [True, True, False]
    assert [finding_event(f) for f in (stray, dup)] == [Event.STRAY_FOUND, Event.DUPLICATE_POD]
    first = plan_findings([stray, dup], Config.default(), set())
    assert [r.event for r in first.reports] == [Event.STRAY_FOUND, Event.DUPLICATE_POD]
    assert first.actions == []
    from staticpodd.reconcile import finding_key

    again = plan_findings([stray, dup], Config.default(), {finding_key(stray), finding_key(dup)})
    assert again.reports == []
    q = plan_findings([stray], Config(on_stray="quarantine"), {finding_key(stray)})
    assert [(a.verb, a.target) for a in q.actions] == [("quarantine", "kube-apiserver.yaml.bak")]


def test_expired_parks_are_unparked_and_future_ones_left_alone():
    parks = [
        SimpleNamespace(
            component="kube-scheduler", file_name="kube-scheduler.yaml", until=100.0, actor="alice", reason="drill"
        ),
        SimpleNamespace(component="etcd", file_name="etcd.yaml", until=500.0, actor="bob", reason=None),
        SimpleNamespace(component="x", file_name="x.yaml", until=None, actor="bob", reason=None),
    ]
    plan = plan_expired_parks(parks, now=200.0)
    assert [(a.verb, a.target) for a in plan.actions] == [("unpark", "kube-scheduler")]
    assert plan.reports[0].event is Event.PARK_EXPIRED and plan.reports[0].fields["parked_by"] == "alice"


def test_status_line_is_one_short_line():
    assert status_line({"live": 4, "parked": 1}, []) == "4 live, 1 parked; no problems"
    line = status_line(
        {"live": 3, "parked": 0, "missing": 1},
        [{"code": "stray", "path": f"{ROOT}/x.bak"}, {"code": "invalid-live", "path": f"{ROOT}/etcd.yaml"}],
    )
    assert line == "3 live, 0 parked, 1 missing; 2 problems: stray x.bak, …"
    assert "\n" not in line


def test_the_background_journal_keeps_order_and_flushes_on_close(tmp_path):
    """Entries go to the real journald through the writer thread, in order, all of them."""
    from daemon_harness import journal

    from staticpodd.daemon.bgjournal import BackgroundJournal

    root = str(tmp_path / "bg-journal-root")
    j = BackgroundJournal("staticpodd", root)
    for i in range(30):
        j.log(Event.EXTERNAL_CHANGE, f"entry {i}", priority=WARNING, seq=i)
    j.close()
    got = wait_until(lambda: (lambda es: es if len(es) >= 30 else None)(journal(tmp_path / "bg-journal-root")))
    assert [int(e["SEQ"]) for e in got] == list(range(30))
    assert j.dropped == 0


def test_a_protected_file_is_never_quarantined_and_every_finding_names_its_file():
    """A component's manifest (e.g. one restored in the same pass) is reported, never moved out."""
    stray = Finding("stray", "warning", f"{ROOT}/etcd.yaml", None, None, None, "stray file: not a Pod", None)
    bak = Finding("stray", "warning", f"{ROOT}/etcd.yaml.bak", None, None, None, "stray file (backup)", None)
    plan = plan_findings([stray, bak], Config(on_stray="quarantine"), set(), protect={"etcd.yaml"})
    assert [(a.verb, a.target) for a in plan.actions] == [("quarantine", "etcd.yaml.bak")]
    assert [r.message.split(":")[0] for r in plan.reports] == ["etcd.yaml", "etcd.yaml.bak"]
    assert "not quarantined" in plan.reports[0].message and "quarantining it" in plan.reports[1].message


def test_a_leftover_by_its_name_is_never_restored():
    from staticpodd.reconcile import stray_by_name

    assert stray_by_name("kube-apiserver.yaml.bak") and stray_by_name("4913")
    assert stray_by_name("kube-apiserver.yaml") is None
    ch = change("modified", valid=False)
    ch.file_name = "kube-apiserver.yaml.bak"
    ch.component = "kube-apiserver.yaml.bak"
    assert plan_changes([ch], Config(on_invalid="restore")).actions == []


def test_closing_a_file_held_open_for_writing_is_a_hint(tmp_path):
    """A restore held back for a writer is re-checked when the writer closes the file: the
    close (inotify IN_CLOSE_WRITE, watchdog's FileClosedEvent) must reach the hints, even when
    the last write was long before (its own hint already taken)."""
    mdir = tmp_path / "manifests"
    mdir.mkdir()
    hints = Hints(debounce=0)
    w = Watcher(mdir, hints)
    assert w.ensure() == "started"
    try:
        fh = open(mdir / "kube-scheduler.yaml", "wb")
        fh.write(b"apiVersion: v1\n")
        fh.flush()
        wait_until(lambda: Hint("file", "kube-scheduler.yaml") in hints.take_all(), timeout=10)
        # create and modify may arrive as separate events: drain until quiet for 0.5 s
        quiet_since = time.monotonic()
        deadline = quiet_since + 10
        while time.monotonic() - quiet_since < 0.5:
            assert time.monotonic() < deadline, "hints never went quiet while the file was held open"
            if hints.take_all():
                quiet_since = time.monotonic()
            select.select([], [], [], 0.05)
        fh.close()
        wait_until(lambda: Hint("file", "kube-scheduler.yaml") in hints.take_all(), timeout=10, what="close hint")
    finally:
        w.stop()
        hints.close()


def test_a_broken_park_under_restore_says_why_it_is_not_restored():
    plan = plan_changes([change("park-broken", valid=False)], Config(on_invalid="restore"))
    (inv,) = [r for r in plan.reports if r.event is Event.INVALID_LIVE]
    assert "on_invalid=alert" not in inv.message and "is parked" in inv.message, inv.message
    assert inv.fields["policy"] == "restore" and inv.fields["policy_action"] == "none"


def test_a_file_over_only_our_size_limit_is_a_warning_that_the_kubelet_still_runs():
    big = Finding("too-large", "error", "kube-apiserver.yaml", None, None, None, "file is …", None)
    ch = change("modified", valid=False, findings=[big])
    cfg = Config(on_invalid="alert")
    ours = plan_changes([ch], cfg, sizes={"kube-apiserver.yaml": 1_200_000}).reports[1]
    assert ours.priority == WARNING and "still runs it" in ours.message and "drops" not in ours.message
    assert "max_manifest_bytes=1048576" in ours.message and ours.fields["size"] == 1_200_000
    kubelets = plan_changes([ch], cfg, sizes={"kube-apiserver.yaml": 11 * 1024 * 1024}).reports[1]
    assert kubelets.priority == ERR and "the kubelet drops its pod" in kubelets.message
    other = Finding("yaml-syntax", "error", "kube-apiserver.yaml", 3, 1, None, "x", None)
    both = change("modified", valid=False, findings=[big, other])
    assert "drops its pod" in plan_changes([both], cfg, sizes={"kube-apiserver.yaml": 1_200_000}).reports[1].message
