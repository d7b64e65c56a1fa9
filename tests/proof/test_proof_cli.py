"""staticpodctl park/apply --wait end to end: the real engine, store, files and journald under a
``--root`` in tmp_path; only the container runtime is a stand-in (``crictl`` on PATH answering
from a timeline, see proof_fakes.py) because no kubelet or runtime can run here. Probes hit a
real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from proof_fakes import CORPUS, FakeRuntime, container, sandbox

from staticpodd import cli
from staticpodd.errors import EXIT_CONFLICT, EXIT_TIMEOUT

NODE = "cp-1"
NS = "kube-system"
POD = f"kube-scheduler-{NODE}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    src = CORPUS / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml"
    if not src.is_file():
        pytest.skip(f"corpus not found at {CORPUS} (set STATICPODD_CORPUS)")
    r = tmp_path / "root"
    mdir = r / "etc" / "kubernetes" / "manifests"
    mdir.mkdir(parents=True)
    shutil.copyfile(src, mdir / "kube-scheduler.yaml")
    return r


def run(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    rc = cli.main(["--root", str(root), "--json", *argv])
    lines = capsys.readouterr().out.strip().splitlines()
    return rc, json.loads(lines[-1])


def journal(root: Path, event: str) -> list[dict[str, Any]]:
    for _ in range(50):
        proc = subprocess.run(
            ["journalctl", "-o", "json", f"STATICPODD_ROOT={root}", f"STATICPODD_EVENT={event}"],
            capture_output=True,
            text=True,
            check=False,
        )
        entries = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        if entries:
            return entries
        time.sleep(0.1)
    return []


def old_pod_runs(fake: FakeRuntime, *later: Any) -> None:
    old = sandbox("old0000000000aaaa", POD, NS, "hash-old")
    fake.set((0, [old], [container("c-old", old, "kube-scheduler")]), *later)


def kubelet_reacts(root: Path) -> list[Any]:
    """The stand-in kubelet: once kube-scheduler.yaml's bytes change (or it goes away), the old
    sandbox stops and (for a changed file) a new one with config.hash ``hash-new`` starts."""
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    cond = [str(live), hashlib.sha256(live.read_bytes()).hexdigest()]
    old = sandbox("old0000000000aaaa", POD, NS, "hash-old", ready=False)
    new = dict(sandbox("new0000000000bbbb", POD, NS, "hash-new"), createdAt="@activated")
    new_c = dict(container("c-new", new, "kube-scheduler"), createdAt="@activated")
    exited = container("c-old", old, "kube-scheduler", state="CONTAINER_EXITED")
    gone = {"at": 0, "when_changed": cond, "sandboxes": [old], "containers": [exited]}
    return [gone, dict(gone, at=0, sandboxes=[old, new], containers=[exited, new_c], new=True)]


def with_probe(root: Path, port: int) -> Path:
    live = root / "etc" / "kubernetes" / "manifests" / "kube-scheduler.yaml"
    doc = yaml.safe_load(live.read_text())
    c = doc["spec"]["containers"][0]
    probe = {"httpGet": {"host": "127.0.0.1", "port": port, "path": "/healthz", "scheme": "HTTP"}}
    c["startupProbe"] = {**probe, "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 1}
    c["livenessProbe"] = {**probe, "periodSeconds": 1, "failureThreshold": 1, "timeoutSeconds": 1}
    new = root.parent / "kube-scheduler.yaml"
    new.write_text(yaml.safe_dump(doc))
    return new


def test_park_wait_confirms_the_pod_stopped(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    stopped, _ = kubelet_reacts(root)
    old_pod_runs(fake_runtime, stopped)
    rc, body = run(capsys, root, "park", "kube-scheduler", "--wait=5s", "--node-name", NODE)
    assert rc == 0 and body["ok"] and body["wait"]["state"] == "stopped"
    assert journal(root, "WAIT_CONFIRMED")


def test_park_wait_that_never_stops_exits_6_and_keeps_it_parked(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    old_pod_runs(fake_runtime)
    rc, body = run(capsys, root, "park", "kube-scheduler", "--wait=1s", "--node-name", NODE)
    assert rc == EXIT_TIMEOUT and not body["ok"]
    assert body["error"]["code"] == "wait-timeout" and body["wait"]["state"] == "still-running"
    assert not (root / "etc/kubernetes/manifests/kube-scheduler.yaml").exists()
    assert (root / "etc/kubernetes/manifests/.staticpodd/parked/kube-scheduler.yaml").exists()


def test_parking_the_local_api_load_balancer_needs_force(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    mdir = root / "etc/kubernetes/manifests"
    shutil.copyfile(CORPUS / "manifests" / "07-kubeadm-docs-haproxy.yaml", mdir / "haproxy.yaml")
    rc, body = run(capsys, root, "park", "haproxy")
    assert rc == EXIT_CONFLICT and body["error"]["code"] == "needs-force"
    assert "--force" in body["error"]["hint"] and (mdir / "haproxy.yaml").exists()
    rc, body = run(capsys, root, "park", "haproxy", "--force")
    assert rc == 0 and not (mdir / "haproxy.yaml").exists()


def test_parking_a_leftover_copy_of_the_apiserver_needs_no_force_the_pod_keeps_running(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    """kube-apiserver.yaml.bak defines the apiserver pod too: parking it leaves the kubelet
    running the pod from kube-apiserver.yaml, so it is not refused as parking the apiserver;
    parking kube-apiserver.yaml still is refused (the .bak would go on running the pod)."""
    mdir = root / "etc/kubernetes/manifests"
    src = CORPUS / "manifests" / "01-zetaoss-kubeadm-kube-apiserver.yaml"
    shutil.copyfile(src, mdir / "kube-apiserver.yaml")
    shutil.copyfile(src, mdir / "kube-apiserver.yaml.bak")
    rc, body = run(capsys, root, "park", "kube-apiserver.yaml.bak")
    assert rc == 0, body
    assert "runs from kube-apiserver.yaml" in body["msg"]
    assert "loses its apiserver" not in json.dumps(body)
    assert (mdir / "kube-apiserver.yaml").exists() and not (mdir / "kube-apiserver.yaml.bak").exists()
    rc, body = run(capsys, root, "park", "kube-apiserver")  # the last file of the pod: critical again
    assert rc == EXIT_CONFLICT and body["error"]["code"] == "needs-force"


def test_apply_wait_confirms_a_new_config_hash_with_passing_probes(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str], http_server: Any
) -> None:
    srv = http_server([200])
    new = with_probe(root, srv.port)
    old_pod_runs(fake_runtime, *kubelet_reacts(root))
    rc, body = run(capsys, root, "apply", str(new), "--wait=5s", "--node-name", NODE)
    assert rc == 0, body
    assert body["wait"]["state"] == "running" and body["wait"]["details"]["config_hash"] == "hash-new"
    assert srv.requests


def test_failed_probe_with_rollback_on_failure_restores_the_previous_bytes(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str], http_server: Any
) -> None:
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    previous = live.read_bytes()
    srv = http_server([500])
    new = with_probe(root, srv.port)
    old_pod_runs(fake_runtime, *kubelet_reacts(root))
    rc, body = run(capsys, root, "apply", str(new), "--rollback-on-failure", "--wait=5s", "--node-name", NODE)
    assert rc == EXIT_TIMEOUT and not body["ok"]
    assert body["wait"]["state"] == "unhealthy" and body["rollback"]["ok"]
    assert live.read_bytes() == previous
    rc, hist = run(capsys, root, "history", "kube-scheduler")
    newest = hist["versions"][-1]
    assert newest["action"] == "rollback" and newest["reason"].startswith("automatic rollback after apply: unhealthy")
    assert hist["current_digest"] == hist["versions"][0]["digest"]
    entries = journal(root, "AUTO_ROLLBACK")
    assert entries and "unhealthy" in entries[-1]["MESSAGE"]


def test_a_missing_crictl_stops_the_apply_before_anything_changes(
    root: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    previous = live.read_bytes()
    new = with_probe(root, 1)
    rc = cli.main(["--root", str(root), "--json", "apply", str(new), "--wait", "--crictl", str(tmp_path / "none")])
    body = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rc == 1 and body["error"]["code"] == "runtime-unavailable"
    assert "nothing was changed" in body["error"]["message"] and live.read_bytes() == previous


def test_a_pod_running_under_another_node_name_stops_the_apply_before_anything_changes(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str], http_server: Any
) -> None:
    live = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    previous = live.read_bytes()
    sb = sandbox("x1", "kube-scheduler-some-other-node-name", NS, "h")
    fake_runtime.set((0, [sb], [container("c1", sb, "kube-scheduler")]))
    new = with_probe(root, 1)
    rc, body = run(capsys, root, "apply", str(new), "--wait=2s")  # no --node-name: the host name
    assert rc == 2 and body["error"]["code"] == "node-name-mismatch"
    assert "--node-name some-other-node-name" in body["error"]["hint"] and live.read_bytes() == previous


def test_a_failed_wait_under_detailed_exitcode_exits_1_not_6(
    root: Path, fake_runtime: FakeRuntime, capsys: pytest.CaptureFixture[str], http_server: Any
) -> None:
    """2 means "changed" and 6 is outside the Puppet/Terraform convention: any failure is 1."""
    srv = http_server([500])
    new = with_probe(root, srv.port)
    old_pod_runs(fake_runtime, *kubelet_reacts(root))
    rc, body = run(capsys, root, "apply", str(new), "--wait=3s", "--node-name", NODE, "--detailed-exitcode")
    assert rc == 1 and not body["ok"] and body["error"]["code"] == "wait-timeout"
