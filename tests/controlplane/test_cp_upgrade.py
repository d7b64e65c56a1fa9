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


#: Set once an upgrade ran in this session: kubeadm's first upgrade of a fresh control plane
#: rewrites every manifest (and restarts each component, about 3 min here); later ones change only
#: what the patches change. Why: kubeadm derives each startupProbe's failureThreshold from
#: ``timeouts.controlPlaneComponentHealthCheck``; init read the lab's 6m0s (36 tries of 10 s), but
#: that setting lives in InitConfiguration, which is not kept in the cluster, so upgrade uses the
#: default 4m0s (24): ``staticpodctl diff kube-apiserver 1 2`` shows exactly that line.
_upgraded: list[bool] = []


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
    _upgraded.append(True)
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
    """kubeadm's cluster health check refuses the upgrade: StaticPodManifest does not find
    kube-scheduler.yaml. The node is drained (cordoned) first, as before maintenance: with no
    schedulable Node kubeadm skips its CreateJob check, which would otherwise wait its fixed 60 s
    for a Job that no scheduler places (cmd/kubeadm/app/phases/upgrade/health.go ``createJob``)
    and fail too; docs/tasks/kubeadm-upgrade.md names both."""
    cp.ctl("park", "kube-scheduler", "--wait", "--reason", "drill", check=True)
    status = cp.ctl("status")
    assert "kubeadm upgrade refuses while kube-scheduler is parked" in status.stdout, status.stdout
    problems = cp.ctl_json("doctor")["problems"]
    assert any(p["code"] == "parked-blocks-kubeadm-upgrade" for p in problems), problems
    parked = cp.lab.read("/etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml")
    cp.kubectl("cordon", cp.name)
    try:
        up = _upgrade(cp, timeout=120)
    finally:
        cp.kubectl("uncordon", cp.name)
    said = up.stdout + up.stderr
    assert up.returncode != 0, said
    assert "[ERROR StaticPodManifest]" in said and "kube-scheduler.yaml" in said, said[-3000:]
    # nothing lost: the park stands with the same bytes
    comps = {c["component"]: c for c in cp.ctl_json("status")["components"]}
    assert comps["kube-scheduler"]["state"] == "parked", comps["kube-scheduler"]
    assert cp.lab.read("/etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml") == parked


UPGRADE_CONFIG = """\
apiVersion: kubeadm.k8s.io/v1beta4
kind: UpgradeConfiguration
apply:
  kubernetesVersion: v1.37.2
  etcdUpgrade: false
  patches:
    directory: {patches}
timeouts:
  upgradeManifests: 40s
"""


def test_a_park_made_while_kubeadm_waits_is_a_broken_park_that_unpark_discard_ends(cp: Node) -> None:
    """kubeadm writes the new kube-scheduler.yaml and waits for its config.hash; the park takes it
    away, so kubeadm times out (timeouts.upgradeManifests, shortened here) and rolls back: it
    writes the old manifest back while the component is parked. staticpodd calls that a broken
    park, names ``unpark --discard``, and after the discard nothing calls the file drift."""
    import time

    if not _upgraded:  # run alone: let kubeadm's first upgrade rewrite the others first
        up = _upgrade(cp)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        _upgraded.append(True)
    patches = cp.lab.work / "patches-wait"
    patches.mkdir(exist_ok=True)
    (patches / "kube-scheduler+json.yaml").write_text(PATCH.replace("--v=2", "--v=3"))
    config = cp.lab.work / "upgrade-wait.yaml"
    config.write_text(UPGRADE_CONFIG.format(patches=patches))
    log = cp.lab.work / "kubeadm-upgrade-wait.log"
    proc = cp.lab.popen(str(cp.lab.bin / "kubeadm"), "upgrade", "apply", "--config", str(config), "--yes", IGNORE,
                        log=log)
    try:
        cp.wait(lambda: b"--v=3" in cp.lab.read("/etc/kubernetes/manifests/kube-scheduler.yaml") or
                proc.poll() is not None, 300, "kubeadm to write the new kube-scheduler.yaml")
        assert proc.poll() is None, log.read_text()[-3000:]
        park = cp.ctl_json("park", "kube-scheduler", "--reason", "parked while kubeadm waits")
        assert park["ok"], park
        rc = proc.wait(240)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = log.read_text()
    assert rc != 0 and "kube-scheduler" in out, out[-3000:]
    # kubeadm's rollback put the old manifest back while the scheduler is parked
    deadline = time.monotonic() + 30
    while True:
        comps = {c["component"]: c for c in cp.ctl_json("status")["components"]}
        if comps["kube-scheduler"].get("park_broken") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert comps["kube-scheduler"].get("park_broken"), comps["kube-scheduler"]
    assert b"--v=3" not in cp.lab.read("/etc/kubernetes/manifests/kube-scheduler.yaml")
    history = cp.ctl("history", "kube-scheduler").stdout
    assert "the current file" not in history, history  # the live file is kubeadm's old one, not "current"
    refused = cp.ctl("unpark", "kube-scheduler")
    said = refused.stdout + refused.stderr
    assert "unpark kube-scheduler --discard" in said and ".staticpodd/parked" not in said, said
    cp.ctl("unpark", "kube-scheduler", "--discard", "--reason", "kubeadm rolled back", check=True)
    comps = {c["component"]: c for c in cp.ctl_json("status")["components"]}
    assert comps["kube-scheduler"]["state"] == "live" and not comps["kube-scheduler"]["drift"], comps
    problems = [p for p in cp.ctl_json("doctor").get("problems", []) if p.get("component") == "kube-scheduler"
                or "kube-scheduler" in str(p.get("path"))]
    assert not [p for p in problems if p["code"] in ("drift", "park-broken")], problems
    history = cp.ctl("history", "kube-scheduler").stdout
    assert "drift" not in history and "differs from the newest version" not in history, history
