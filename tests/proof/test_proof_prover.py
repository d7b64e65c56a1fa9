"""Prover: confirm the kubelet stopped or started a static pod, from the node.

The real kubelet tier (tests/e2e) proves the waits against kubelet 1.34 + containerd; here
``crictl`` is a stand-in executable (tests/proof/conftest.py), for what a real runtime cannot show
on demand (hangs, failures, crash loops on cue, second-scale timeouts),
put first on PATH, answering from a JSON timeline this test writes; its JSON has real crictl's
shapes. Probes hit real HTTP/HTTPS/TCP servers on 127.0.0.1. Timeouts are small (1-3 s) and the
tests assert outcomes, never wall-clock durations.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from proof_fakes import CORPUS, FakeRuntime, container, sandbox

from staticpodd.errors import EXIT_TIMEOUT, WaitTimeout
from staticpodd.proof import (
    Crictl,
    Outcome,
    Progress,
    Prover,
    RuntimeUnavailable,
    find_shadowing_file,
    pod_spec_changed,
)

NODE = "cp-1"
NS = "kube-system"
POD = f"kube-scheduler-{NODE}"


def prover(**kw: Any) -> Prover:
    kw.setdefault("settle", 0.3)
    return Prover(Crictl(), node_name=NODE, poll_interval=0.1, **kw)


def scheduler_doc(probes: dict[str, Any] | None = None, **container_extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "kube-scheduler", "image": "registry.k8s.io/kube-scheduler:v1.29.0"}
    c.update(probes or {})
    c.update(container_extra)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "kube-scheduler", "namespace": NS},
        "spec": {"hostNetwork": True, "containers": [c]},
    }


def running_old() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    sb = sandbox("old0000000000aaaa", POD, NS, "hash-old")
    return sb, [container("c-old", sb, "kube-scheduler")]


def swap_to_new(fake: FakeRuntime, *, new_after: float = 0.3, new_hash: str = "hash-new", **new_kw: Any) -> float:
    """Timeline: the old pod runs, stops, then a new sandbox with ``new_hash`` starts."""
    old, old_c = running_old()
    swap = time.time()
    stopped = dict(old, state="SANDBOX_NOTREADY")
    new = sandbox("new0000000000bbbb", POD, NS, new_hash, created=swap + new_after)
    new_c = container("c-new", new, "kube-scheduler", created=swap + new_after, **new_kw)
    fake.set(
        (0, [old], old_c),
        (new_after / 2, [stopped], [dict(old_c[0], state="CONTAINER_EXITED")]),
        (new_after, [stopped, new], [dict(old_c[0], state="CONTAINER_EXITED"), new_c]),
    )
    return swap


def wait_started(p: Prover, before: Any, swap: float, doc: dict[str, Any], mdir: Path, **kw: Any) -> Outcome:
    args: dict[str, Any] = {"manifest_changed": True, "timeout": 3.0}
    args.update(kw)
    return p.wait_started(POD, NS, before=before, swap_time=swap, manifest_doc=doc, manifest_dir=mdir, **args)


# --- park ---------------------------------------------------------------------------------------


def test_park_is_confirmed_when_the_sandbox_and_its_containers_stop_in_time(fake_runtime: FakeRuntime) -> None:
    old, old_c = running_old()
    fake_runtime.set(
        (0, [old], old_c),
        (0.4, [dict(old, state="SANDBOX_NOTREADY")], [dict(old_c[0], state="CONTAINER_EXITED")]),
    )
    seen: list[Progress] = []
    out = prover().wait_stopped(POD, NS, timeout=3.0, progress=seen.append)
    assert out.ok and out.state == "stopped"
    assert "no ready sandbox and no running container" in out.message
    assert seen[-1].done and any(p.phase == "stopping" and "kube-scheduler" in p.message for p in seen)
    # the stand-in on PATH was what answered (no --runtime-endpoint given: crictl's own config)
    assert fake_runtime.calls() and all("--runtime-endpoint" not in c for c in fake_runtime.calls())


def test_park_reports_still_running_when_the_kubelet_never_stops_the_pod(fake_runtime: FakeRuntime) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    out = prover().wait_stopped(POD, NS, timeout=1.0)
    assert not out.ok and out.state == "still-running"
    assert "still runs" in out.message and "kube-scheduler" in out.message
    assert "crictl stopp old0000000000" in (out.hint or "")
    err = out.error()
    assert isinstance(err, WaitTimeout) and err.exit_status == EXIT_TIMEOUT == 6
    assert err.to_dict()["details"]["state"] == "still-running"
    with pytest.raises(WaitTimeout):
        out.raise_for_failure()


def test_park_with_the_wrong_node_name_is_not_reported_as_stopped(fake_runtime: FakeRuntime) -> None:
    sb = sandbox("x1", "kube-scheduler-real-node", NS, "h")
    fake_runtime.set((0, [sb], [container("c1", sb, "kube-scheduler")]))
    out = prover().wait_stopped(POD, NS, timeout=1.0)
    assert not out.ok and out.state == "name-mismatch"
    assert "kube-scheduler-real-node" in out.message and "--node-name" in (out.hint or "")


def test_a_hanging_runtime_does_not_stretch_the_timeout(fake_runtime: FakeRuntime) -> None:
    old, old_c = running_old()
    fake_runtime.set({"at": 0, "sandboxes": [old], "containers": old_c, "hang": 30})
    out = prover().wait_stopped(POD, NS, timeout=1.0)
    assert not out.ok and out.state == "runtime-unavailable"
    assert "did not answer" in out.message


def test_snapshot_refuses_when_crictl_is_missing(tmp_path: Path) -> None:
    p = Prover(Crictl(str(tmp_path / "no-such-crictl")), node_name=NODE)
    with pytest.raises(RuntimeUnavailable) as exc:
        p.snapshot(POD, NS)
    assert exc.value.code == "runtime-unavailable" and "--crictl" in (exc.value.hint or "")


def test_snapshot_reports_a_failing_endpoint_and_passes_the_endpoint_option(fake_runtime: FakeRuntime) -> None:
    fake_runtime.set({"at": 0, "fail": "connect: connect endpoint 'unix:///x.sock': no such file"})
    p = Prover(Crictl(runtime_endpoint="unix:///x.sock"), node_name=NODE)
    with pytest.raises(RuntimeUnavailable, match="no such file"):
        p.snapshot(POD, NS)
    assert fake_runtime.calls()[0][:2] == ["--runtime-endpoint", "unix:///x.sock"]


def test_snapshot_records_the_config_hash_that_runs(fake_runtime: FakeRuntime) -> None:
    old, old_c = running_old()
    other = sandbox("zz", "etcd-cp-1", NS, "etcd-hash")
    fake_runtime.set((0, [old, other], old_c))
    before = prover().snapshot(POD, NS)
    assert before.config_hash == "hash-old" and before.sandbox_ids == {old["id"]}
    assert [c.name for c in before.running_containers] == ["kube-scheduler"]
    json.dumps(before.to_dict())


# --- apply / unpark -----------------------------------------------------------------------------


def test_apply_is_confirmed_when_a_new_config_hash_runs(fake_runtime: FakeRuntime, tmp_path: Path) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    p = prover()
    before = p.snapshot(POD, NS)
    swap = swap_to_new(fake_runtime)
    out = wait_started(p, before, swap, scheduler_doc(), tmp_path)
    assert out.ok and out.state == "running", out.message
    assert out.details["config_hash"] == "hash-new" and out.details["new_sandbox"] is True
    assert out.details["before_config_hash"] == "hash-old"
    json.dumps(out.to_dict())


def test_unpark_is_confirmed_when_the_pod_starts_again_with_the_same_hash(
    fake_runtime: FakeRuntime, tmp_path: Path
) -> None:
    old, old_c = running_old()
    stopped = dict(old, state="SANDBOX_NOTREADY")
    fake_runtime.set((0, [stopped], [dict(old_c[0], state="CONTAINER_EXITED")]))
    p = prover()
    before = p.snapshot(POD, NS)
    swap = time.time()
    new = sandbox("again000000000cc", POD, NS, "hash-old", created=swap + 0.3)
    fake_runtime.set(
        (0, [stopped], []),
        (0.3, [stopped, new], [container("c2", new, "kube-scheduler", created=swap + 0.3)]),
    )
    out = wait_started(p, before, swap, scheduler_doc(), tmp_path, manifest_changed=False)
    assert out.ok and out.details["sandbox_id"] == "again000000000cc"


def test_a_new_sandbox_whose_containers_never_run_is_reported(fake_runtime: FakeRuntime, tmp_path: Path) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    p = prover()
    before = p.snapshot(POD, NS)
    swap = swap_to_new(fake_runtime, state="CONTAINER_EXITED", attempt=3)
    out = wait_started(p, before, swap, scheduler_doc(), tmp_path, timeout=1.5)
    assert not out.ok and out.state == "crash-looping"
    assert "kube-scheduler exited (attempt 3)" in out.message


def test_no_new_sandbox_at_all_is_never_started(fake_runtime: FakeRuntime, tmp_path: Path) -> None:
    fake_runtime.set((0, [], []))
    p = prover()
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, time.time(), scheduler_doc(), tmp_path, timeout=1.0)
    assert not out.ok and out.state == "never-started"
    assert "OutOfcpu" in (out.hint or "")


def test_an_unchanged_hash_without_another_file_is_reported_as_unchanged(
    fake_runtime: FakeRuntime, tmp_path: Path
) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    (tmp_path / "kube-scheduler.yaml").write_text(yaml.safe_dump(scheduler_doc()))
    p = prover()
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, time.time(), scheduler_doc(), tmp_path, timeout=1.0)
    assert not out.ok and out.state == "unchanged" and out.shadowing_file is None
    assert "hash-old" in out.message


def test_a_bak_file_that_sorts_last_is_named_when_the_hash_never_changes(
    fake_runtime: FakeRuntime, tmp_path: Path
) -> None:
    case = CORPUS / "cases" / "B02-upgrade-with-bak"
    if not case.is_dir():
        pytest.skip(f"corpus not found at {CORPUS} (set STATICPODD_CORPUS)")
    mdir = tmp_path / "manifests"
    shutil.copytree(case, mdir)
    for f in mdir.iterdir():
        f.chmod(0o644)
    doc = yaml.safe_load((mdir / "kube-controller-manager.yaml").read_text())
    pod = f"kube-controller-manager-{NODE}"
    sb = sandbox("kcm00000000000aa", pod, NS, "hash-of-bak")
    fake_runtime.set((0, [sb], [container("c-kcm", sb, "kube-controller-manager")]))
    p = prover()
    before = p.snapshot(pod, NS)
    out = p.wait_started(
        pod,
        NS,
        before=before,
        swap_time=time.time(),
        manifest_doc=doc,
        manifest_changed=True,
        manifest_dir=mdir,
        timeout=1.5,
    )
    assert not out.ok and out.state == "shadowed"
    assert out.shadowing_file == "kube-controller-manager.yaml.bak"
    assert "kube-controller-manager.yaml.bak" in out.message
    assert out.details["files_defining_pod"] == ["kube-controller-manager.yaml", "kube-controller-manager.yaml.bak"]
    assert out.to_dict()["shadowing_file"] == "kube-controller-manager.yaml.bak"


def test_shadowing_is_judged_by_the_kubelets_sort_order(tmp_path: Path) -> None:
    doc = scheduler_doc()
    older = scheduler_doc(args=["--v=2"])
    (tmp_path / "kube-scheduler.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / ".kube-scheduler.yaml.swp").write_text(yaml.safe_dump(older))  # dot-name: ignored
    assert find_shadowing_file(tmp_path, doc) is None
    (tmp_path / "a-copy.yaml").write_text(yaml.safe_dump(older))  # sorts first: ours still wins
    assert find_shadowing_file(tmp_path, doc, manifest_file="kube-scheduler.yaml") is None
    (tmp_path / "kube-scheduler.yaml~").write_text(yaml.safe_dump(older))  # sorts last: wins
    assert find_shadowing_file(tmp_path, doc) == "kube-scheduler.yaml~"


# --- health -------------------------------------------------------------------------------------


def fast(probe: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A probe with fractional periods so the test runs in about a second."""
    out = {"periodSeconds": 0.1, "timeoutSeconds": 1, "failureThreshold": 3, "successThreshold": 1}
    out.update(kw)
    out.update(probe)
    return out


