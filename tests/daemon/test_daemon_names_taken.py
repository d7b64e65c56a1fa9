"""The daemon and a file without a manifest suffix named like another file's component (a
``kube-scheduler`` notes file beside ``kube-scheduler.yaml``): it is no component. The park and
its deadline stand, ``on_invalid: restore`` never writes the scheduler's bytes into it, and
``on_stray: quarantine`` moves it out like any stray leftover."""

from __future__ import annotations

import json
import time

import pytest
from daemon_harness import history, journal, make_root, sha, staticpodctl, wait_journal, wait_until

pytestmark = pytest.mark.slow

MANIFESTS = "etc/kubernetes/manifests"
NOTES = b"notes: drill running, unpark after 06:00\n"


def _taken_seen(root):
    return wait_journal(root, "DIRECTORY_PROBLEM",
                        lambda e: e.get("KIND") == "name-taken" and e.get("FILE_NAME") == "kube-scheduler")


def test_on_invalid_restore_does_not_treat_a_notes_file_as_the_scheduler(tmp_path, run_daemon):
    root = make_root(tmp_path, "debounce: 0.2\non_invalid: restore\n")
    mdir = root / MANIFESTS
    good = (mdir / "kube-scheduler.yaml").read_bytes()
    d = run_daemon(root)
    d.wait_ready()
    (mdir / "kube-scheduler").write_bytes(NOTES)
    e = wait_until(lambda: next((e for e in journal(root) if e.get("FILE_NAME") == "kube-scheduler"
                                 and e.get("STATICPODD_EVENT") != "STRAY_FOUND"), None),
                   what="the daemon looked at the notes file")
    time.sleep(1.0)  # a restore, if one were planned, would be done by now
    assert (mdir / "kube-scheduler").read_bytes() == NOTES
    assert not journal(root, "RESTORED_LAST_GOOD") and not journal(root, "POLICY_ACTION_FAILED")
    assert (mdir / "kube-scheduler.yaml").read_bytes() == good
    versions = history(root, "kube-scheduler")
    assert [v.file_name for v in versions] == ["kube-scheduler.yaml"] and versions[-1].digest == sha(good)
    assert e.get("KIND") == "name-taken", e
    inv = wait_journal(root, "INVALID_LIVE", lambda e: e.get("FILE_NAME") == "kube-scheduler")
    assert "COMPONENT" not in inv and "kube-scheduler.yaml" in inv["MESSAGE"] and inv["POLICY_ACTION"] == "none"
    taken = wait_until(lambda: [p for p in d.heartbeat().get("problems", []) if p["code"] == "name-taken"])
    assert taken[0]["severity"] == "warning" and taken[0]["path"] == str(mdir / "kube-scheduler")


def test_the_deadline_unpark_still_fires_with_a_notes_file_named_like_the_component(tmp_path, run_daemon):
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    original = (mdir / "kube-scheduler.yaml").read_bytes()
    r = staticpodctl(root, "park", "kube-scheduler", "--for", "5s", "--reason", "drill")
    assert r.returncode == 0, r.stderr
    (mdir / "kube-scheduler").write_bytes(NOTES)
    d = run_daemon(root)
    d.wait_ready()
    assert d.heartbeat()["summary"]["parked"] == 1
    wait_until(lambda: (mdir / "kube-scheduler.yaml").exists(), timeout=20, what="unpark at the deadline")
    assert (mdir / "kube-scheduler.yaml").read_bytes() == original
    assert (mdir / "kube-scheduler").read_bytes() == NOTES
    e = wait_journal(root, "PARK_EXPIRED", lambda e: e.get("COMPONENT") == "kube-scheduler")
    assert e["REASON"] == "drill" and e["FILE_NAME"] == "kube-scheduler.yaml"
    wait_until(lambda: d.heartbeat().get("summary", {}).get("parked") == 0)
    assert {v.file_name for v in history(root, "kube-scheduler")} == {"kube-scheduler.yaml"}


def test_on_stray_quarantine_moves_the_notes_file_out_and_the_park_stands(tmp_path, run_daemon):
    root = make_root(tmp_path, "debounce: 0.2\non_stray: quarantine\n")
    mdir = root / MANIFESTS
    assert staticpodctl(root, "park", "kube-scheduler", "--reason", "drill").returncode == 0
    d = run_daemon(root)
    d.wait_ready()
    (mdir / "kube-scheduler").write_bytes(NOTES)
    wait_until(lambda: not (mdir / "kube-scheduler").exists(), what="the notes file quarantined")
    moved = [p for p in (mdir / ".staticpodd/quarantine").iterdir() if p.name.startswith("kube-scheduler.")]
    assert len(moved) == 1 and moved[0].read_bytes() == NOTES
    q = wait_journal(root, "STRAY_QUARANTINED", lambda e: e.get("FILE_NAME") == "kube-scheduler")
    assert "COMPONENT" not in q
    assert (mdir / ".staticpodd/parked/kube-scheduler.yaml").exists()
    st = staticpodctl(root, "status", "--json")
    row = next(c for c in json.loads(st.stdout)["components"] if c["component"] == "kube-scheduler")
    assert (row["state"], row["file_name"], row["parked"]["reason"]) == ("parked", "kube-scheduler.yaml", "drill")
    assert {v.file_name for v in history(root, "kube-scheduler")} == {"kube-scheduler.yaml"}
    _taken_seen(root)
