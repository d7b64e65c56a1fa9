"""kubeadm upgrade beside the daemon, against a real kubeadm v1.37.2 control plane.

``kubeadm upgrade apply`` renames each changed manifest into
``/etc/kubernetes/tmp/kubeadm-backup-manifests-*`` and the new one in, then waits for the mirror
pod's new ``kubernetes.io/config.hash``. With staticpodd's daemon watching the directory that is
one recorded version per changed component, and nothing restored or quarantined. With a
component parked, kubeadm refuses; staticpodd says so before the upgrade is tried.
"""

from __future__ import annotations

from cplane_node import Node

# cgroup v1 fails SystemVerification for kubelet >= 1.35 even with failCgroupV1: false; the
# CoreDNS checks fail with "start version '' not supported" although DNS is disabled
IGNORE = "--ignore-preflight-errors=SystemVerification,CoreDNSUnsupportedPlugins,CoreDNSMigration"
PATCH = "- op: add\n  path: /spec/containers/0/command/-\n  value: --v=2\n"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def _upgrade(cp: Node, *extra: str, timeout: float = 420):
    return cp.lab.run(str(cp.lab.bin / "kubeadm"), "upgrade", "apply", "v1.37.2", "--yes", IGNORE, *extra,
                      timeout=timeout)


def _versions(cp: Node) -> dict[str, list[dict]]:
    return {c: cp.ctl_json("history", c, "--all")["versions"] for c in COMPONENTS}


def test_kubeadm_upgrade_apply_with_patches_beside_the_daemon_records_one_version_per_change(cp: Node) -> None:
    patches = cp.lab.work / "patches"
    patches.mkdir(exist_ok=True)
    (patches / "kube-scheduler+json.yaml").write_text(PATCH)
    before = _versions(cp)
    live_before = {c: cp.lab.read(f"/etc/kubernetes/manifests/{c}.yaml") for c in COMPONENTS}
    up = _upgrade(cp, f"--patches={patches}")
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    after = _versions(cp)
    for c in COMPONENTS:
        new = [v for v in after[c] if v["seq"] > before[c][-1]["seq"]]
        changed = cp.lab.read(f"/etc/kubernetes/manifests/{c}.yaml") != live_before[c]
        assert len(new) == (1 if changed else 0), (c, new)
        assert all(v["action"] == "external" for v in new), new  # recorded, never restored
    sched = cp.lab.read("/etc/kubernetes/manifests/kube-scheduler.yaml").decode()
    assert "--v=2" in sched
    status = cp.ctl_json("status")
    # nothing restored, quarantined or left stray (a component another test removed stays "removed")
    assert not [s for s in status["components"] if s.get("stray") or s["state"] not in ("live", "removed")], status
    problems = cp.ctl_json("doctor").get("problems", [])
    assert not [p for p in problems if p["code"] in ("drift", "park-broken", "invalid-live")], problems


def test_with_the_scheduler_parked_staticpodd_warns_before_and_kubeadm_upgrade_changes_nothing(cp: Node) -> None:
    cp.ctl("park", "kube-scheduler", "--wait", "--reason", "drill", check=True)
    status = cp.ctl("status")
    assert "kubeadm upgrade refuses while kube-scheduler is parked" in status.stdout, status.stdout
    problems = cp.ctl_json("doctor")["problems"]
    assert any(p["code"] == "parked-blocks-kubeadm-upgrade" for p in problems), problems
    parked = cp.lab.read("/etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml")
    up = _upgrade(cp, timeout=120)
    assert up.returncode != 0  # preflight: the manifest is missing and the health-check Job needs a scheduler
    assert "kube-scheduler" in up.stdout + up.stderr
    # nothing lost: the park stands with the same bytes
    comps = {c["component"]: c for c in cp.ctl_json("status")["components"]}
    assert comps["kube-scheduler"]["state"] == "parked", comps["kube-scheduler"]
    assert cp.lab.read("/etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml") == parked