def test_probe_that_fails_then_succeeds_within_its_thresholds_is_healthy(
    fake_runtime: FakeRuntime, tmp_path: Path, http_server: Any, tcp_port: int
) -> None:
    srv = http_server([500, 503, 200])
    doc = scheduler_doc(
        {
            "readinessProbe": fast(
                {
                    "httpGet": {
                        "port": srv.port,
                        "path": "/readyz?verbose",
                        "httpHeaders": [{"name": "X-Probe", "value": "1"}],
                    }
                },
                successThreshold=2,
            ),
            "livenessProbe": fast({"tcpSocket": {"port": tcp_port}}),
        }
    )
    p = prover()
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    before = p.snapshot(POD, NS)
    seen: list[Progress] = []
    out = wait_started(p, before, swap_to_new(fake_runtime), doc, tmp_path, progress=seen.append)
    assert out.ok and out.state == "running", out.message
    assert {p.phase for p in seen} >= {"health", "done"}
    assert all(p.message and "None" not in p.message for p in seen), [p.message for p in seen]
    assert len(srv.requests) >= 4  # two failures, then successThreshold=2 successes
    path, headers = srv.requests[0]
    assert path == "/readyz?verbose" and headers["x-probe"] == "1" and headers["user-agent"].startswith("kube-probe")
    ready = next(pr for pr in out.details["probes"] if pr["kind"] == "readinessProbe")
    assert ready["consecutive_successes"] >= 2 and "HTTP 500" in ready["recent"][0]


