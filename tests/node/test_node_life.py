"""A node's whole life under systemd, in the order a real node goes through it.

One booted Debian 12 node (tests/node/nodelib.py: systemd 252 as PID 1 in systemd-nspawn) per
test. The long test walks: install before kubeadm -> kubeadm preflight -> kubeadm writes its
manifests and the daemon adopts them -> park with a deadline -> package upgrade -> the deadline
fires -> the directory is deleted and recreated -> remove (refused while parked) -> purge.
Nothing is a stand-in: the unit with its whole sandbox, dpkg and the maintainer scripts,
journald, kubeadm v1.37.2.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from nodelib import BootedNode

from staticpodd.journal import Event

pytestmark = pytest.mark.slow

M = "/etc/kubernetes/manifests"
KUBEADM_FILES = ("etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml")
# Checks that cannot pass in a container without a kubelet running: ip_forward is the host's, no
# image may be pulled, and SystemVerification judges the host's kernel and cgroups (kubeadm v1.35+
# refuses cgroup v1, which this machine has; the control-plane tier sets the kubelet's
# failCgroupV1: false for the same reason). Nothing about the manifest directory is ignored.
PREFLIGHT_IGNORE = "FileContent--proc-sys-net-ipv4-ip_forward,ImagePull,SystemVerification"


# exits 0 when `staticpodctl status` shows exactly n live components
LIVE_COUNT = ("staticpodctl status --json | python3 -c 'import json,sys; "
              "sys.exit(sum(c[\"state\"] == \"live\" for c in json.load(sys.stdin)[\"components\"]) != {n})'")


def journal_entries(node: BootedNode, *args: str) -> list[dict]:
    """The node's journal entries of staticpodd.service (``journalctl -o json``), oldest first."""
    out = node.journal("-u", "staticpodd", "-o", "json", *args)
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


def with_id(entries: list[dict], event: Event) -> list[dict]:
    return [e for e in entries if e.get("MESSAGE_ID") == event.message_id]


def status_json(node: BootedNode) -> dict:
    return json.loads(node.sh("staticpodctl status --json").stdout)


def component(status: dict, name: str) -> dict:
    return next(c for c in status["components"] if c["component"] == name)


def sha256s(node: BootedNode) -> dict[str, str]:
    return {f: hashlib.sha256(node.path(f"{M}/{f}").read_bytes()).hexdigest()
            for f in KUBEADM_FILES if node.path(f"{M}/{f}").exists()}


def install(node: BootedNode, deb: Path) -> str:
    # --force-confold: the configuration was laid down first (as config management does)
    r = node.sh(f"DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold {deb} 2>&1", check=False, timeout=300)
    assert r.returncode == 0, r.stdout
    return r.stdout


def wait_active_with_restarts(node: BootedNode, restarts: int, timeout: float = 30) -> None:
    node.wait_for(f'[ "$(systemctl show -P NRestarts staticpodd)" = {restarts} ] && '
                  '[ "$(systemctl show -P ActiveState staticpodd)" = active ] && '
                  '[ "$(systemctl show -P SubState staticpodd)" = running ]', timeout=timeout)


