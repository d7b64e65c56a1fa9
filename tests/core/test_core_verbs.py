"""The operator's verbs end to end on a sandbox --root: park, unpark, apply, edit, history, show,
diff, rollback, status — real files, real SQLite, kubeadm's real manifests from the corpus."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest
from spd_testlib import Sandbox, small_pod

SCHED = "kube-scheduler.yaml"


def test_park_moves_the_scheduler_out_of_the_kubelets_sight_and_records_who_why_and_until(kubeadm, ctl) -> None:
    before = (kubeadm.manifests / SCHED).read_bytes()
    r = ctl("park", "kube-scheduler", "--for", "30m", "--reason", "manual scheduling drill", "--json")
    assert r.rc == 0, r.err
    body = r.json()
    assert body["ok"] and body["format_version"] == 1 and body["command"] == "park"
    assert body["park"]["reason"] == "manual scheduling drill"
    assert body["park"]["until"] is not None
    assert SCHED not in kubeadm.visible()
    assert (kubeadm.parked / SCHED).read_bytes() == before
    st = ctl("status", "--json").json()
    row = next(c for c in st["components"] if c["component"] == "kube-scheduler")
    assert row["state"] == "parked" and row["parked"]["actor"]


def test_unpark_brings_back_the_same_bytes_at_the_same_path_with_the_same_mode(kubeadm, ctl) -> None:
    os.chmod(kubeadm.manifests / SCHED, 0o640)
    before = (kubeadm.manifests / SCHED).read_bytes()
    assert ctl("park", "kube-scheduler").rc == 0
    r = ctl("unpark", "kube-scheduler")
    assert r.rc == 0, r.err
    assert (kubeadm.manifests / SCHED).read_bytes() == before
    assert stat.S_IMODE(os.stat(kubeadm.manifests / SCHED).st_mode) == 0o640
    assert not (kubeadm.parked / SCHED).exists()
    assert kubeadm.visible() == sorted(["etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", SCHED])


def test_the_file_name_is_accepted_as_well_as_the_component(kubeadm, ctl) -> None:
    assert ctl("park", SCHED).rc == 0
    assert ctl("unpark", SCHED).rc == 0


def test_parking_twice_is_a_conflict_that_says_since_when(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler", "--reason", "drill").rc == 0
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4
    err = r.json()["error"]
    assert err["code"] == "already-parked" and "drill" in err["message"]


def test_unpark_refuses_to_overwrite_a_live_file_that_appeared_meanwhile(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    kubeadm.write(SCHED, small_pod("kube-scheduler", namespace="kube-system"))
    before = kubeadm.snapshot()
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 4 and r.json()["error"]["code"] == "live-file-exists"
    after = kubeadm.snapshot()
    assert after[SCHED] == before[SCHED]
    assert after[f".staticpodd/parked/{SCHED}"] == before[f".staticpodd/parked/{SCHED}"]


def test_unpark_of_a_live_component_says_it_is_not_parked(kubeadm, ctl) -> None:
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 4 and r.json()["error"]["code"] == "not-parked"


def test_an_unknown_component_lists_the_known_ones(kubeadm, ctl) -> None:
    r = ctl("park", "kube-schedular", "--json")
    assert r.rc == 3
    err = r.json()["error"]
    assert err["code"] == "unknown-component" and "kube-scheduler" in err["hint"]
    assert err["hint"].startswith("did you mean kube-scheduler?")


def test_park_records_the_user_behind_sudo(kubeadm, ctl_proc) -> None:
    if os.getuid() != 0:
        pytest.skip("sudo attribution applies to root processes")
    r = ctl_proc("park", "kube-scheduler", "--json", env={"SUDO_USER": "alice"})
    assert r.returncode == 0, r.stderr
    park = json.loads(r.stdout)["park"]
    assert park["actor"] == "alice" and park["actor_via"] == "sudo"


def test_park_until_a_time_in_the_past_is_a_usage_error(kubeadm, ctl) -> None:
    r = ctl("park", "kube-scheduler", "--until", "2001-01-01T00:00Z", "--json")
    assert r.rc == 2 and r.json()["error"]["code"] == "usage"
    assert SCHED in kubeadm.visible()


def test_apply_validates_records_and_swaps_in_keeping_mode_and_owner(kubeadm, ctl, tmp_path) -> None:
    live = kubeadm.manifests / "kube-apiserver.yaml"
    os.chmod(live, 0o644)
    if os.geteuid() == 0:
        os.chown(live, 1234, 2345)
    new = live.read_text().replace("- --allow-privileged=true", "- --allow-privileged=true\n    - --profiling=false")
    src = tmp_path / "kube-apiserver.yaml"
    src.write_text(new)
    r = ctl("apply", str(src), "--reason", "CIS 1.2.18", "--json")
    assert r.rc == 0, r.err
    body = r.json()
    assert body["changed"] and body["version"] == 2 and "+    - --profiling=false" in body["diff"]["text"]
    assert body["diff"]["after"] == new and "--profiling" not in body["diff"]["before"]  # Ansible's form
    assert live.read_text() == new
    st = os.stat(live)
    assert stat.S_IMODE(st.st_mode) == 0o644
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 2345)
    hist = ctl("history", "kube-apiserver", "--json").json()["versions"]
    assert [(v["seq"], v["action"]) for v in hist] == [(1, "external"), (2, "apply")]
    assert hist[1]["reason"] == "CIS 1.2.18"


def test_a_new_component_is_created_0600(sandbox, ctl, tmp_path) -> None:
    src = tmp_path / "web.yaml"
    src.write_text(small_pod("web"))
    assert ctl("apply", str(src)).rc == 0
    p = sandbox.manifests / "web.yaml"
    assert p.read_text() == small_pod("web")
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    if os.geteuid() == 0:
        assert (os.stat(p).st_uid, os.stat(p).st_gid) == (0, 0)


def test_applying_the_same_bytes_again_touches_nothing(sandbox, ctl, tmp_path) -> None:
    src = tmp_path / "web.yaml"
    src.write_text(small_pod("web"))
    assert ctl("apply", str(src), "--detailed-exitcode").rc == 2
    live = sandbox.manifests / "web.yaml"
    st1 = os.stat(live)
    r = ctl("apply", str(src), "--detailed-exitcode", "--json")
    assert r.rc == 0 and r.json()["changed"] is False
    st2 = os.stat(live)
    assert (st1.st_ino, st1.st_mtime_ns, st1.st_ctime_ns, st1.st_mode) == (
        st2.st_ino, st2.st_mtime_ns, st2.st_ctime_ns, st2.st_mode)
    assert [v["seq"] for v in ctl("history", "web", "--json").json()["versions"]] == [1]


def test_apply_check_and_diff_change_nothing_and_show_what_would(kubeadm, ctl, tmp_path) -> None:
    src = tmp_path / "kube-scheduler.yaml"
    src.write_text((kubeadm.manifests / SCHED).read_text().replace("--leader-elect=true", "--leader-elect=false"))
    before = kubeadm.snapshot()
    for flag in ("--check", "--diff"):
        r = ctl("apply", str(src), flag, "--json", "--detailed-exitcode")
        assert r.rc == 2, r.err
        body = r.json()
        assert body["changed"] and body["check"]
        assert "+    - --leader-elect=false" in body["diff"]["text"]
    assert kubeadm.snapshot() == before
    assert not (kubeadm.root / "var/lib/staticpodd/versions.sqlite3").exists()


def test_salt_can_read_changed_and_comment_from_the_last_line(sandbox, ctl, tmp_path) -> None:
    src = tmp_path / "web.yaml"
    src.write_text(small_pod("web"))
    last = ctl("apply", str(src), "--json").out.strip().splitlines()[-1]
    state = json.loads(last)
    assert state["changed"] is True and "web" in state["comment"]


@pytest.mark.parametrize(
    ("case", "line"),
    [("B05-empty.yaml", None), ("B22a-tab-indent.yaml", True), ("B08-daemonset.yaml", True),
     ("B09-multidoc-configmap-first.yaml", True), ("B12-no-name.yaml", None), ("B23-missing-comma.json", True)],
)
def test_an_invalid_manifest_is_refused_with_file_and_line_and_nothing_changes(kubeadm, ctl, corpus, case, line):
    before = kubeadm.snapshot()
    r = ctl("apply", str(corpus / "cases" / case), "--as", "kube-apiserver", "--json")
    assert r.rc == 1
    err = r.json()["error"]
    assert r.json()["changed"] is False
    assert err["code"] == "invalid-manifest"
    assert err["path"].endswith(case)
    assert err["findings"] and err["findings"][0]["severity"] == "error"
    if line:
        assert isinstance(err["line"], int)
    assert kubeadm.snapshot() == before


def test_human_errors_read_like_a_compiler(kubeadm, ctl, corpus) -> None:
    r = ctl("apply", str(corpus / "cases" / "B22a-tab-indent.yaml"), "--as", "kube-apiserver")
    assert r.rc == 1
    first = r.err.splitlines()[0]
    assert first.startswith(str(corpus / "cases" / "B22a-tab-indent.yaml") + ":")
    assert "error[" in first and "nothing was changed" in r.err


def test_a_second_file_defining_the_same_pod_is_refused_naming_it(kubeadm, ctl, tmp_path) -> None:
    (kubeadm.manifests / "kube-apiserver.yaml.bak").write_bytes((kubeadm.manifests / "kube-apiserver.yaml").read_bytes())
    src = tmp_path / "kube-apiserver.yaml"
    src.write_text((kubeadm.manifests / "kube-apiserver.yaml").read_text().replace("--v=2", "--v=3") + "\n# x\n")
    r = ctl("apply", str(src), "--json")
    assert r.rc == 4
    err = r.json()["error"]
    assert err["code"] == "conflict" and "kube-apiserver.yaml.bak" in err["message"]


def test_drift_is_recorded_before_any_change_so_nothing_is_lost(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-controller-manager").rc == 0  # first contact: everything is adopted
    hand = (kubeadm.manifests / SCHED).read_text() + "# edited by hand at 3 a.m.\n"
    (kubeadm.manifests / SCHED).write_text(hand)
    src = tmp_path / SCHED
    src.write_text(hand.replace("--leader-elect=true", "--leader-elect=false"))
    assert ctl("apply", str(src)).rc == 0
    hist = ctl("history", "kube-scheduler", "--json").json()["versions"]
    assert [v["action"] for v in hist] == ["external", "external", "apply"]
    assert hist[1]["actor"] == "external"
    shown = ctl("show", "kube-scheduler@2")
    assert shown.out == hand


def test_rollback_puts_the_previous_bytes_back_as_a_new_version(kubeadm, ctl, tmp_path) -> None:
    original = (kubeadm.manifests / SCHED).read_bytes()
    for v in ("--v=3", "--v=4"):
        src = tmp_path / SCHED
        src.write_bytes(original.replace(b"--leader-elect=true", b"--leader-elect=true\n    - " + v.encode()))
        assert ctl("apply", str(src)).rc == 0
    r = ctl("rollback", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["rolled_back_to"] == 2
    assert b"--v=3" in (kubeadm.manifests / SCHED).read_bytes()
    r = ctl("rollback", "kube-scheduler", "--to", "1", "--json")
    assert r.rc == 0 and r.json()["version"] == 5
    assert (kubeadm.manifests / SCHED).read_bytes() == original
    acts = [v["action"] for v in ctl("history", "kube-scheduler", "--json").json()["versions"]]
    assert acts == ["external", "apply", "apply", "rollback", "rollback"]
    assert ctl("rollback", "kube-scheduler", "--to", "99", "--json").json()["error"]["code"] == "unknown-version"


def test_diff_and_show_speak_in_versions(kubeadm, ctl, tmp_path) -> None:
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.manifests / SCHED).read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false"))
    assert ctl("apply", str(src)).rc == 0
    d = ctl("diff", "kube-scheduler", "1", "2").out
    assert d.startswith("--- kube-scheduler@1\n+++ kube-scheduler@2\n")
    assert "-    - --leader-elect=true" in d and "+    - --leader-elect=false" in d
    assert ctl("diff", "kube-scheduler").out == ""  # newest version vs live: no drift
    assert ctl("diff", "kube-scheduler", "1", "2").rc == 0  # plain diff: 0 either way
    assert ctl("diff", "kube-scheduler", "1", "2", "--exit-code").rc == 1  # as git diff --exit-code
    assert ctl("diff", "kube-scheduler", "--exit-code").rc == 0
    assert ctl("show", "kube-scheduler").out == src.read_text()
    assert ctl("show", "kube-scheduler@x", "--json").rc == 2


def test_apply_to_a_parked_component_updates_the_parked_copy_and_keeps_it_parked(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.parked / SCHED).read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false"))
    r = ctl("apply", str(src), "--json")
    assert r.rc == 0 and r.json()["location"] == "parked" and "stays parked" in r.json()["msg"]
    assert SCHED not in kubeadm.visible()
    assert (kubeadm.parked / SCHED).read_bytes() == src.read_bytes()
    r = ctl("apply", str(src), "--unpark", "--json")
    assert r.rc == 0 and r.json()["location"] == "live"
    assert (kubeadm.manifests / SCHED).read_bytes() == src.read_bytes()


def test_an_apply_to_a_parked_component_survives_the_loss_of_the_parked_copy(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.parked / SCHED).read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false"))
    assert ctl("apply", str(src)).rc == 0
    (kubeadm.parked / SCHED).unlink()  # the parked copy is lost
    r = ctl("unpark", "kube-scheduler")
    assert r.rc == 0, r.err
    assert (kubeadm.manifests / SCHED).read_bytes() == src.read_bytes()  # the applied bytes, not the pre-apply ones


def write_editor(tmp_path: Path, body: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text(f"import sys\np = sys.argv[1]\n{body}\n")
    return f"{sys.executable} {script}"


def test_edit_validates_the_staged_copy_before_the_swap(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", write_editor(tmp_path, (
        "s = open(p).read().replace('--leader-elect=true', '--leader-elect=false')\nopen(p, 'w').write(s)")))
    monkeypatch.delenv("VISUAL", raising=False)
    r = ctl("edit", "kube-scheduler", "--reason", "test", "--json")
    assert r.rc == 0, r.err
    assert b"--leader-elect=false" in (kubeadm.manifests / SCHED).read_bytes()
    assert ctl("history", "kube-scheduler", "--json").json()["versions"][-1]["action"] == "edit"
    assert not any((kubeadm.root / "run/staticpodd/edit").iterdir())


def test_an_invalid_edit_changes_nothing_and_keeps_the_users_work(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", write_editor(tmp_path, "open(p, 'w').write('apiVersion: v1\\nkind: Pod\\n\\tbad: tab\\n')"))
    monkeypatch.delenv("VISUAL", raising=False)
    before = kubeadm.snapshot()
    r = ctl("edit", "kube-scheduler")
    assert r.rc == 1
    assert kubeadm.snapshot() == before
    kept = list((kubeadm.root / "run/staticpodd/edit").glob("*/kube-scheduler.yaml"))
    assert len(kept) == 1 and "\tbad" in kept[0].read_text()
    assert str(kept[0]) in r.err


def test_an_edit_that_changes_nothing_records_nothing(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EDITOR", write_editor(tmp_path, "pass"))
    monkeypatch.delenv("VISUAL", raising=False)
    r = ctl("edit", "kube-scheduler")
    assert r.rc == 0 and "no changes" in r.out
    # the bytes opened are recorded first (adopted, so a concurrent write is a version after
    # them); the edit itself records nothing
    versions = ctl("history", "kube-scheduler", "--json").json()["versions"]
    assert [v["action"] for v in versions] == ["external"]
    assert ctl("edit", "kube-scheduler").rc == 0
    assert len(ctl("history", "kube-scheduler", "--json").json()["versions"]) == 1


def test_the_kubelets_staticPodPath_is_used_by_default(tmp_path, ctl) -> None:
    root = tmp_path / "node"
    (root / "var/lib/kubelet").mkdir(parents=True)
    (root / "var/lib/kubelet/config.yaml").write_text("kind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/pods\n")
    pods = root / "etc/kubernetes/pods"
    pods.mkdir(parents=True)
    (pods / "web.yaml").write_text(small_pod("web"))
    r = ctl("park", "web", root=root)
    assert r.rc == 0, r.err
    assert (pods / ".staticpodd/parked/web.yaml").exists()


def test_json_and_yml_and_gce_manifest_files_are_components(sandbox: Sandbox, ctl, corpus) -> None:
    sandbox.write("etcd.json", (corpus / "manifests" / "14-k8s-gce-etcd.json").read_bytes())
    sandbox.write("kube-addon-manager.manifest",
                  (corpus / "manifests" / "15-k8s-gce-kube-addon-manager.yaml").read_bytes())
    names = {c["component"]: c["file_name"] for c in ctl("status", "--json").json()["components"]}
    assert names == {"etcd": "etcd.json", "kube-addon-manager": "kube-addon-manager.manifest"}
    assert ctl("park", "kube-addon-manager").rc == 0
    assert (sandbox.parked / "kube-addon-manager.manifest").exists()
    assert ctl("park", "etcd", "--force").rc == 0 and (sandbox.parked / "etcd.json").exists()


def test_status_flags_strays_the_kubelet_would_run(kubeadm, ctl) -> None:
    (kubeadm.manifests / "kube-apiserver.yaml.bak").write_bytes(b"x")
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-apiserver.yaml.bak"]["stray"] is True
    assert "STRAY" in ctl("status").out


def test_usage_errors_are_json_too(ctl) -> None:
    r = ctl("park", "--json", "--bogus")
    assert r.rc == 2
    assert r.json()["error"]["code"] == "usage"


def test_the_config_sets_the_node_capacity_the_gate_judges_against(sandbox, ctl, tmp_path) -> None:
    cfg = sandbox.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("node_capacity:\n  cpu: '2'\n  memory: 4Gi\n")
    big = small_pod("toobig", extra="    resources:\n      requests:\n        cpu: '32'\n")
    src = tmp_path / "toobig.yaml"
    src.write_text(big)
    r = ctl("apply", str(src), "--json")
    assert r.rc == 1
    err = r.json()["error"]
    assert err["code"] == "invalid-manifest" and "OutOfcpu" in json.dumps(err)
    assert sandbox.visible() == []
    v = ctl("validate", str(src), "--json")
    assert v.rc == 1 and "OutOfcpu" in v.out
    assert ctl("validate", str(src), "--node-cpu", "64", "--json").rc == 0


def test_a_bad_config_is_refused_naming_the_key(sandbox, ctl, tmp_path) -> None:
    cfg = sandbox.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("lock_timeout: -5\n")
    src = tmp_path / "web.yaml"
    src.write_text(small_pod("web"))
    r = ctl("apply", str(src), "--json")
    assert r.rc == 78
    err = r.json()["error"]
    assert err["code"] == "config-invalid" and "lock_timeout" in err["message"]
    assert sandbox.visible() == []


def test_park_refuses_when_another_file_would_keep_the_pod_running(kubeadm, ctl) -> None:
    (kubeadm.manifests / "kube-scheduler.yaml.bak").write_bytes((kubeadm.manifests / SCHED).read_bytes())
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4
    err = r.json()["error"]
    assert err["code"] == "conflict" and "kube-scheduler.yaml.bak" in err["message"]
    assert "would not stop the pod" in err["message"]
    assert SCHED in kubeadm.visible()


def test_a_missing_or_mistyped_manifest_directory_is_an_error_not_an_empty_node(tmp_path, ctl) -> None:
    root = tmp_path / "no-such-node"
    for argv in (("status", "--json"), ("park", "kube-scheduler", "--json")):
        r = ctl(*argv, root=root)
        assert r.rc == 1 and r.json()["error"]["code"] == "fs-error"
        assert "does not exist" in r.json()["error"]["message"]
    assert not (root / "run").exists()


def test_a_park_for_zero_seconds_is_a_usage_error(kubeadm, ctl) -> None:
    r = ctl("park", "kube-scheduler", "--for", "0s", "--json")
    assert r.rc == 2 and r.json()["error"]["code"] == "usage"
    assert SCHED in kubeadm.visible()


@pytest.mark.parametrize("flag", ["--for", "--until"])
def test_an_empty_deadline_is_a_usage_error_not_a_park_without_one(kubeadm, ctl, flag) -> None:
    """``--for "$DURATION"`` with the variable unset parked with no deadline at all, silently:
    the one thing the deadline was there to prevent (a newcomer's try)."""
    r = ctl("park", "kube-scheduler", flag, "", "--json")
    assert r.rc == 2 and r.json()["error"]["code"] == "usage"
    assert SCHED in kubeadm.visible()


@pytest.mark.parametrize("when", [("--for", "99999999d"), ("--until", "9999-12-31T23:00Z")])
def test_a_park_deadline_past_ten_years_is_a_usage_error_and_status_keeps_working(kubeadm, ctl, when) -> None:
    """``--for 99999999d`` was accepted ("until 275817-…"), then status, doctor and the Ansible
    info module crashed on the deadline until someone unparked (a newcomer's try)."""
    r = ctl("park", "kube-scheduler", *when, "--json")
    assert r.rc == 2 and r.json()["error"]["code"] == "usage" and "10 years" in r.json()["error"]["message"]
    assert SCHED in kubeadm.visible()
    assert ctl("status", "--json").rc == 0


def test_an_invalid_config_does_not_block_status_or_unpark_but_blocks_apply(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    cfg = kubeadm.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("on_stray: quarantin\n")
    st = ctl("status")
    assert st.rc == 0 and "ignoring the invalid configuration" in st.err
    assert ctl("unpark", "kube-scheduler").rc == 0
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.manifests / SCHED).read_bytes() + b"# x\n")
    assert ctl("apply", str(src), "--json").rc == 78
    doc = ctl("doctor", "--json")
    assert doc.rc == 1 and any(p["code"] == "config-invalid" for p in doc.json()["problems"])


