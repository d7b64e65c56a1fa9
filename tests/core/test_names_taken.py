"""A file without a manifest suffix whose name is another file's component (``kube-scheduler``
next to ``kube-scheduler.yaml``): the kubelet reads it, but it never becomes that component. The
real manifest keeps its component, park, history and deadline whatever else appears; the other
file is not tracked, and status, doctor and the journal name it with the fix. A suffix-less file
no other file owns is still its own component, as README says."""

from __future__ import annotations

import json
import os

from spd_testlib import journal_entries, small_pod

from staticpodd.engine import Actor, Engine
from staticpodd.journal import Journal
from staticpodd.layout import Layout
from staticpodd.store.versions import digest_of

SCHED = "kube-scheduler.yaml"
NOTES = b"notes: drill running, unpark after 06:00\n"


def _history(ctl, name: str) -> list[dict]:
    r = ctl("history", name, "--json")
    assert r.rc == 0, r.err
    return r.json()["versions"]


def _row(st: dict, component: str) -> dict:
    return next(c for c in st["components"] if c["component"] == component)


def test_a_notes_file_named_like_a_parked_component_keeps_its_park_and_deadline(kubeadm, ctl) -> None:
    """1a: the notes file is not recorded as kube-scheduler unparked by hand."""
    original = (kubeadm.manifests / SCHED).read_bytes()
    assert ctl("park", "kube-scheduler", "--for", "30m", "--reason", "manual scheduling drill").rc == 0
    kubeadm.write("kube-scheduler", NOTES)
    assert ctl("park", "kube-controller-manager", "--reason", "x").rc == 0  # a changing verb scans
    st = ctl("status", "--json").json()
    row = _row(st, "kube-scheduler")
    assert (row["state"], row["file_name"]) == ("parked", SCHED)
    assert row["parked"]["reason"] == "manual scheduling drill" and row["parked"]["until"] is not None
    assert {c["file_name"] for c in st["components"]} == {"etcd.yaml", "kube-apiserver.yaml",
                                                          "kube-controller-manager.yaml", SCHED}
    versions = _history(ctl, "kube-scheduler")
    assert {v["file_name"] for v in versions} == {SCHED}
    assert digest_of(NOTES) not in {v["digest"] for v in versions}
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0, r.out + r.err
    assert (kubeadm.manifests / SCHED).read_bytes() == original
    assert (kubeadm.manifests / "kube-scheduler").read_bytes() == NOTES


def test_park_of_the_component_parks_its_manifest_not_a_later_notes_file(kubeadm, ctl) -> None:
    """1b: with the node recorded, a later notes file does not hijack the name."""
    assert ctl("park", "etcd", "--force").rc == 0
    assert ctl("unpark", "etcd").rc == 0
    kubeadm.write("kube-scheduler", NOTES)
    r = ctl("park", "kube-scheduler", "--for", "30m", "--json")
    assert r.rc == 0, r.out + r.err
    assert r.json()["file_name"] == SCHED
    assert not (kubeadm.manifests / SCHED).exists() and (kubeadm.parked / SCHED).exists()
    assert (kubeadm.manifests / "kube-scheduler").read_bytes() == NOTES
    assert not (kubeadm.parked / "kube-scheduler").exists()
    assert {v["file_name"] for v in _history(ctl, "kube-scheduler")} == {SCHED}