def test_https_probe_on_a_named_port_with_a_self_signed_certificate(
    fake_runtime: FakeRuntime, tmp_path: Path, https_server: Any
) -> None:
    srv = https_server([200])
    doc = scheduler_doc(
        {"startupProbe": fast({"httpGet": {"scheme": "HTTPS", "port": "https", "path": "healthz"}})},
        ports=[{"name": "https", "containerPort": srv.port}],
    )
    p = prover()
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, swap_to_new(fake_runtime), doc, tmp_path)
    assert out.ok, out.message
    assert srv.requests[0][0] == "/healthz"


def test_liveness_failing_failure_threshold_times_is_unhealthy_before_the_deadline(
    fake_runtime: FakeRuntime, tmp_path: Path, http_server: Any
) -> None:
    srv = http_server([500])
    doc = scheduler_doc(
        {"livenessProbe": fast({"httpGet": {"port": srv.port, "path": "/healthz"}}, failureThreshold=2)}
    )
    p = prover()
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, swap_to_new(fake_runtime), doc, tmp_path, timeout=30.0)
    assert not out.ok and out.state == "unhealthy"
    assert "failureThreshold" in out.message and "HTTP 500" in out.message
    assert len(srv.requests) == 2  # exactly failureThreshold runs, then the verdict
    assert out.details["config_hash"] == "hash-new"


