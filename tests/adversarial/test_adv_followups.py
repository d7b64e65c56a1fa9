"""What a newcomer found in the merged tree of stop 16, each left for the next session there.

Each test below failed on the code of that stop (6f191a2) and names what went wrong.
"""

from __future__ import annotations

import json

from spd_testlib import small_pod


def _hand_edit(text: str) -> str:
    return text.replace("--leader-elect=true", "--leader-elect=false")


def test_unpark_with_its_parked_copy_gone_starts_the_parked_version_not_a_hand_copy(kubeadm, ctl):
    # Found: the parked copy is put back from "the newest version", which can be a hand-written
    # copy recorded while the park stood (found park-broken), not the bytes that were parked.
    parked_bytes = (kubeadm.manifests / "kube-scheduler.yaml").read_bytes()
    assert ctl("park", "kube-scheduler").rc == 0
    kubeadm.write("kube-scheduler.yaml", _hand_edit(parked_bytes.decode()))
    assert ctl("park", "kube-controller-manager").rc == 0  # a changing verb: records the hand copy
    assert ctl("unpark", "kube-controller-manager").rc == 0
    (kubeadm.manifests / "kube-scheduler.yaml").unlink()
    (kubeadm.parked / "kube-scheduler.yaml").unlink()
    r = ctl("unpark", "kube-scheduler")
    assert r.rc == 0, r.err
    assert (kubeadm.manifests / "kube-scheduler.yaml").read_bytes() == parked_bytes