def test_a_node_from_install_before_kubeadm_to_purge(node: BootedNode, debs: dict[str, Path], kube_bin: Path) -> None:
    kubeadm = f"{kube_bin}/kubeadm"
    cfg = debs["kubeadm_config"]
    node.sh(f"ln -s {kube_bin}/kubelet /usr/bin/kubelet")  # kubeadm's KubeletVersion check runs it
    # node-exporter's textfile directory exists (bound at start); metrics on from the start.
    node.sh("mkdir -p /var/lib/prometheus/node-exporter /etc/staticpodd && "
            "printf 'metrics:\\n  enabled: true\\n' >/etc/staticpodd/staticpodd.yaml")

    # 1. Installed before `kubeadm init`: no /etc/kubernetes at all. apt exits 0 and the service
    #    runs (no 226/NAMESPACE restart loop), waiting for the directory.
    assert not node.path("/etc/kubernetes").exists()
    out = install(node, debs["old"])
    wait_active_with_restarts(node, 0)
    time.sleep(6.5)  # longer than RestartSec=5s: a failing unit would have restarted by now
    assert node.show("staticpodd", "NRestarts") == "0", node.journal("-u", "staticpodd")
    assert node.show("staticpodd", "ActiveState") == "active"
    assert "226" not in node.show("staticpodd", "ExecMainStatus")
    assert not node.path("/etc/kubernetes").exists(), "the package must not create kubeadm's directory"
    assert "Could not execute systemctl" not in out, out
    missing = [e for e in with_id(journal_entries(node), Event.DIRECTORY_PROBLEM)
               if e.get("FINDING") == "manifest-dir-missing"]
    assert missing and int(missing[0]["PRIORITY"]) <= 4, journal_entries(node)

    # 2. kubeadm's preflight on this node, staticpodd installed and running, passes. (kubeadm
    #    v1.37.2 checks FileAvailable--etc-kubernetes-manifests-<component>.yaml for init; it has
    #    no DirAvailable--etc-kubernetes-manifests check: see docs/kubelet-contract.md.) Its etcd
    #    port checks listen on the advertise address, so the node gets it on its loopback.
    node.sh("ip addr add 10.0.0.10/32 dev lo")
    r = node.sh(f"{kubeadm} init phase preflight --config {cfg} --ignore-preflight-errors={PREFLIGHT_IGNORE} 2>&1",
                check=False, timeout=300)
    assert r.returncode == 0, r.stdout
    assert "[ERROR" not in r.stdout, r.stdout

    # 3. kubeadm writes its manifests (creating the directory): the daemon restarts once into a
    #    sandbox that binds the new directory, and adopts every file, each with a journal entry.
    node.sh(f"{kubeadm} init phase control-plane all --config {cfg} && {kubeadm} init phase etcd local --config {cfg}",
            timeout=120)
    node.wait_for(LIVE_COUNT.format(n=len(KUBEADM_FILES)), timeout=40)
    wait_active_with_restarts(node, 1)
    entries = journal_entries(node)
    exit_note = [e for e in with_id(entries, Event.DIRECTORY_PROBLEM) if e.get("FINDING") == "manifest-dir-read-only"]
    assert exit_note and int(exit_note[0]["PRIORITY"]) <= 3 and exit_note[0].get("EXIT_STATUS") == "75", entries
    adopted = [e for e in with_id(entries, Event.EXTERNAL_CHANGE) if e.get("CHANGE") == "adopted"]
    assert sorted(e["FILE_NAME"] for e in adopted) == sorted(KUBEADM_FILES), [e.get("MESSAGE") for e in entries]
    st = status_json(node)
    assert st["daemon"]["running"] and st["daemon"]["healthy"], st["daemon"]
    assert {c["component"]: c["version"] for c in st["components"]} == {f[:-5]: 1 for f in KUBEADM_FILES}
    assert node.sh("staticpodctl doctor", check=False).returncode == 0
    before = sha256s(node)

    # 4. Park the scheduler with a deadline.
    node.sh("staticpodctl park kube-scheduler --for 45s --reason 'node life test'")
    until = component(status_json(node), "kube-scheduler")["parked"]["until"]
    assert not node.path(f"{M}/kube-scheduler.yaml").exists()

    # 5. Package upgrade with the park standing: prerm does not refuse an upgrade, the daemon is
    #    restarted, the park and its deadline are kept.
    out = install(node, debs["new"])
    assert "refusing" not in out, out
    assert node.sh("dpkg-query -W -f='${Version}' staticpodd").stdout.endswith("+node1")
    node.wait_for('[ "$(systemctl show -P ActiveState staticpodd)" = active ]')
    parked = component(status_json(node), "kube-scheduler")
    assert parked["state"] == "parked" and parked["parked"]["until"] == until, parked

    # 6. The directory is deleted and recreated (restored from a copy) while the park stands:
    #    the daemon must not stay read-only and `active`; the deadline unpark happens.
    node.sh(f"cp -a {M} /root/manifests.copy && rm -rf {M} && mkdir -m 0700 {M} && "
            f"cp -a /root/manifests.copy/. {M}/")
    restarts_before = int(node.show("staticpodd", "NRestarts"))
    node.wait_for(f'[ "$(systemctl show -P NRestarts staticpodd)" -gt {restarts_before} ]', timeout=30)
    wait_active_with_restarts(node, restarts_before + 1)
    # 7. The deadline fires (written before the upgrade and the directory swap).
    node.wait_for(f"test -f {M}/kube-scheduler.yaml", timeout=90)
    st = status_json(node)
    assert component(st, "kube-scheduler")["state"] == "live", st
    assert sha256s(node) == before, "every manifest is byte-identical to what kubeadm wrote"
    unparked = [e for e in with_id(journal_entries(node), Event.UNPARKED) if e.get("COMPONENT") == "kube-scheduler"]
    assert unparked, "the deadline unpark is journaled"
    assert not [e for e in journal_entries(node) if "Read-only file system" in e.get("MESSAGE", "")]
    # Everything the daemon said is a native entry: no bare stderr line (priority 6, no
    # MESSAGE_ID) from it in the journal, errors included (12.5).
    bare = [e.get("MESSAGE") for e in journal_entries(node) if e.get("_TRANSPORT") == "stdout"]
    assert bare == [], bare
    node.wait_for("test -s /var/lib/prometheus/node-exporter/staticpodd.prom")

    # 8. Remove while something is parked: refused, loudly, nothing changes.
    node.sh("staticpodctl park kube-controller-manager --for 1h --reason 'before removal'")
    r = node.sh("dpkg -r staticpodd 2>&1", check=False)
    assert r.returncode != 0, r.stdout
    assert "refusing to remove staticpodd while components are parked" in r.stdout, r.stdout
    assert "kube-controller-manager" in r.stdout and "staticpodctl unpark" in r.stdout, r.stdout
    # still installed and configured (dpkg only noted the wish to remove it: "deinstall")
    assert node.sh("dpkg-query -W -f='${Status}' staticpodd").stdout.endswith(" ok installed")
    assert node.show("staticpodd", "ActiveState") == "active"
    assert component(status_json(node), "kube-controller-manager")["state"] == "parked"

    # 9. Unparked, the removal goes through; purge removes the metrics textfile, keeps the
    #    store (the operator's history) and never touches a manifest.
    node.sh("staticpodctl unpark kube-controller-manager")
    node.sh("dpkg -r staticpodd")
    assert node.show("staticpodd", "ActiveState") in ("inactive", "")
    node.sh("dpkg --purge staticpodd")
    assert not node.path("/var/lib/prometheus/node-exporter/staticpodd.prom").exists()
    assert node.path("/var/lib/staticpodd/versions.sqlite3").stat().st_size > 0
    assert sha256s(node) == before
    assert [n for n in node.sh(f"ls -A {M}").stdout.split() if not n.startswith(".")] == sorted(KUBEADM_FILES)
    assert node.sh(f"ls -A {M}/.staticpodd/parked").stdout == "", "no park left behind"
