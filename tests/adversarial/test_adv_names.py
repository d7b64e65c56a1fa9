"""Adversarial file names: two files with one stem (web.yaml + web.yml / web.json); names that
are not valid UTF-8 in the kubelet's directory (a Latin-1 name from an old
tarball). The kubelet reads such a file like any other; the store keys by name as text, so it
cannot be tracked, but it must never stop the other components from being managed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from spd_testlib import REPO, journal_entries, small_pod

ODD = os.fsdecode(b"w\xffb.yaml")  # surrogate-escaped, as os.listdir gives it


def _write_odd(manifests, body: bytes) -> None:
    (manifests / ODD).write_bytes(body)


def test_every_verb_still_works_and_status_and_doctor_name_the_file(kubeadm, ctl, tmp_path) -> None:
    _write_odd(kubeadm.manifests, b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web3\nspec:\n"
                                  b"  containers:\n  - name: w\n    image: nginx:1.27\n")
    assert ctl("park", "kube-scheduler").rc == 0
    assert ctl("unpark", "kube-scheduler").rc == 0
    src = tmp_path / "kube-scheduler.yaml"
    src.write_bytes((kubeadm.manifests / "kube-scheduler.yaml").read_bytes() + b"# x\n")
    assert ctl("apply", str(src)).rc == 0
    assert ctl("history", "kube-scheduler").rc == 0
    st = ctl("status", "--json")
    assert st.rc == 0
    assert st.json()["untrackable"] == [str(kubeadm.manifests / "w\\xffb.yaml")]
    human = ctl("status")
    assert "w\\xffb.yaml" in human.err and "not valid UTF-8" in human.err
    doc = ctl("doctor", "--json")
    assert doc.rc == 1 and [p["code"] for p in doc.json()["problems"]] == ["name-not-utf8"]
    assert ODD.encode("utf-8", "surrogateescape") in os.listdir(os.fsencode(kubeadm.manifests))  # untouched
    entries = journal_entries(kubeadm.root, want=lambda es: any(e.get("KIND") == "name-not-utf8" for e in es))
    assert any(e.get("KIND") == "name-not-utf8" and "w\\xffb.yaml" in e["MESSAGE"] for e in entries)


def test_park_counts_an_untrackable_file_that_defines_the_same_pod(kubeadm, ctl) -> None:
    """It keeps the pod running: parking kube-scheduler.yaml alone would not stop the scheduler."""
    _write_odd(kubeadm.manifests, (kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4, r.out
    assert "w\\xffb.yaml" in r.json()["error"]["message"] + r.json()["error"].get("hint", "")
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_the_daemon_keeps_recording_other_files(kubeadm) -> None:
    _write_odd(kubeadm.manifests, b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web3\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    d = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(kubeadm.root)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    def etcd_versions(at_least: int) -> list:
        deadline = time.monotonic() + 20
        rows: list = []
        while time.monotonic() < deadline:
            r = subprocess.run([sys.executable, "-m", "staticpodd.cli", "history", "etcd", "--json", "--root",
                                str(kubeadm.root)], env=env, capture_output=True, text=True)
            if r.returncode == 0:
                rows = json.loads(r.stdout)["versions"]
                if len(rows) >= at_least:
                    break
            time.sleep(0.2)
        return rows

    try:
        assert len(etcd_versions(1)) == 1  # the daemon's first scan adopted the directory
        _write_odd(kubeadm.manifests, b"apiVersion: v1\nkind: Pod\n")  # an inotify event for it, and invalid
        time.sleep(1)
        with open(kubeadm.manifests / "etcd.yaml", "ab") as f:
            f.write(b"# hand edit\n")
        rows = etcd_versions(2)
        assert len(rows) == 2, "the hand edit of etcd.yaml was not recorded"
        assert rows[-1]["action"] == "external"
    finally:
        d.terminate()
        _, err = d.communicate(timeout=20)
    assert "Traceback" not in err, err


# Regression (found by adversarial testing): web.yaml and web.yml were merged into one component.
def test_two_files_one_stem_are_kept_apart(sandbox, ctl_proc):
    sandbox.write("web.yaml", small_pod("web", "nginx:1.27"))
    sandbox.write("web.yml", small_pod("web3", "nginx:1.26"))
    assert ctl_proc("park", "web.yml").returncode == 0
    assert ctl_proc("unpark", "web.yml").returncode == 0
    st = json.loads(ctl_proc("status", "--json").stdout)
    rows = {c["file_name"]: c for c in st["components"]}
    assert set(rows) == {"web.yaml", "web.yml"}, rows.keys()
    assert not any(c["drift"] for c in rows.values()), rows
    h = ctl_proc("history", "web.yml", "--json")
    assert h.returncode == 0, h.stdout
    assert {v["file_name"] for v in json.loads(h.stdout)["versions"]} == {"web.yml"}


def test_a_non_utf8_name_as_an_argument_is_a_usage_error_and_hints_say_mv(kubeadm, ctl, tmp_path) -> None:
    odd = os.fsdecode(b"kube-scheduler.yaml.\xfe")
    (kubeadm.manifests / odd).write_bytes((kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4 and "rename or move kube-scheduler.yaml.\\xfe" in r.json()["error"]["hint"]
    for verb in ("park", "unpark", "history", "show", "diff", "rollback", "edit"):
        r = ctl(verb, odd, "--json")
        assert r.rc == 2 and r.json()["error"]["code"] == "usage", (verb, r.out, r.err)
        assert "not valid UTF-8" in r.json()["error"]["message"]
    src = tmp_path / os.fsdecode(b"n\xfe.yaml")
    src.write_bytes(b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: n\n")
    r = ctl("apply", str(src), "--json")
    assert r.rc == 2 and "--as" in r.json()["error"]["hint"]


def test_a_long_lived_engine_forgets_a_renamed_file_and_reports_its_return(kubeadm) -> None:
    """The daemon's engine lives for weeks: a non-UTF-8 file renamed away must leave its status,
    and the same name coming back is a new directory problem, logged again."""
    from staticpodd.engine import Actor, Engine
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    eng = Engine(Layout.build(kubeadm.root), actor=Actor("t", 0), journal=Journal("staticpodd", str(kubeadm.root)))
    body = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web3\n"
    _write_odd(kubeadm.manifests, body)
    eng.scan()
    assert eng.status()["untrackable"] == [str(kubeadm.manifests / "w\\xffb.yaml")]
    os.rename(kubeadm.manifests / ODD, kubeadm.manifests / "web3.yaml")
    eng.scan()
    assert eng.status()["untrackable"] == []
    os.rename(kubeadm.manifests / "web3.yaml", kubeadm.manifests / ODD)
    eng.scan()
    assert eng.status()["untrackable"] == [str(kubeadm.manifests / "w\\xffb.yaml")]
    entries = journal_entries(kubeadm.root, want=lambda es: sum(e.get("KIND") == "name-not-utf8" for e in es) >= 2)
    assert sum(e.get("KIND") == "name-not-utf8" for e in entries) == 2  # once each time it appeared