def test_a_forced_park_of_a_twin_is_ended_with_discard_and_the_hint_says_so(kubeadm, ctl):
    # Found: after `park --force` of a second file defining the running pod, `unpark` refuses
    # (it would bring the duplicate back: right) but its hint says to park the file the kubelet
    # runs, which stops the pod. The way out is `unpark --discard`.
    kubeadm.write("ks-copy.yaml", (kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    assert ctl("park", "ks-copy", "--force").rc == 0
    r = ctl("unpark", "ks-copy", "--json")
    assert r.rc != 0
    err = r.json()["error"]
    assert "staticpodctl unpark ks-copy --discard" in err["hint"], err
    assert "park kube-scheduler.yaml" not in err["hint"], err
    assert ctl("unpark", "ks-copy", "--discard").rc == 0
    assert kubeadm.visible() == ["etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml",
                                 "kube-scheduler.yaml"]


def test_prune_keep_for_zero_is_refused_like_keep_zero(kubeadm, ctl):
    # Found: `--keep 0` is refused, but `--keep-for 0` prunes every version not protected.
    assert ctl("status").rc == 0
    for i in range(3):
        src = kubeadm.root / f"w{i}.yaml"
        src.write_text(small_pod("web", image=f"nginx:1.2{i}"))
        assert ctl("apply", str(src), "--as", "web").rc == 0
    r = ctl("prune", "--keep-for", "0", "--json")
    assert r.rc == 2, r.out
    assert r.json()["error"]["code"] == "usage"
    assert "--keep-for 0" in r.json()["error"]["message"]
    assert len(json.loads(ctl("history", "web", "--json").out)["versions"]) == 3


def test_a_negative_park_duration_is_named_not_an_argparse_riddle(kubeadm, ctl):
    # Found: `park --for -5m` says "argument --for: expected one argument".
    r = ctl("park", "kube-scheduler", "--for", "-5m")
    assert r.rc == 2
    assert "expected one argument" not in r.err
    assert "-5m" in r.err
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_park_says_when_the_kubelet_acts_from_its_own_file_check_frequency(kubeadm, ctl):
    # Found: the texts said "~20 s" (the kubelet's default) whatever the node's kubelet is set to.
    kcfg = kubeadm.root / "var" / "lib" / "kubelet" / "config.yaml"
    kcfg.parent.mkdir(parents=True)
    kcfg.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                    "fileCheckFrequency: 5s\n")
    r = ctl("park", "kube-scheduler")
    assert r.rc == 0, r.err
    assert "within ~5 s (its fileCheckFrequency)" in r.out, r.out


def test_the_daemon_s_invalid_file_message_names_the_configured_relist():
    from staticpodd.reconcile import invalid_sentence

    text, _ = invalid_sentence("x.yaml", "yaml-syntax", ours_only=None, limit=None, relist=5.0)
    assert "at the next relist (within 5 s, its fileCheckFrequency)" in text
    text, _ = invalid_sentence("x.yaml", "yaml-syntax", ours_only=None, limit=None)
    assert "(about 20 s)" in text


def test_a_park_of_bytes_only_staticpodd_refuses_can_always_be_ended(kubeadm, ctl):
    # Found by a newcomer (stop 17): park takes a file the kubelet runs happily (a key given twice),
    # but unpark, and the daemon's deadline unpark, refused it under staticpodd's own stricter rules:
    # the scheduler stayed down past --for, with no way back but mv.
    path = kubeadm.manifests / "kube-scheduler.yaml"
    text = path.read_text().replace("  namespace: kube-system\n", "  namespace: kube-system\n  namespace: kube-system\n")
    path.write_text(text)
    assert ctl("park", "kube-scheduler").rc == 0
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0, r.out
    assert path.read_text() == text
    assert [w["code"] for w in r.json()["warnings"]] == ["unparked-despite-strictness"]
    assert "yaml-duplicate-key" in r.json()["warnings"][0]["message"]


def test_a_parked_copy_edited_into_bytes_the_kubelet_refuses_still_stays_parked(kubeadm, ctl):
    assert ctl("park", "kube-scheduler").rc == 0
    (kubeadm.parked / "kube-scheduler.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    r = ctl("unpark", "kube-scheduler")
    assert r.rc == 1 and "the kubelet would refuse this file; nothing was changed" in r.err
    assert not (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_apply_of_a_copy_under_a_new_name_says_to_name_the_component_not_to_park_it(kubeadm, ctl):
    # Found by a newcomer (stop 17): `apply ./ks.yaml` (a copy of the scheduler) is refused, right,
    # but the hint said "park the other file first: staticpodctl park kube-scheduler.yaml --force",
    # which stops the running scheduler. What was meant is --as kube-scheduler.
    src = kubeadm.root / "ks.yaml"
    src.write_bytes((kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    r = ctl("apply", str(src), "--json")
    assert r.rc == 4
    err = r.json()["error"]
    assert "--as kube-scheduler" in err["hint"] and "park" not in err["hint"], err
    assert "ks.yaml" not in kubeadm.visible()


def test_doctor_does_not_call_a_parked_bak_a_bypassed_park(kubeadm, ctl):
    # Found by a newcomer (stop 17): after the README's own fix for a .bak (park the leftover),
    # doctor reported park-bypassed and hinted "park or move kube-scheduler.yaml too".
    kubeadm.write("kube-scheduler.yaml.bak", (kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    assert ctl("park", "kube-scheduler.yaml.bak").rc == 0
    codes = {p["code"] for p in json.loads(ctl("doctor", "--json").out)["problems"]}
    assert "park-bypassed" not in codes, codes


def test_a_typo_in_the_config_does_not_block_unpark_because_of_a_commented_manifest_dir(kubeadm, ctl):
    # Found by a newcomer (stop 17): a YAML typo anywhere in staticpodd.yaml made status, park and
    # unpark exit 78 whenever the file held the text manifest_dir, even the shipped example's
    # commented-out "#manifest_dir: null"; the README says these verbs warn and go on.
    assert ctl("park", "kube-scheduler").rc == 0
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("#manifest_dir: null\non_invalid: [restore\n")
    r = ctl("unpark", "kube-scheduler")
    assert r.rc == 0, r.err
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_a_broken_config_that_sets_manifest_dir_to_garbage_still_refuses_naming_the_line(kubeadm, ctl):
    cfg = kubeadm.root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("on_invalid: [restore\nmanifest_dir: etc/kubernetes/manifests\n")
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 78
    assert r.json()["error"]["line"] == 2 and r.json()["error"]["field"] == "manifest_dir"
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_unpark_that_says_the_park_is_closed_closes_it(kubeadm, ctl):
    # Found by a newcomer (stop 17): following unpark's own hint for a live file that differs
    # (delete the parked copy, then unpark) printed "its park record is now closed", but status
    # still showed the park and the next unpark said "not parked" (exit 4).
    assert ctl("park", "kube-scheduler").rc == 0
    text = (kubeadm.parked / "kube-scheduler.yaml").read_text().replace("127.0.0.1", "127.0.0.2")
    kubeadm.write("kube-scheduler.yaml", text)
    assert ctl("unpark", "kube-scheduler").rc == 4
    (kubeadm.parked / "kube-scheduler.yaml").unlink()
    r = ctl("unpark", "kube-scheduler")
    assert r.rc == 0 and "park record is now closed" in r.out, (r.out, r.err)
    st = json.loads(ctl("status", "--json").out)
    row = next(c for c in st["components"] if c["component"] == "kube-scheduler")
    assert row["state"] == "live" and row["parked"] is None, row
    assert (kubeadm.manifests / "kube-scheduler.yaml").read_text() == text


def test_until_without_a_zone_is_utc_and_says_so_when_local_time_is_not(kubeadm, ctl, monkeypatch):
    # Found by a newcomer (stop 17): `--until 2031-01-01T08:00` was silently UTC; an operator in
    # Tokyo meaning two hours from now got eleven. UTC stays the contract (README, the Ansible
    # module); the CLI now says which time it used and how to write local time.
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        r = ctl("park", "kube-scheduler", "--until", "2031-01-01T08:00")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert r.rc == 0, r.err
    assert "read as UTC (2031-01-01T08:00:00Z)" in r.err and "2031-01-01T08:00+09:00" in r.err, r.err
    assert "until 2031-01-01T08:00:00Z" in r.out or "2031-01-01T08:00:00Z" in r.err