def test_status_doctor_and_the_journal_name_the_file_the_reason_and_the_fix(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler", "--for", "30m").rc == 0
    kubeadm.write("kube-scheduler", NOTES)
    assert ctl("park", "kube-controller-manager").rc == 0
    reason = "its name is the component kube-scheduler of kube-scheduler.yaml"
    st = ctl("status", "--json").json()
    assert st["names_taken"] == [{
        "file_name": "kube-scheduler", "location": "live", "component": "kube-scheduler",
        "owner": SCHED, "reason": reason + " (parked)",
        "hint": "rename it, e.g. to kube-scheduler.notes, or move it out of the directory",
    }]
    human = ctl("status")
    assert human.rc == 0
    assert f"kube-scheduler: {reason} (parked)" in human.err and "kube-scheduler.notes" in human.err
    assert "STRAY" not in human.out  # no row for it: it is no component
    doc = ctl("doctor", "--json").json()
    taken = [p for p in doc["problems"] if p["code"] == "name-taken"]
    assert len(taken) == 1 and reason in taken[0]["message"] and "kube-scheduler.notes" in taken[0]["message"]
    assert taken[0]["severity"] == "warning"  # what the file does to pods is the findings' to say
    assert taken[0]["path"] == str(kubeadm.manifests / "kube-scheduler")
    entries = journal_entries(kubeadm.root, want=lambda es: any(e.get("KIND") == "name-taken" for e in es))
    found = [e for e in entries if e.get("KIND") == "name-taken"]
    assert found and found[0]["FILE_NAME"] == "kube-scheduler" and reason in found[0]["MESSAGE"]
    assert "COMPONENT" not in found[0]


def test_a_notes_file_that_copies_the_manifest_is_still_a_twin_that_keeps_the_pod_running(kubeadm, ctl) -> None:
    """The kubelet runs it too: parking kube-scheduler.yaml alone would not stop the scheduler, and
    the hint does not send the operator to ``park kube-scheduler`` again."""
    assert ctl("park", "etcd", "--force").rc == 0 and ctl("unpark", "etcd").rc == 0
    kubeadm.write("kube-scheduler", (kubeadm.manifests / SCHED).read_bytes())
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4, r.out
    err = r.json()["error"]
    assert "kube-scheduler also defines pod kube-system/kube-scheduler" in err["message"]
    assert "move kube-scheduler out of the directory" in err["hint"] and "staticpodctl park" not in err["hint"]
    assert (kubeadm.manifests / SCHED).exists() and (kubeadm.manifests / "kube-scheduler").exists()
    v = ctl("validate", str(kubeadm.manifests), "--json")
    assert any(f["code"] == "duplicate-pod" for f in v.json()["findings"])
    r = ctl("park", "kube-scheduler", "--force", "--json")  # the operator means it: the twin runs on
    assert r.rc == 0 and r.json()["file_name"] == SCHED and r.json()["keeps_running_from"] == "kube-scheduler"
    doc = ctl("doctor", "--json").json()
    bypassed = [p for p in doc["problems"] if p["code"] == "park-bypassed"]
    assert len(bypassed) == 1 and "move kube-scheduler out of the directory too" in bypassed[0]["message"]


def test_the_notes_file_given_by_its_path_is_refused_not_taken_for_the_component(kubeadm, ctl) -> None:
    kubeadm.write("kube-scheduler", NOTES)
    before = kubeadm.snapshot()
    r = ctl("park", str(kubeadm.manifests / "kube-scheduler"), "--json")
    assert r.rc == 4, r.out
    err = r.json()["error"]
    assert "its name is the component kube-scheduler of kube-scheduler.yaml" in err["message"]
    assert "kube-scheduler.notes" in err["hint"]
    assert kubeadm.snapshot() == before  # nothing moved, nothing parked


def test_a_suffix_less_file_no_other_file_owns_is_still_its_own_component(kubeadm, ctl) -> None:
    kubeadm.write("my-agent", small_pod("my-agent"))
    r = ctl("park", "my-agent", "--json")
    assert r.rc == 0, r.out
    assert (r.json()["component"], r.json()["file_name"]) == ("my-agent", "my-agent")
    assert ctl("unpark", "my-agent").rc == 0
    st = ctl("status", "--json").json()
    assert _row(st, "my-agent")["file_name"] == "my-agent" and st["names_taken"] == []


def test_with_nothing_recorded_a_sibling_with_a_suffix_owns_the_stem_whatever_the_order(sandbox, monkeypatch) -> None:
    """No store yet: ``web`` sorts before ``web.yaml``, yet web.yaml is component web. When it goes,
    the same (long-lived, as the daemon's) engine finds ``web`` its own component at the next listing."""
    monkeypatch.setenv("STATICPODD_NO_JOURNAL", "1")
    sandbox.write("web.yaml", small_pod("web"))
    sandbox.write("web", NOTES)
    eng = Engine(Layout.build(sandbox.root), actor=Actor("t", 0), journal=Journal("staticpodctl", str(sandbox.root)))
    try:
        st = eng.status()
        assert [(c["component"], c["file_name"]) for c in st["components"]] == [("web", "web.yaml")]
        assert [(t["file_name"], t["owner"]) for t in st["names_taken"]] == [("web", "web.yaml")]
        assert eng.resolve("web").file_name == "web.yaml"
        os.remove(sandbox.manifests / "web.yaml")
        st = eng.status()
        assert [(c["component"], c["file_name"]) for c in st["components"]] == [("web", "web")]
        assert st["names_taken"] == []
        assert eng.resolve("web").file_name == "web"
    finally:
        eng.close()


def test_a_notes_file_stays_untracked_when_the_recorded_manifest_is_removed(kubeadm, ctl) -> None:
    """The component stays the manifest's (rollback puts it back, under its own name), as the
    first file recorded under a stem keeps it (web.yaml and web.yml)."""
    original = (kubeadm.manifests / SCHED).read_bytes()
    assert ctl("park", "etcd", "--force").rc == 0 and ctl("unpark", "etcd").rc == 0
    kubeadm.write("kube-scheduler", NOTES)
    os.remove(kubeadm.manifests / SCHED)
    assert ctl("park", "etcd", "--force").rc == 0 and ctl("unpark", "etcd").rc == 0
    st = ctl("status", "--json").json()
    assert (_row(st, "kube-scheduler")["state"], _row(st, "kube-scheduler")["file_name"]) == ("removed", SCHED)
    assert [t["file_name"] for t in st["names_taken"]] == ["kube-scheduler"]
    assert "removed" in st["names_taken"][0]["reason"]
    assert ctl("rollback", "kube-scheduler").rc == 0
    assert (kubeadm.manifests / SCHED).read_bytes() == original
    assert (kubeadm.manifests / "kube-scheduler").read_bytes() == NOTES
    assert {v["file_name"] for v in _history(ctl, "kube-scheduler")} == {SCHED}


def test_a_manifest_moved_out_by_hand_and_back_keeps_its_component(kubeadm, ctl, tmp_path) -> None:
    """A notes file seen while the manifest was away does not take the name from it."""
    assert ctl("park", "etcd", "--force").rc == 0 and ctl("unpark", "etcd").rc == 0
    kubeadm.write("kube-scheduler", NOTES)
    os.rename(kubeadm.manifests / SCHED, tmp_path / SCHED)
    assert ctl("park", "etcd", "--force").rc == 0 and ctl("unpark", "etcd").rc == 0
    os.rename(tmp_path / SCHED, kubeadm.manifests / SCHED)
    assert ctl("park", "kube-scheduler").rc == 0
    assert (kubeadm.parked / SCHED).exists() and (kubeadm.manifests / "kube-scheduler").read_bytes() == NOTES
    st = ctl("status", "--json").json()
    assert (_row(st, "kube-scheduler")["state"], _row(st, "kube-scheduler")["file_name"]) == ("parked", SCHED)
    assert "kube-scheduler.yaml" not in {c["component"] for c in st["components"]}
    assert {v["file_name"] for v in _history(ctl, "kube-scheduler")} == {SCHED}


def test_the_json_of_status_is_one_line_with_the_taken_name(kubeadm, ctl) -> None:
    kubeadm.write("etcd", NOTES)
    r = ctl("status", "--json")
    assert r.rc == 0 and len(r.out.splitlines()) == 1
    body = json.loads(r.out)
    assert [(t["file_name"], t["owner"], t["location"]) for t in body["names_taken"]] == [("etcd", "etcd.yaml", "live")]
    assert "etcd" not in {c["file_name"] for c in body["components"]}