def test_readiness_that_never_passes_ends_unhealthy_at_the_deadline(
    fake_runtime: FakeRuntime, tmp_path: Path, closed_port: int
) -> None:
    doc = scheduler_doc({"readinessProbe": fast({"tcpSocket": {"port": closed_port}})})
    p = prover()
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, swap_to_new(fake_runtime), doc, tmp_path, timeout=1.5)
    assert not out.ok and out.state == "unhealthy"
    assert "did not become healthy before the deadline" in out.message
    assert "ConnectionRefusedError" in out.message


def test_exec_probe_runs_through_crictl_exec(fake_runtime: FakeRuntime, tmp_path: Path) -> None:
    doc = scheduler_doc({"livenessProbe": fast({"exec": {"command": ["/bin/true"]}}, failureThreshold=1)})
    p = prover()
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    before = p.snapshot(POD, NS)
    swap_to_new(fake_runtime)
    state = json.loads(fake_runtime.state.read_text())
    state["phases"][-1]["exec"] = {"c-new": 1}
    fake_runtime.state.write_text(json.dumps(state))
    out = wait_started(p, before, time.time(), doc, tmp_path, timeout=3.0)
    assert not out.ok and out.state == "unhealthy" and "exit status 1" in out.message
    assert any(c[:1] == ["exec"] and "c-new" in c for c in fake_runtime.calls())


def test_pod_network_pods_are_probed_on_the_sandbox_ip(
    fake_runtime: FakeRuntime, tmp_path: Path, tcp_port: int
) -> None:
    doc = scheduler_doc({"readinessProbe": fast({"tcpSocket": {"port": tcp_port}})})
    doc["spec"]["hostNetwork"] = False
    p = prover()
    swap = time.time()
    new = sandbox("podnet00000000aa", POD, NS, "h2", created=swap + 0.1, ip="127.0.0.1")
    fake_runtime.set((0, [new], [container("c3", new, "kube-scheduler", created=swap + 0.1)]))
    out = wait_started(p, None, swap, doc, tmp_path)
    assert out.ok, out.message
    assert any(c[:1] == ["inspectp"] for c in fake_runtime.calls())


# --- helpers ------------------------------------------------------------------------------------


