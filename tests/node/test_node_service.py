"""The service's edges on a booted node , one fresh node each.

Real systemd 252, the installed .deb with its unit's whole sandbox, journald, dpkg.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from nodelib import BootedNode
from spd_testlib import corpus_dir
from test_node_life import M, install, journal_entries, wait_active_with_restarts, with_id

from staticpodd.journal import Event

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def scheduler_manifest() -> bytes:
    """kubeadm's kube-scheduler manifest from ../shared/corpus (or $STATICPODD_CORPUS)."""
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip("../shared/corpus is absent (set STATICPODD_CORPUS)")
    return (corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml").read_bytes()
POD = """apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: web
    image: nginx:1.27
"""


def test_an_empty_private_dir_alone_in_the_manifest_directory_is_removed(node: BootedNode, debs: dict) -> None:
    """kubeadm (and anything like its DirAvailable check) wants an empty directory: a manifest
    tried, parked and discarded must not leave ``.staticpodd/`` behind (12.2)."""
    node.sh(f"mkdir -p -m 0700 {M}")
    install(node, debs["old"])
    wait_active_with_restarts(node, 0)
    node.sh(f"cat >/root/web.yaml <<'EOF'\n{POD}EOF")
    node.sh("staticpodctl apply /root/web.yaml && staticpodctl park web && staticpodctl unpark --discard web")
    node.wait_for(f'[ -z "$(ls -A {M})" ]', timeout=30)
    # and a parked manifest keeps it (nothing the user had is lost)
    node.sh("staticpodctl apply /root/web.yaml --as web2 && staticpodctl park web2")
    node.sh("sleep 2")
    assert node.sh(f"ls -A {M}/.staticpodd/parked").stdout.split() == ["web2.yaml"]


def test_a_textfile_directory_created_later_is_picked_up_on_reload(node: BootedNode, debs: dict) -> None:
    """node-exporter installed after staticpodd (12.7): the directory is read-only in the running
    daemon's sandbox until `systemctl reload` binds it; the file then passes promtool."""
    node.sh(f"mkdir -p -m 0700 {M} /etc/staticpodd && printf 'metrics:\\n  enabled: true\\n' "
            ">/etc/staticpodd/staticpodd.yaml")
    install(node, debs["old"])
    wait_active_with_restarts(node, 0)
    prom = "/var/lib/prometheus/node-exporter/staticpodd.prom"
    node.sh("mkdir -p /var/lib/prometheus/node-exporter")
    node.sh(f"staticpodctl apply /dev/stdin --as web <<'EOF'\n{POD}EOF")  # something to write about
    node.sh("sleep 2")
    assert not node.path(prom).exists()  # the daemon cannot write there yet ...
    failed = [e for e in with_id(journal_entries(node), Event.DAEMON_ERROR) if e.get("ERROR") == "metrics-write-failed"]
    assert failed and int(failed[0]["PRIORITY"]) <= 4, "... and says so in the journal, at warning"
    node.sh("systemctl reload staticpodd")
    node.wait_for(f"test -s {prom}", timeout=20)
    assert node.show("staticpodd", "NRestarts") == "0"  # a reload, not a restart
    text = node.path(prom).read_text()
    assert "staticpodd_external_changes_total" in text
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


HOOK = """#!/usr/bin/python3
# a notification hook: tells a local listener (a webhook stand-in on the node's loopback)
import os, urllib.request
urllib.request.urlopen("http://127.0.0.1:8099/unparked/" + os.environ["STATICPODD_COMPONENT"], timeout=5).read()
"""
NETWORK_DROPIN = """[Service]
PrivateNetwork=no
IPAddressDeny=
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
"""


def _readme_dropin() -> str:
    text = (REPO / "docs/tasks/install.md").read_text()
    return text.split("# sudo systemctl edit staticpodd\n", 1)[1].split("```", 1)[0]


def test_a_hook_run_by_the_daemon_has_no_network_says_so_and_the_readme_drop_in_gives_it(node: BootedNode,
                                                                                          debs: dict) -> None:
    """12.6: the same post-unpark hook works from staticpodctl, fails loudly at the daemon's
    deadline unpark (HOOK_FAILED, warning, HOOK_NETWORK=none), and works with the drop-in docs/tasks/install.md gives."""
    assert _readme_dropin() == NETWORK_DROPIN
    node.sh(f"mkdir -p -m 0700 {M}")
    node.path(f"{M}/kube-scheduler.yaml").write_bytes(scheduler_manifest())
    install(node, debs["old"])
    wait_active_with_restarts(node, 0)
    node.sh("systemd-run --unit=webhook --working-directory=/root "
            "python3 -m http.server --bind 127.0.0.1 8099 && sleep 1")
    hook = "/etc/staticpodd/hooks.d/post-unpark.d/50-notify"
    node.sh(f"cat >{hook} <<'EOF'\n{HOOK}EOF\nchmod 0755 {hook}")
    # by staticpodctl: works
    node.sh("staticpodctl park kube-scheduler && staticpodctl unpark kube-scheduler")
    assert "GET /unparked/kube-scheduler" in node.journal("-u", "webhook")
    # by the daemon at the deadline: fails, loudly
    node.sh("staticpodctl park kube-scheduler --for 2s")
    node.wait_for(f"test -f {M}/kube-scheduler.yaml", timeout=30)
    node.wait_for("journalctl -u staticpodd -o cat | grep -q 'hooks run by staticpodd have no network'", timeout=15)
    failed = [e for e in with_id(journal_entries(node), Event.HOOK_FAILED) if e.get("ACTOR") == "staticpodd"
              or e.get("_COMM") == "staticpodd"]
    assert failed, journal_entries(node)[-5:]
    assert int(failed[-1]["PRIORITY"]) <= 4 and failed[-1].get("HOOK_NETWORK") == "none", failed[-1]
    assert node.journal("-u", "webhook").count("GET /unparked/kube-scheduler") == 1
    # with the documented drop-in: works
    node.sh("mkdir -p /etc/systemd/system/staticpodd.service.d && "
            f"cat >/etc/systemd/system/staticpodd.service.d/network.conf <<'EOF'\n{NETWORK_DROPIN}EOF\n"
            "systemctl daemon-reload && systemctl restart staticpodd")
    node.sh("staticpodctl park kube-scheduler --for 2s")
    node.wait_for(f"test -f {M}/kube-scheduler.yaml", timeout=30)
    node.wait_for("[ $(journalctl -u webhook -o cat | grep -c 'GET /unparked/kube-scheduler') = 2 ]", timeout=15)


def test_doctor_exits_non_zero_when_the_enabled_daemon_is_down_or_cannot_write(node: BootedNode, debs: dict) -> None:
    """12.5: doctor's exit status is what automation reads."""
    node.sh(f"mkdir -p -m 0700 {M}")
    node.path(f"{M}/kube-scheduler.yaml").write_bytes(scheduler_manifest())
    install(node, debs["old"])
    wait_active_with_restarts(node, 0)
    assert node.sh("staticpodctl doctor", check=False).returncode == 0
    node.sh("systemctl stop staticpodd")
    r = node.sh("staticpodctl doctor --json", check=False)
    assert r.returncode == 1 and "daemon-down" in [p["code"] for p in json.loads(r.stdout)["problems"]], r.stdout
    node.sh("systemctl disable staticpodd 2>/dev/null")  # not meant to run: the CLI works alone
    assert node.sh("staticpodctl doctor", check=False).returncode == 0
    node.sh("systemctl enable --now staticpodd 2>/dev/null")
    wait_active_with_restarts(node, 0)
    node.sh(f"mount --bind {M} {M} && mount -o remount,bind,ro {M}")
    r = node.sh("staticpodctl doctor --json", check=False)
    codes = [p["code"] for p in json.loads(r.stdout)["problems"]]
    assert r.returncode == 1 and "manifest-dir-read-only" in codes, r.stdout
