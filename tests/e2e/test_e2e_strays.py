"""The real-kubelet tier (5) against a real kubelet 1.34 + containerd: strays.

``cp kube-scheduler.yaml kube-scheduler.yaml.bak``: the kubelet reads the ``.bak`` within
milliseconds, and because it sorts last it restarts the pod under the ``.bak``-derived UID: no
quarantine can prevent that. What ``on_stray: quarantine`` can do is measured here: the stray
is moved out, and the daemon then touches the live file so the kubelet re-adds the
``.yaml``'s pod at once instead of at its next relist (up to 20 s). The journal says so.
And ``apply --wait`` names the shadowing file when the new config.hash never arrives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from daemon_harness import journal
from e2e_lib import Node, scheduler_bytes


def test_quarantine_moves_the_bak_out_and_the_live_pod_is_back_before_the_next_relist(node: Node) -> None:
    live = node.write("kube-scheduler.yaml", scheduler_bytes())
    first = node.wait_running("kube-scheduler", 60)
    node.start_daemon("on_stray: quarantine\n")
    bak = node.manifests / "kube-scheduler.yaml.bak"
    t0 = time.monotonic()
    shutil.copy2(live, bak)  # cp -p: the same bytes under another name
    killed = quarantined = None
    end = t0 + 15
    while time.monotonic() < end and (killed is None or quarantined is None):
        st = node.state("kube-scheduler")
        if killed is None and (st is None or st.key != first.key):
            killed = time.monotonic() - t0
        if quarantined is None and not bak.exists():
            quarantined = time.monotonic() - t0
        time.sleep(0.01)
    assert quarantined is not None, "the .bak was not quarantined"
    assert list((node.manifests / ".staticpodd" / "quarantine").iterdir()), "nothing in .staticpodd/quarantine"
    # the pod of kube-scheduler.yaml (its own UID, the one that ran first) runs again
    back = node.wait(
        lambda: (s := node.state("kube-scheduler")) is not None and s.config_hash == first.config_hash and s,
        node.lab.relist_seconds + 20,
        "the live file's pod back",
    )
    back_at = time.monotonic() - t0
    print(f"\nstray .bak: kubelet killed the running pod at {killed if killed is None else round(killed, 3)} s, "
          f"quarantined at {quarantined:.3f} s, kube-scheduler.yaml's pod running again at {back_at:.1f} s "
          f"(relist {node.lab.relist_seconds:g} s)")
    assert back.config_hash == first.config_hash
    # re-added by the touch, not by the next relist: well before a 20 s relist could bring it back
    assert back_at - quarantined < 8, f"the live pod came back {back_at - quarantined:.1f} s after the quarantine"
    entries = [e for e in journal(node.root, "STRAY_QUARANTINED") if e.get("READDED") == "kube-scheduler.yaml"]
    assert entries, "the journal does not say the stray had already restarted the pod"
    assert "before the quarantine could act" in entries[0]["MESSAGE"]


def test_parking_a_bak_twin_has_the_kubelet_run_the_live_file_before_the_next_relist(node: Node) -> None:
    """``staticpodctl park kube-scheduler.yaml.bak``, the stray-backup page's answer, with no
    daemon: the kubelet drops the pod when the .bak goes and would run kube-scheduler.yaml's pod
    again only at its next relist; park touches kube-scheduler.yaml so it does so at once. Timed
    from just after a relist, so a pod back before the next one is the touch's doing."""
    live = node.write("kube-scheduler.yaml", scheduler_bytes())
    first = node.wait_running("kube-scheduler", 60)
    shutil.copy2(live, node.manifests / "kube-scheduler.yaml.bak")  # cp -p: the pod restarts under the .bak
    node.wait(lambda: (s := node.state("kube-scheduler")) is not None and s.config_hash != first.config_hash,
              30, "the pod running from the .bak")
    period = node.lab.relist_seconds
    now = time.time()
    ticks = node.lab.relists(now - period, now + 2 * period)
    assert ticks, "the kubelet's log has no relist schedule"
    tick = next(t for t in ticks if t > now)
    time.sleep(max(0.0, tick + 0.3 - time.time()))  # just after a relist: the next is a period away
    t0 = time.time()
    next_relist = next(t for t in node.lab.relists(t0, t0 + 2 * period) if t > t0)
    park = node.ctl("park", "kube-scheduler.yaml.bak", "--json", check=True)
    assert "touched it" in json.loads(park.stdout)["msg"], park.stdout
    back = node.wait(
        lambda: (s := node.state("kube-scheduler")) is not None and s.config_hash == first.config_hash and s,
        period + 20, "kube-scheduler.yaml's pod back")
    took = time.time() - t0
    print(f"\npark of the .bak twin: kube-scheduler.yaml's pod running again {took:.1f} s later; the next "
          f"relist was {next_relist - t0:.1f} s after the park")
    assert back.config_hash == first.config_hash
    # running before the next relist: only an event (the touch) can have had the kubelet re-add it
    assert t0 + took < next_relist, f"the pod came back {took:.1f} s after the park: at the relist, not by the touch"


def test_apply_wait_names_the_shadowing_file_when_the_hash_never_arrives(node: Node, tmp_path) -> None:
    live = node.write("kube-scheduler.yaml", scheduler_bytes())
    node.wait_running("kube-scheduler", 60)
    node.ctl("status", check=True)
    old = live.read_bytes()
    # a leftover that exists before the apply is refused up front (conflict, exit 4, naming it)
    node.write("kube-scheduler.yaml.bak", old)
    refused = node.ctl("apply", str(live), "--json")
    assert refused.returncode == 4 and "kube-scheduler.yaml.bak" in refused.stdout, refused.stdout
    (node.manifests / "kube-scheduler.yaml.bak").unlink()
    node.wait_running("kube-scheduler", 60)
    # one that appears while the wait runs (a config-management run's backup copy): named at the end
    new = tmp_path / "kube-scheduler.yaml"
    new.write_bytes(scheduler_bytes(extra_args=("--v=2",)))
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "staticpodctl"), "apply", str(new), "--wait=60s", "--json",
         "--root", str(node.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    node.wait(lambda: live.read_bytes() != old, 30, "the swap")
    node.write("kube-scheduler.yaml.bak", old)
    out, err = proc.communicate(timeout=200)
    assert proc.returncode == 6, out + err
    w = json.loads(out)["wait"]
    assert w["state"] == "shadowed" and w["shadowing_file"] == "kube-scheduler.yaml.bak", w
