"""The optional mirror pod check: a real HTTPS "apiserver" on 127.0.0.1 (self-signed certificate,
trusted through the kubeconfig's certificate-authority-data; bearer token) answering the pod GET.
Its answer is reported in details["mirror_pod"]; once staticpodd's own probe checks pass, a wait
also waits for the kubelet's Ready condition on the mirror pod (the real thing is proven against a
real control plane in tests/controlplane). The container runtime is the stand-in crictl
(proof_fakes.py)."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from proof_fakes import FakeRuntime, container, sandbox, self_signed

from staticpodd.proof import Crictl, Prover
from staticpodd.proof.mirror import mirror_pod_hash

POD, NS = "kube-scheduler-cp-1", "kube-system"


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[Any]:
    cert, key = self_signed(tmp_path)
    pods: dict[str, dict[str, Any]] = {}
    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append((self.path, self.headers.get("Authorization")))
            pod = pods.get(self.path)
            body = json.dumps(pod if pod else {"kind": "Status", "code": 404}).encode()
            self.send_response(200 if pod else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    kubeconfig = tmp_path / "kubelet.conf"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "k",
                        "cluster": {
                            "server": f"https://127.0.0.1:{httpd.server_address[1]}",
                            "certificate-authority-data": base64.b64encode(cert.read_bytes()).decode(),
                        },
                    }
                ],
                "users": [{"name": "node", "user": {"token": "s3cret"}}],
                "contexts": [{"name": "default", "context": {"cluster": "k", "user": "node"}}],
                "current-context": "default",
            }
        )
    )

    class Api:
        path = kubeconfig
        requests = seen

        @staticmethod
        def serve(pod_name: str, config_hash: str, ready: bool = True) -> None:
            ann = {"kubernetes.io/config.hash": config_hash, "kubernetes.io/config.mirror": config_hash}
            status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
            pods[f"/api/v1/namespaces/{NS}/pods/{pod_name}"] = {
                "metadata": {"name": pod_name, "annotations": ann}, "status": status}

    yield Api
    httpd.shutdown()
    httpd.server_close()


def test_the_mirror_pods_config_hash_is_read_through_the_kubeconfig(apiserver: Any) -> None:
    assert mirror_pod_hash(apiserver.path, POD, NS) == {"found": False, "config_hash": None, "mirror": False, "ready": None}
    apiserver.serve(POD, "hash-new")
    assert mirror_pod_hash(apiserver.path, POD, NS) == {"found": True, "config_hash": "hash-new", "mirror": True, "ready": True}
    assert apiserver.requests[-1] == (f"/api/v1/namespaces/{NS}/pods/{POD}", "Bearer s3cret")


def test_an_unreachable_apiserver_is_an_error_entry_not_an_exception(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                                  "contexts": [{"name": "x", "context": {"cluster": "c"}}], "current-context": "x"}))  # fmt: skip
    assert "error" in mirror_pod_hash(kc, POD, NS, timeout=0.5)
    assert "error" in mirror_pod_hash(tmp_path / "missing", POD, NS)


def test_a_kubeconfig_another_user_could_swap_is_not_used(tmp_path: Path, apiserver: Any) -> None:
    """The client runs a kubeconfig's exec plugin as the caller: a kubeconfig in a directory
    another user may write is refused, and the wait goes on without the mirror pod."""
    apiserver.serve(POD, "hash-new")
    shared = tmp_path / "shared"
    shared.mkdir()
    kc = shared / "kubelet.conf"
    kc.write_bytes(apiserver.path.read_bytes())
    shared.chmod(0o777)
    info = mirror_pod_hash(kc, POD, NS)
    assert "another user could have written it" in info.get("error", ""), info
    assert apiserver.requests == []


def test_a_wait_reports_the_mirror_pod_without_depending_on_it(
    fake_runtime: FakeRuntime, tmp_path: Path, apiserver: Any
) -> None:
    apiserver.serve(POD, "hash-new")
    swap = time.time()
    new = sandbox("n1", POD, NS, "hash-new", created=swap + 0.1)
    fake_runtime.set((0, [new], [container("c1", new, "kube-scheduler", created=swap + 0.1)]))
    p = Prover(Crictl(), node_name="cp-1", poll_interval=0.1, kubeconfig=apiserver.path, settle=0.2)
    doc = {
        "metadata": {"name": "kube-scheduler", "namespace": NS},
        "spec": {"containers": [{"name": "kube-scheduler"}]},
    }
    out = p.wait_started(POD, NS, before=None, swap_time=swap, manifest_doc=doc, manifest_changed=True,
                         manifest_dir=tmp_path, timeout=3.0)  # fmt: skip
    assert out.ok and out.details["mirror_pod"]["matches_runtime"] is True
    # the apiserver being gone changes nothing about the verdict
    p.kubeconfig = tmp_path / "missing"
    out = p.wait_stopped("other-cp-1", NS, timeout=1.0)
    assert out.ok and "error" in out.details["mirror_pod"]


def _started(p: Prover, tmp_path: Path, fake_runtime: FakeRuntime, timeout: float) -> Any:
    swap = time.time()
    new = sandbox("n1", POD, NS, "hash-new", created=swap + 0.1)
    fake_runtime.set((0, [new], [container("c1", new, "kube-scheduler", created=swap + 0.1)]))
    doc = {"metadata": {"name": "kube-scheduler", "namespace": NS}, "spec": {"containers": [{"name": "kube-scheduler"}]}}
    return p.wait_started(POD, NS, before=None, swap_time=swap, manifest_doc=doc, manifest_changed=True,
                          manifest_dir=tmp_path, timeout=timeout)


def test_a_wait_confirms_the_kubelets_ready_and_says_so(fake_runtime: FakeRuntime, tmp_path: Path, apiserver: Any) -> None:
    apiserver.serve(POD, "hash-new", ready=True)
    p = Prover(Crictl(), node_name="cp-1", poll_interval=0.1, kubeconfig=apiserver.path, settle=0.2)
    out = _started(p, tmp_path, fake_runtime, 3.0)
    assert out.ok and out.details["ready_signal"] == "kubelet", out
    assert "the kubelet reports it Ready" in out.message


def test_a_mirror_pod_that_never_turns_ready_fails_the_wait(fake_runtime: FakeRuntime, tmp_path: Path, apiserver: Any) -> None:
    # our own probe checks pass, but the kubelet says not Ready: --wait must not claim it is
    apiserver.serve(POD, "hash-new", ready=False)
    p = Prover(Crictl(), node_name="cp-1", poll_interval=0.1, kubeconfig=apiserver.path, settle=0.2)
    out = _started(p, tmp_path, fake_runtime, 2.0)
    assert not out.ok and out.state == "not-ready", out
    assert "did not report it Ready" in out.message


def test_an_apiserver_that_does_not_answer_leaves_the_probes_as_the_signal_and_says_so(
    fake_runtime: FakeRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import staticpodd.proof.prover as prover_mod

    monkeypatch.setattr(prover_mod, "MIRROR_GRACE", 0.5)
    with socket.socket() as s:  # a port nobody listens on: a real unreachable apiserver
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump({"clusters": [{"name": "k", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                                  "users": [{"name": "u", "user": {}}],
                                  "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                                  "current-context": "c"}))
    p = Prover(Crictl(), node_name="cp-1", poll_interval=0.1, kubeconfig=kc, settle=0.2)
    out = _started(p, tmp_path, fake_runtime, 5.0)
    assert out.ok and out.details["ready_signal"] == "probes", out
    assert "could not be read" in out.message