def test_pod_spec_changed_ignores_what_the_kubelet_ignores() -> None:
    a = scheduler_doc()
    b = json.loads(json.dumps(a))
    b["metadata"]["creationTimestamp"] = None
    b["status"] = {}
    assert not pod_spec_changed(a, b)
    b["spec"]["containers"][0]["image"] = "registry.k8s.io/kube-scheduler:v1.29.1"
    assert pod_spec_changed(a, b) and pod_spec_changed(None, a)


def test_target_names_the_pod_as_the_kubelet_does() -> None:
    p = Prover(Crictl(), node_name="CP-1")
    assert p.target(scheduler_doc()) == ("kube-scheduler-cp-1", NS)
    assert p.target({"metadata": {"name": "static-web"}}) == ("static-web-cp-1", "default")


def test_apply_under_the_wrong_node_name_is_a_mismatch_and_not_worth_a_rollback(
    fake_runtime: FakeRuntime, tmp_path: Path
) -> None:
    sb = sandbox("x1", "kube-scheduler-real-node", NS, "h", created=time.time() + 0.2)
    fake_runtime.set((0, [sb], [container("c1", sb, "kube-scheduler", created=time.time() + 0.2)]))
    p = prover()
    out = wait_started(p, None, time.time(), scheduler_doc(), tmp_path, timeout=1.0)
    assert not out.ok and out.state == "name-mismatch" and not out.rollback_advised
    assert out.details["probable_node_names"] == ["real-node"]
    assert out.to_dict()["rollback_advised"] is False


def test_a_container_that_keeps_crashing_is_never_taken_for_running(fake_runtime: FakeRuntime, tmp_path: Path) -> None:
    """Each attempt runs for 0.3 s then exits; with settle=0.6 no look may call that running."""
    swap = time.time()
    sb = sandbox("crash000000000aa", POD, NS, "hash-new", created=swap)
    phases = []
    for i in range(6):
        at = 0.1 + i * 0.5
        up = container(f"c{i}", sb, "kube-scheduler", created=swap + at, attempt=i)
        down = dict(up, state="CONTAINER_EXITED")
        earlier = [dict(container(f"c{j}", sb, "kube-scheduler", created=swap + 0.1 + j * 0.5, attempt=j),
                        state="CONTAINER_EXITED") for j in range(i)]  # fmt: skip
        phases += [(at, [sb], [*earlier, up]), (at + 0.3, [sb], [*earlier, down])]
    fake_runtime.set(*phases)
    out = wait_started(prover(settle=0.6), None, swap, scheduler_doc(), tmp_path, timeout=2.5)
    assert not out.ok and out.state == "crash-looping", out.message
    assert "exited (attempt" in out.message


# --- "still running" right after a swap proves nothing until the kubelet relisted --------


def test_a_pod_that_never_stopped_is_confirmed_only_after_the_kubelets_relist(
    fake_runtime: FakeRuntime, tmp_path: Path
) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    p = prover(file_check_frequency=0.5)
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, time.time(), scheduler_doc(), tmp_path, manifest_changed=False, timeout=8)
    assert out.ok and out.details["sandbox_id"] == old["id"]
    assert out.elapsed >= 0.5 + 3.0  # one relist + the margin for the kill to reach the runtime
    assert "survived the kubelet's relist" in out.message


def test_a_timeout_before_the_relist_is_not_a_confirmation_nor_a_reason_to_roll_back(
    fake_runtime: FakeRuntime, tmp_path: Path
) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    p = prover(file_check_frequency=20)
    before = p.snapshot(POD, NS)
    out = wait_started(p, before, time.time(), scheduler_doc(), tmp_path, manifest_changed=False, timeout=1.5)
    assert not out.ok and out.state == "not-relisted"
    assert not out.rollback_advised


def test_a_pod_the_relist_removed_and_nothing_replaced_is_dropped(fake_runtime: FakeRuntime, tmp_path: Path) -> None:
    old, old_c = running_old()
    fake_runtime.set((0, [old], old_c))
    p = prover(file_check_frequency=0.5, restart_backoff=0.5)
    before = p.snapshot(POD, NS)
    stopped = dict(old, state="SANDBOX_NOTREADY")
    fake_runtime.set((0, [old], old_c), (0.6, [stopped], [dict(old_c[0], state="CONTAINER_EXITED")]))
    out = wait_started(p, before, time.time(), scheduler_doc(), tmp_path, manifest_changed=False, timeout=8)
    assert not out.ok and out.state == "dropped" and out.rollback_advised
    assert "refused the new file" in out.message