def test_doctor_reports_a_broken_park(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    (kubeadm.parked / SCHED).rename(kubeadm.manifests / SCHED)  # by hand, behind our back... kept as a copy:
    (kubeadm.parked / SCHED).write_bytes((kubeadm.manifests / SCHED).read_bytes())
    r = ctl("doctor", "--json")
    assert r.rc == 1
    assert any(p["code"] == "park-broken" for p in r.json()["problems"])


def test_a_top_level_json_flag_counts_for_validate(kubeadm, ctl) -> None:
    import io
    from contextlib import redirect_stdout

    from staticpodd import cli

    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = cli.main(["--json", "validate", str(kubeadm.manifests), "--root", str(kubeadm.root)])
    assert rc == 0
    assert json.loads(buf.getvalue().strip().splitlines()[-1])["command"] == "validate"


def test_a_component_removed_by_hand_stays_in_status_and_can_be_put_back(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-controller-manager").rc == 0 and ctl("unpark", "kube-controller-manager").rc == 0
    original = (kubeadm.manifests / SCHED).read_bytes()
    (kubeadm.manifests / SCHED).rename(tmp_path / "elsewhere.yaml")
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler"]["state"] == "removed"
    assert ctl("rollback", "kube-scheduler").rc == 0
    assert (kubeadm.manifests / SCHED).read_bytes() == original


def test_unpark_after_the_parked_copy_was_moved_back_by_hand_closes_the_park(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler", "--for", "1h").rc == 0
    (kubeadm.parked / SCHED).rename(kubeadm.manifests / SCHED)  # the README's 3 a.m. escape hatch
    row = next(c for c in ctl("status", "--json").json()["components"] if c["component"] == "kube-scheduler")
    assert row.get("unparked_by_hand") and not row.get("park_broken")
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0 and "moved back by hand" in r.json()["msg"]
    row = next(c for c in ctl("status", "--json").json()["components"] if c["component"] == "kube-scheduler")
    assert row["parked"] is None


def test_a_refusal_in_the_journal_never_quotes_the_manifest(sandbox, ctl_proc, tmp_path) -> None:
    from spd_testlib import journal_entries

    src = tmp_path / "web.yaml"
    src.write_text(small_pod("web") + '  priority: "--password=HUNTER2SECRET"\n')
    r = ctl_proc("apply", str(src))
    assert r.returncode == 1
    entries = journal_entries(sandbox.root, want=lambda es: any(e.get("STATICPODD_EVENT") == "REFUSED_INVALID"
                                                                for e in es))
    refused = [e for e in entries if e.get("STATICPODD_EVENT") == "REFUSED_INVALID"]
    assert refused and "not a valid static pod manifest" in refused[0]["MESSAGE"]
    assert all("HUNTER2SECRET" not in " ".join(map(str, e.values())) for e in entries)


def test_doctor_says_the_journal_is_reachable_when_journald_answers(kubeadm, ctl) -> None:
    from spd_testlib import journald_alive

    if not journald_alive():
        pytest.skip("journald is not running here (.ci/setup starts it)")
    r = ctl("doctor", "--json")
    assert r.json()["journal"]["ok"] is True
    assert not any(p["code"] == "journal-unreachable" for p in r.json()["problems"])


def test_doctor_reports_a_stale_journal_socket_left_by_a_dead_journald(kubeadm, ctl, tmp_path,
                                                                     monkeypatch) -> None:
    """The CI failure this guards against: journald killed, its socket file left behind; every
    entry silently went to stderr. A real socket file that nobody listens on any more."""
    import socket

    from staticpodd import journal

    stale = tmp_path / "socket"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(stale))
    s.close()
    assert stale.exists()
    monkeypatch.setattr(journal.journal_status, "__defaults__", (str(stale),))
    monkeypatch.delenv("STATICPODD_NO_JOURNAL", raising=False)
    r = ctl("doctor", "--json")
    assert r.rc == 1
    [p] = [p for p in r.json()["problems"] if p["code"] == "journal-unreachable"]
    assert str(stale) in p["message"] and "stderr" in p["message"]
    monkeypatch.setenv("STATICPODD_NO_JOURNAL", "1")  # a deliberate choice is not a problem
    assert ctl("doctor", "--json").json()["journal"]["ok"] is True


def test_any_change_first_records_hand_edits_to_every_other_manifest(kubeadm, ctl, tmp_path) -> None:
    """Without the daemon, a park of kube-scheduler is the moment etcd's hand edit gets recorded:
    reverted later, it would otherwise be lost (README: "nothing anyone wrote is ever lost")."""
    assert ctl("park", "kube-scheduler").rc == 0  # first contact: adopts all four
    edited = (kubeadm.manifests / "etcd.yaml").read_bytes() + b"# hand edit of etcd\n"
    (kubeadm.manifests / "etcd.yaml").write_bytes(edited)
    (kubeadm.manifests / "web.yaml").write_text(small_pod("web"))  # a new hand-made file too
    assert ctl("unpark", "kube-scheduler").rc == 0
    h = ctl("history", "etcd", "--json").json()["versions"]
    assert [v["action"] for v in h] == ["external", "external"]
    assert ctl("show", "etcd@2").out.encode() == edited
    assert ctl("history", "web", "--json").json()["versions"][0]["action"] == "external"


def test_a_leftover_duplicate_can_be_parked_and_the_hints_lead_somewhere(kubeadm, ctl, tmp_path) -> None:
    """kube-scheduler.yaml.bak defines the same pod: apply refuses and says to park it; parking
    the leftover works (the pod runs from kube-scheduler.yaml, touched so that the kubelet re-adds
    it at once); then apply works."""
    (kubeadm.manifests / "kube-scheduler.yaml.bak").write_bytes((kubeadm.manifests / SCHED).read_bytes())
    src = tmp_path / SCHED
    src.write_bytes((kubeadm.manifests / SCHED).read_bytes() + b"# x\n")
    r = ctl("apply", str(src), "--json")
    assert r.rc == 4 and r.json()["error"]["hint"] == "park the other file first: staticpodctl park kube-scheduler.yaml.bak"
    live = kubeadm.manifests / SCHED
    before = live.read_bytes()
    os.utime(live, (1_000_000_000, 1_000_000_000))  # an old mtime, to see the touch
    p = ctl("park", "kube-scheduler.yaml.bak", "--json")
    assert p.rc == 0, p.out
    assert "runs from kube-scheduler.yaml (touched it" in p.json()["msg"]
    # the kubelet drops the pod when the .bak goes: the touch has it re-read kube-scheduler.yaml at
    # once (docs/kubelet-contract.md "Duplicate names across files"); its bytes are unchanged
    assert live.stat().st_mtime > 1_000_000_000 and live.read_bytes() == before
    assert ctl("apply", str(src)).rc == 0
    # the real file with the leftover still live: refused, and the hint names the leftover
    assert ctl("unpark", "kube-scheduler.yaml.bak").rc == 4  # would make a duplicate again: refused
    (kubeadm.manifests / "kube-scheduler.yaml.bak").write_bytes(src.read_bytes())  # a new leftover
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4 and "staticpodctl park kube-scheduler.yaml.bak" in r.json()["error"]["hint"]


def test_park_force_parks_one_of_two_regular_files_of_one_pod(kubeadm, ctl) -> None:
    (kubeadm.manifests / "ks.yaml").write_bytes((kubeadm.manifests / SCHED).read_bytes())
    r = ctl("park", "ks", "--json")
    assert r.rc == 4 and "--force" in r.json()["error"]["hint"]
    assert (kubeadm.manifests / "ks.yaml").exists()
    r = ctl("park", "ks", "--force", "--json")
    assert r.rc == 0 and "runs from kube-scheduler.yaml" in r.json()["msg"]
    assert not (kubeadm.manifests / "ks.yaml").exists() and (kubeadm.parked / "ks.yaml").exists()


def test_apply_refuses_bytes_that_turn_a_component_into_another_pod_unless_rename(kubeadm, ctl, corpus) -> None:
    keepalived = corpus / "manifests" / "06-kubeadm-docs-keepalived.yaml"
    before = (kubeadm.manifests / SCHED).read_bytes()
    r = ctl("apply", str(keepalived), "--as", "kube-scheduler", "--json")
    assert r.rc == 4 and r.json()["changed"] is False
    err = r.json()["error"]
    assert "kube-system/kube-scheduler" in err["message"] and "keepalived" in err["message"]
    assert "--rename" in err["hint"]
    assert (kubeadm.manifests / SCHED).read_bytes() == before
    r = ctl("apply", str(keepalived), "--as", "kube-scheduler", "--rename", "--json")
    assert r.rc == 0 and r.json()["changed"] is True
    assert ctl("rollback", "kube-scheduler").rc == 4  # back to another pod: asks, as apply does
    assert ctl("rollback", "kube-scheduler", "--rename").rc == 0
    assert (kubeadm.manifests / SCHED).read_bytes() == before


def test_apply_refuses_a_new_file_that_would_start_a_parked_pod_again(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    src = tmp_path / "ks.yaml"
    src.write_bytes((kubeadm.parked / SCHED).read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false"))
    r = ctl("apply", str(src), "--json")
    assert r.rc == 4 and "is parked" in r.json()["error"]["message"]
    assert "--as kube-scheduler" in r.json()["error"]["hint"]
    assert not (kubeadm.manifests / "ks.yaml").exists()
    r = ctl("apply", str(src), "--as", "kube-scheduler", "--json")  # what the hint says: the parked copy
    assert r.rc == 0 and r.json()["location"] == "parked"


def test_an_edit_conflict_names_the_versions_to_diff(kubeadm, ctl, tmp_path, monkeypatch) -> None:
    """Someone else writes the file while the editor is open: refused, and the hint's diff command
    shows their change (the newest version vs the live file would show nothing: it is recorded)."""
    live = kubeadm.manifests / SCHED
    monkeypatch.setenv("EDITOR", write_editor(tmp_path, (
        "s = open(p).read().replace('--leader-elect=true', '--leader-elect=false')\nopen(p, 'w').write(s)\n"
        f"open({str(live)!r}, 'a').write('# someone else\\n')")))
    monkeypatch.delenv("VISUAL", raising=False)
    assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0  # versions 1..3
    r = ctl("edit", "kube-scheduler", "--json")
    assert r.rc == 4
    hint = r.json()["error"]["hint"]
    assert hint.endswith("staticpodctl diff kube-scheduler 3 4"), hint
    assert "+# someone else" in ctl("diff", "kube-scheduler", "3", "4").out


def test_a_parked_copy_moved_away_keeps_its_park_and_rollback_brings_it_back_parked(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler", "--for", "1h").rc == 0
    until = ctl("status", "--json").json()["components"][-1]["parked"]["until"]
    original = (kubeadm.parked / SCHED).read_bytes()
    (kubeadm.parked / SCHED).rename(tmp_path / SCHED)
    assert ctl("apply", str(kubeadm.manifests / "etcd.yaml")).rc == 0  # any changing verb scans: park stays
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler"]["state"] == "missing" and rows["kube-scheduler"]["parked"]["until"] == until
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 4 and "parked copy is gone" in r.json()["error"]["message"]
    assert "staticpodctl rollback kube-scheduler" in r.json()["error"]["hint"]
    assert ctl("rollback", "kube-scheduler").rc == 0
    assert (kubeadm.parked / SCHED).read_bytes() == original and not (kubeadm.manifests / SCHED).exists()
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler"]["state"] == "parked" and rows["kube-scheduler"]["parked"]["until"] == until
    assert ctl("unpark", "kube-scheduler").rc == 0
    assert (kubeadm.manifests / SCHED).read_bytes() == original


def test_unpark_of_a_park_whose_copy_is_gone_starts_it_from_history(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    original = (kubeadm.parked / SCHED).read_bytes()
    (kubeadm.parked / SCHED).unlink()
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0 and "put back from history" in r.json()["msg"], r.out
    assert (kubeadm.manifests / SCHED).read_bytes() == original
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler"]["state"] == "live" and rows["kube-scheduler"]["parked"] is None
    actions = [v["action"] for v in ctl("history", "kube-scheduler", "--json").json()["versions"]]
    assert actions[-2:] == ["rollback", "unpark"]


def test_park_of_a_component_removed_by_hand_says_so(kubeadm, ctl, tmp_path) -> None:
    assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0
    (kubeadm.manifests / SCHED).rename(tmp_path / SCHED)
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 3 and "was removed" in r.json()["error"]["message"]
    assert r.json()["error"]["hint"] == "put it back with: staticpodctl rollback kube-scheduler"


def test_unpark_after_a_copy_back_by_hand_closes_the_park(kubeadm, ctl) -> None:
    import shutil

    assert ctl("park", "kube-scheduler").rc == 0
    shutil.copy2(kubeadm.parked / SCHED, kubeadm.manifests / SCHED)  # cp -p, not mv
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0 and "copied back by hand" in r.json()["msg"]
    assert not (kubeadm.parked / SCHED).exists() and (kubeadm.manifests / SCHED).exists()
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler"]["state"] == "live" and rows["kube-scheduler"]["parked"] is None
    assert not rows["kube-scheduler"]["drift"]
    assert ctl("doctor", "--json").rc == 0


def test_unpark_with_a_different_live_file_refuses_and_says_how_either_side_wins(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    (kubeadm.manifests / SCHED).write_bytes((kubeadm.parked / SCHED).read_bytes() + b"# other\n")
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 4 and "differs from the parked copy" in r.json()["error"]["message"]
    assert "staticpodctl unpark kube-scheduler --discard" in r.json()["error"]["hint"]
    assert "move the live file out of the directory" in r.json()["error"]["hint"]
    assert ctl("unpark", "kube-scheduler", "--discard").rc == 0  # what the hint says, to keep the live file
    assert ctl("doctor", "--json").rc == 0


def test_component_names_are_checked_the_same_way_from_as_and_from_the_file_name(sandbox, ctl, tmp_path) -> None:
    src = tmp_path / "my web.yaml"
    src.write_text(small_pod("web"))
    r = ctl("apply", str(src), "--json")
    assert r.rc == 2 and "not a valid component name" in r.json()["error"]["message"]
    r = ctl("apply", str(src), "--as", "", "--json")  # an empty Ansible variable
    assert r.rc == 2 and "--as needs a component name" in r.json()["error"]["message"]
    assert sandbox.visible() == []
    assert ctl("apply", str(src), "--as", "web").rc == 0
    (sandbox.manifests / "hand made.yaml").write_text(small_pod("hand"))  # made by hand: still manageable
    assert ctl("park", "hand made").rc == 0 and ctl("unpark", "hand made.yaml").rc == 0


def test_doctor_calls_the_daemon_unhealthy_only_when_it_is_stuck(kubeadm, ctl) -> None:
    """A heartbeat from a live pid (this test process stands in for the daemon: no pid file, so
    doctor falls back to the heartbeat's pid). Problems the daemon reports about manifests are
    the directory's problems, not the daemon's."""
    hb = kubeadm.root / "run" / "staticpodd" / "daemon.json"
    hb.parent.mkdir(parents=True)
    hb.write_text(json.dumps({"pid": os.getpid(), "state": "ready", "heartbeat_interval": 5,
                              "problems": [{"code": "invalid-live", "message": "x"}]}))
    r = ctl("doctor", "--json")
    assert not any(p["code"] == "daemon-unhealthy" for p in r.json()["problems"])
    old = time.time() - 600
    os.utime(hb, (old, old))
    r = ctl("doctor", "--json")
    assert r.rc == 1 and any(p["code"] == "daemon-unhealthy" and "STUCK" in p["message"]
                             for p in r.json()["problems"])


def test_under_detailed_exitcode_no_failure_looks_like_changed(sandbox, ctl, tmp_path) -> None:
    """2 means "changed" to Puppet/Terraform-style callers: a missing file, a usage error or an
    invalid manifest must exit 1 there."""
    missing = ctl("apply", str(tmp_path / "nope.yaml"), "--detailed-exitcode", "--json")
    assert missing.rc == 1 and missing.json()["error"]["code"] == "fs-error"
    assert ctl("apply", str(tmp_path / "nope.yaml"), "--json").rc == 1  # not a usage error either
    usage = ctl("apply", "--detailed-exitcode", "--json")  # no FILE
    assert usage.rc == 1 and usage.json()["error"]["code"] == "usage" and usage.json()["command"] == "apply"
    bad = tmp_path / "web.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\n")
    assert ctl("apply", str(bad), "--detailed-exitcode").rc == 1
    named = ctl("apply", str(bad), "--as", "not a name", "--detailed-exitcode")
    assert named.rc == 1
    assert ctl("apply", str(bad), "--detailed", "--bogus").rc == 1  # any spelling: 2 would read as changed
    assert ctl("apply", str(bad), "--detailed-exitcode=yes", "--json").rc == 1
    assert ctl("apply", str(bad), "--js").rc == 2  # no abbreviations: --js is not --json


def test_a_restore_does_not_keep_the_bad_writes_looser_mode(kubeadm, ctl) -> None:
    """The daemon's on_invalid=restore path (Engine.restore_last_good), called directly."""
    from staticpodd.engine import Actor, Engine
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0
    live = kubeadm.manifests / SCHED
    good = live.read_bytes()
    live.write_bytes(b"apiVersion: v1\nkind: Pod\n")  # as `cp bad.yaml` would leave it
    os.chmod(live, 0o644)
    eng = Engine(Layout.build(kubeadm.root), actor=Actor.current(), journal=Journal("staticpodd", str(kubeadm.root)))
    res = eng.restore_last_good("kube-scheduler", reason="test")
    assert res.changed and live.read_bytes() == good
    assert stat.S_IMODE(os.stat(live).st_mode) == 0o600


def test_the_cli_reads_manifest_dir_from_the_default_config_file_like_the_daemon(kubeadm, ctl) -> None:
    """Without it the CLI and the daemon worked on different directories with one store."""
    srv = kubeadm.root / "srv" / "pods"
    srv.mkdir(parents=True)
    for f in list(kubeadm.manifests.iterdir()):
        if f.is_file():
            f.rename(srv / f.name)
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("manifest_dir: /srv/pods\n")
    st = ctl("status", "--json").json()
    assert st["manifest_dir"] == str(srv)
    assert {c["component"] for c in st["components"]} >= {"etcd", "kube-scheduler"}
    assert ctl("park", "kube-scheduler").rc == 0
    assert (srv / ".staticpodd" / "parked" / SCHED).exists()
    assert ctl("status", "--manifest-dir", str(kubeadm.manifests), "--json").json()["manifest_dir"] == str(
        kubeadm.manifests)  # the flag still wins


def test_a_parked_pod_cannot_come_back_through_another_file_unnoticed(kubeadm, ctl) -> None:
    bak = kubeadm.manifests / "kube-scheduler.yaml.bak"
    bak.write_bytes((kubeadm.manifests / SCHED).read_bytes() + b"# bak\n")
    r = ctl("park", "kube-scheduler.yaml.bak", "--for", "1h", "--json")
    assert r.rc == 2 and "deadline" in r.json()["error"]["message"]  # it does not stop the pod
    p = ctl("park", "kube-scheduler.yaml.bak")
    assert p.rc == 0 and p.out.count("runs from kube-scheduler.yaml") == 1 and "stops the pod" not in p.out
    assert ctl("park", "kube-scheduler").rc == 0
    r = ctl("unpark", "kube-scheduler.yaml.bak", "--json")  # would run the parked kube-scheduler again
    assert r.rc == 4 and "is parked" in r.json()["error"]["message"]
    assert not bak.exists()
    # by hand, behind the tool's back: doctor says so
    (kubeadm.manifests / "ks.yaml").write_bytes((kubeadm.parked / SCHED).read_bytes())
    d = ctl("doctor", "--json")
    assert d.rc == 1
    assert any(p["code"] == "park-bypassed" and "ks.yaml" in p["message"] for p in d.json()["problems"])


def test_the_pod_identity_check_holds_when_the_current_file_is_broken_and_rollback_refuses(kubeadm, ctl, corpus,
                                                                                       tmp_path) -> None:
    keepalived = corpus / "manifests" / "06-kubeadm-docs-keepalived.yaml"
    assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0
    (kubeadm.manifests / SCHED).write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n")
    r = ctl("apply", str(keepalived), "--as", "kube-scheduler", "--json")  # identity from the newest valid version
    assert r.rc == 4 and "kube-system/kube-scheduler" in r.json()["error"]["message"]
    r = ctl("rollback", "kube-scheduler", "--json")  # skips the broken hand edit in history
    assert r.rc == 0 and r.json()["rolled_back_to"] == 3
    assert r.json()["msg"] == "kube-scheduler: rolled back to version 3 (recorded as version 5)"
    assert ctl("apply", str(keepalived), "--as", "kube-scheduler", "--rename").rc == 0
    r = ctl("rollback", "kube-scheduler", "--json")  # back to another pod: refused as apply refuses it
    assert r.rc == 4 and "the kubelet would stop" in r.json()["error"]["message"]
    assert "--rename" in r.json()["error"]["hint"]
    r = ctl("rollback", "kube-scheduler", "--rename", "--json")
    assert r.rc == 0 and [w["code"] for w in r.json()["warnings"]] == ["pod-renamed"]
    ns = tmp_path / "ns.yaml"
    ns.write_bytes((kubeadm.manifests / SCHED).read_bytes().replace(b"namespace: kube-system", b"namespace: other"))
    r = ctl("apply", str(ns), "--as", "kube-scheduler", "--json")  # namespace only: says so, no absurd --as hint
    assert r.rc == 4 and "start other/kube-scheduler" in r.json()["error"]["message"]
    assert "--as" not in r.json()["error"]["hint"]


def test_edit_on_first_contact_records_the_bytes_it_opens_before_a_concurrent_write(kubeadm, ctl, tmp_path,
                                                                                    monkeypatch) -> None:
    live = kubeadm.manifests / SCHED
    original = live.read_bytes()
    monkeypatch.setenv("EDITOR", write_editor(tmp_path, (
        "s = open(p).read().replace('--leader-elect=true', '--leader-elect=false')\nopen(p, 'w').write(s)\n"
        f"open({str(live)!r}, 'a').write('# someone else\\n')")))
    monkeypatch.delenv("VISUAL", raising=False)
    r = ctl("edit", "kube-scheduler", "--json")  # nothing recorded before this
    assert r.rc == 4 and r.json()["error"]["hint"].endswith("staticpodctl diff kube-scheduler 1 2")
    assert ctl("show", "kube-scheduler@1").out.encode() == original


def test_unpark_discard_ends_a_leftover_park_without_starting_anything(kubeadm, ctl) -> None:
    bak = kubeadm.manifests / "kube-scheduler.yaml.bak"
    bak.write_bytes((kubeadm.manifests / SCHED).read_bytes() + b"# bak\n")
    assert ctl("park", "kube-scheduler.yaml.bak").rc == 0
    assert ctl("unpark", "kube-scheduler.yaml.bak").rc == 4  # would be a duplicate again
    r = ctl("unpark", "kube-scheduler.yaml.bak", "--discard", "--json")
    assert r.rc == 0 and "bytes stay in history" in r.json()["msg"]
    assert not bak.exists() and not (kubeadm.parked / "kube-scheduler.yaml.bak").exists()
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler.yaml.bak"]["state"] == "removed"  # like a deleted file: rollback can bring it back
    assert ctl("history", "kube-scheduler.yaml.bak", "--json").json()["versions"][-1]["action"] == "discard"
    assert ctl("show", "kube-scheduler.yaml.bak@1").out.endswith("# bak\n")  # nothing lost
    assert ctl("doctor", "--json").rc == 0
    # a park whose copy was deleted by hand can be discarded too
    assert ctl("park", "kube-scheduler").rc == 0
    (kubeadm.parked / SCHED).unlink()
    assert ctl("unpark", "kube-scheduler", "--discard").rc == 0
    assert ctl("doctor", "--json").rc == 0


def test_an_invalid_config_never_sends_a_verb_to_the_default_directory(kubeadm, ctl) -> None:
    """A typo elsewhere in staticpodd.yaml: status/park still act on its manifest_dir, and a
    manifest_dir that cannot be read is refused rather than guessed."""
    srv = kubeadm.root / "srv" / "pods"
    srv.mkdir(parents=True)
    (srv / SCHED).write_bytes((kubeadm.manifests / SCHED).read_bytes())
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("manifest_dir: /srv/pods\non_invalid: bogus\n")
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["file_name"] == SCHED
    assert (srv / ".staticpodd" / "parked" / SCHED).exists() and (kubeadm.manifests / SCHED).exists()
    cfg.write_text("manifest_dir: [/srv/pods\n")  # not even YAML
    r = ctl("status", "--json")
    assert r.rc == 78 and "which directory" in r.json()["error"]["message"]
    cfg.write_text("manifest_dir: srv/pods\n")  # relative: refused by the schema, CLI and daemon alike
    assert ctl("status", "--json").rc == 78


def test_doctor_on_a_missing_manifest_directory_is_a_clean_error(sandbox, ctl, tmp_path) -> None:
    r = ctl("doctor", "--manifest-dir", str(tmp_path / "nope"), "--json")
    assert r.rc == 1 and r.json()["error"]["code"] == "fs-error"


def test_unpark_discard_after_a_hand_move_back_is_not_a_failure(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler").rc == 0
    (kubeadm.parked / SCHED).rename(kubeadm.manifests / SCHED)
    r = ctl("unpark", "kube-scheduler", "--discard", "--json")
    assert r.rc == 0 and r.json()["changed"] is False and "moved back by hand" in r.json()["msg"]
    assert (kubeadm.manifests / SCHED).exists()


def test_the_default_rollback_says_which_invalid_versions_it_skipped(kubeadm, ctl, tmp_path) -> None:
    src = tmp_path / SCHED
    good = (kubeadm.manifests / SCHED).read_bytes()
    src.write_bytes(good + b"# v2\n")
    assert ctl("apply", str(src)).rc == 0  # v1 adopted, v2
    (kubeadm.manifests / SCHED).write_text("apiVersion: v1\nkind: Pod\n")  # a broken hand edit
    src.write_bytes(good + b"# v4\n")
    assert ctl("apply", str(src)).rc == 0  # records v3 (the broken edit), then v4
    r = ctl("rollback", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["rolled_back_to"] == 2
    assert r.json()["msg"] == "kube-scheduler: rolled back to version 2 (recorded as version 5); skipped version 3: invalid"


def test_a_hand_write_back_after_deleting_the_parked_copy_is_one_story(kubeadm, ctl, tmp_path) -> None:
    """Park, delete the parked copy, write a new live file: the park ended by the write-back;
    the parked copy's removal is recorded but not reported as "the park stands"."""
    from staticpodd.engine import Actor, Engine
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    assert ctl("park", "kube-scheduler").rc == 0
    data = (kubeadm.parked / SCHED).read_bytes()
    (kubeadm.parked / SCHED).unlink()
    (kubeadm.manifests / SCHED).write_bytes(data + b"# new\n")
    eng = Engine(Layout.build(kubeadm.root), actor=Actor.current(), journal=Journal("staticpodd", str(kubeadm.root)))
    with eng.locked():
        kinds = [c.kind for c in eng.scan(None, log=False) if c.file_name == SCHED]
    assert kinds == ["unparked-by-hand"]
    rows = {c["component"]: c for c in ctl("status", "--json").json()["components"]}
    assert rows["kube-scheduler"]["state"] == "live" and rows["kube-scheduler"]["parked"] is None


def test_apply_of_an_endless_input_reads_no_more_than_the_kubelet_would(sandbox, ctl_proc) -> None:
    """``apply /dev/zero`` read until MemoryError (a traceback; uncapped, the node's RAM). Now
    at most one byte past the kubelet's 10 MB limit is read and the gate refuses it. The address
    space is capped at 1 GiB so the old behaviour fails fast instead of eating the machine."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    import subprocess

    from spd_testlib import REPO, staticpodctl_cmd

    res = subprocess.run([*staticpodctl_cmd(), "apply", "/dev/zero", "--as", "web", "--json",
                          "--root", str(sandbox.root)], capture_output=True, text=True, timeout=120,
                         preexec_fn=cap, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    err = json.loads(res.stdout)["error"]
    assert err["code"] == "invalid-manifest" and "10 MiB" in err["message"], err
    assert sandbox.visible() == []


def test_doctor_judges_the_present_not_a_heartbeat_problem_fixed_since(kubeadm, ctl) -> None:
    """The running daemon's last heartbeat (older than doctor's look) still lists an invalid
    kube-scheduler.yaml and a failed deadline unpark of kube-scheduler; both were fixed since
    (the file is valid, nothing is parked). Doctor re-checks them itself: no problem, exit 0,
    and it says the daemon reported them earlier. A problem doctor cannot look at itself (a
    lock timeout) is still reported, as the daemon's."""
    import json
    import os

    from staticpodd.layout import Layout

    hb = Layout.build(kubeadm.root).heartbeat_path
    hb.parent.mkdir(parents=True, exist_ok=True)
    stale = [
        {"code": "invalid-live", "severity": "error", "component": "kube-scheduler",
         "path": str(kubeadm.manifests / SCHED), "message": f"{SCHED}: invalid"},
        {"code": "park-expired-unpark-failed", "severity": "error", "component": "kube-scheduler", "path": None,
         "message": "the park of kube-scheduler expired but unpark failed: a duplicate"},
    ]
    hb.write_text(json.dumps({"pid": os.getpid(), "state": "running", "problems": stale}))
    r = ctl("doctor", "--json")
    assert r.rc == 0, r.out
    assert r.json()["problems"] == []
    assert [p["code"] for p in r.json()["reported_earlier"]] == ["invalid-live", "park-expired-unpark-failed"]
    r = ctl("doctor")
    assert r.rc == 0 and "reported by the daemon earlier; not seen now" in r.out
    lock = {"code": "lock-timeout", "severity": "error", "component": None, "path": None,
            "message": "the lock was held for 5 s"}
    hb.write_text(json.dumps({"pid": os.getpid(), "state": "running", "problems": [*stale, lock]}))
    r = ctl("doctor", "--json")
    assert r.rc == 1 and [p["code"] for p in r.json()["problems"]] == ["lock-timeout"]


def test_validate_with_no_path_checks_the_manifest_directory_under_root(kubeadm, ctl) -> None:
    """A newcomer's try: ``staticpodctl --root R validate /etc/kubernetes/manifests`` read the host's
    path (``--root`` moves only default paths); with no PATH, validate now checks R's directory."""
    (kubeadm.manifests / "kube-scheduler.yaml.bak").write_bytes((kubeadm.manifests / SCHED).read_bytes())
    r = ctl("validate", "--json")
    assert r.rc == 1, r.out + r.err
    found = r.json()["findings"]
    assert any(f["code"] == "duplicate-pod" and f["path"].startswith(str(kubeadm.manifests)) for f in found), found
