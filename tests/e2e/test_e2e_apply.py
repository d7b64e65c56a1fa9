"""The real-kubelet tier (2) against a real kubelet 1.34 + containerd: apply --wait sees the new
config.hash and a container started after the swap; --rollback-on-failure brings the previous
version back and confirms that its pod runs; and a file the kubelet refuses is never confirmed
(the "false confirmation": a JSON manifest with a trailing comma)."""

from __future__ import annotations

import json
import time

import yaml
from e2e_lib import Node, scheduler_bytes, wait_json


def _run_v1(node: Node, data: bytes | None = None) -> str:
    node.write("kube-scheduler.yaml", data or scheduler_bytes())
    st = node.wait_running("kube-scheduler", 60)
    node.ctl("status", check=True)  # adopts the file as version 1
    return st.config_hash


def test_apply_wait_sees_the_new_config_hash_and_a_container_started_after_the_swap(node: Node, tmp_path) -> None:
    old_hash = _run_v1(node)
    new = tmp_path / "kube-scheduler.yaml"
    new.write_bytes(scheduler_bytes(extra_args=("--v=2",)))
    t0 = time.time()
    res = node.ctl("apply", str(new), "--wait=120s", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    w = wait_json(res)["wait"]
    assert w["ok"] and w["state"] == "running", w
    st = node.state("kube-scheduler")
    assert st is not None and st.config_hash == w["details"]["config_hash"] != old_hash
    created = [int(c["createdAt"]) / 1e9 for c in node.lab.containers() if c["podSandboxId"] == st.sandbox_id]
    assert created and min(created) >= t0, "the confirmed container predates the swap"
    # the kubelet's 10-15 s restart back-off on a UID change (pod_workers.go allowStaticPodStart) was waited out
    assert w["elapsed"] >= 5, w["elapsed"]


def test_rollback_on_failure_puts_the_previous_version_back_and_confirms_its_pod(node: Node, tmp_path) -> None:
    v1 = scheduler_bytes()
    old_hash = _run_v1(node, v1)
    bad = tmp_path / "kube-scheduler.yaml"
    bad.write_bytes(scheduler_bytes(extra_args=("--v=3",), readiness_port=1))  # nothing serves port 1
    res = node.ctl("apply", str(bad), "--wait=40s", "--rollback-on-failure", "--json", timeout=400)
    assert res.returncode == 6, res.stdout + res.stderr
    body = wait_json(res)
    assert body["wait"]["state"] == "unhealthy", body["wait"]
    assert body["rollback"]["ok"], body["rollback"]
    assert (node.manifests / "kube-scheduler.yaml").read_bytes() == v1
    rb_wait = body["rollback"].get("wait")
    assert rb_wait and rb_wait["ok"], f"the rolled-back pod was not confirmed: {rb_wait}"
    st = node.wait_running("kube-scheduler", 30)
    assert st.config_hash == old_hash, "the pod that runs is not the previous version"


def test_apply_wait_never_confirms_a_json_file_the_kubelet_refuses(node: Node, tmp_path) -> None:
    doc = yaml.safe_load(scheduler_bytes())
    good = json.dumps(doc, indent=2).encode() + b"\n"
    old_hash = _run_v1(node, good)
    broken = good.rstrip().removesuffix(b"}").rstrip() + b",\n}\n"  # trailing comma: strict JSON refuses it
    assert broken.lstrip().startswith(b"{")
    src = tmp_path / "kube-scheduler.yaml"
    src.write_bytes(broken)
    offset = node.lab.log_offset()
    res = node.ctl("apply", str(src), "--wait=120s", "--rollback-on-failure", "--json", timeout=600)
    body = wait_json(res)
    applied = node.parse_errors(offset)
    # Either staticpodctl refused the file (nothing changed), or it swapped it in, saw the kubelet
    # drop the pod at its relist, rolled back and confirmed the rolled-back pod. Never exit 0.
    assert res.returncode != 0, f"confirmed a file the kubelet refused ({applied[:1]}): {body.get('wait')}"
    assert (node.manifests / "kube-scheduler.yaml").read_bytes() == good
    if body.get("rollback"):
        assert body["wait"]["state"] == "dropped", body["wait"]
        assert body["rollback"]["ok"] and body["rollback"]["wait"]["ok"], body["rollback"]
    # and it stays so past the kubelet's next relist
    time.sleep(node.lab.relist_seconds + 3)
    st = node.wait_running("kube-scheduler", 30)
    assert st.config_hash == old_hash
