"""Stand-ins and servers for the proof tests: a stand-in ``crictl`` and real probe servers on 127.0.0.1.

A real kubelet and containerd do run in tests/e2e (tests/e2e proves park/unpark/apply
--wait against them); this stand-in stays for what a real runtime cannot show on demand: a
crictl that hangs or fails, odd or older JSON shapes, a crash-looping container on cue, clocks
and timeouts of a second. ``crictl`` is a small Python script written into
``tmp_path/bin`` and put first on PATH. It answers ``pods -o json``, ``ps [-a] -o json``,
``inspectp -o json ID`` and ``exec --sync`` from a JSON state file the test drives: a timeline
of phases ``{"at": seconds after the timeline was written, "sandboxes": [...], "containers":
[...]}`` (optionally ``"fail": "stderr text"`` to exit 1, ``"hang": seconds`` to hang, ``"exec":
{container_id: exit_status}``, ``"when_changed": [path, sha256]`` to apply only once that file's
bytes differ or it is gone: the stand-in "kubelet" reacting to the manifest directory, and
``createdAt: "@activated"``: the time that phase was first seen). The JSON it prints has the shapes real crictl prints (protojson,
lowerCamelCase, int64 as strings; kubernetes-sigs/cri-tools cmd/crictl). Every call's argv is
appended to a log file so tests can assert on options (``--runtime-endpoint``).
Probe targets are real HTTP, HTTPS (a self-signed certificate made here) and TCP servers.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

#: ../shared/corpus (read-only; tests copy from it into tmp_path), or $STATICPODD_CORPUS.
CORPUS = Path(os.environ.get("STATICPODD_CORPUS") or Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus")

FAKE_CRICTL = r"""#!__PYTHON__
import json, os, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_CRICTL_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
while args and args[0].startswith("-"):
    if "=" in args[0] or args[0] in ("--debug", "-D"):
        args = args[1:]
    else:
        args = args[2:]
with open(os.environ["FAKE_CRICTL_STATE"]) as f:
    state = json.load(f)
t = time.time() - state["t0"]


def changed(cond):
    import hashlib
    path, digest = cond
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest() != digest
    except FileNotFoundError:
        return True


phase, index = state["phases"][0], 0
for i, p in enumerate(state["phases"]):
    if p["at"] <= t and ("when_changed" not in p or changed(p["when_changed"])):
        phase, index = p, i
if any(x.get("createdAt") == "@activated" for x in phase.get("sandboxes", []) + phase.get("containers", [])):
    marks_path = os.environ["FAKE_CRICTL_STATE"] + ".activated"
    marks = {}
    if os.path.exists(marks_path):
        with open(marks_path) as f:
            marks = json.load(f)
    if marks.get("t0") != state["t0"]:
        marks = {"t0": state["t0"]}
    if str(index) not in marks:
        marks[str(index)] = time.time_ns()
        with open(marks_path, "w") as f:
            json.dump(marks, f)
    for x in phase.get("sandboxes", []) + phase.get("containers", []):
        if x.get("createdAt") == "@activated":
            x["createdAt"] = str(marks[str(index)])
if phase.get("hang"):
    time.sleep(phase["hang"])
if phase.get("fail"):
    sys.stderr.write(phase["fail"] + "\n")
    sys.exit(1)
cmd, rest = (args[0], args[1:]) if args else ("", [])
sandboxes = phase.get("sandboxes", [])
containers = phase.get("containers", [])
if cmd == "pods":
    print(json.dumps({"items": sandboxes}, indent=2))
elif cmd == "ps":
    if "-a" not in rest and "--all" not in rest:
        containers = [c for c in containers if c["state"] == "CONTAINER_RUNNING"]
    print(json.dumps({"containers": containers}, indent=2))
elif cmd == "inspectp":
    ids = [a for a in rest if not a.startswith("-") and a not in ("json", "yaml")]
    out = []
    for sid in ids:
        for s in sandboxes:
            if s["id"].startswith(sid):
                st = dict(s)
                st["createdAt"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(s["createdAt"]) / 1e9))
                st["network"] = {"additionalIps": [], "ip": s.get("_ip", "")}
                st.pop("_ip", None)
                out.append({"info": {}, "status": st})
                break
        else:
            sys.stderr.write("rpc error: code = NotFound desc = an error occurred when try to find sandbox\n")
            sys.exit(1)
    print(json.dumps(out[0] if len(out) == 1 else out, indent=2))
elif cmd == "exec":
    i = 0
    while rest[i].startswith("-"):
        i += 2 if rest[i] in ("--timeout", "-t") else 1
    cid = rest[i]
    sys.exit(int(phase.get("exec", {}).get(cid, 0)))
else:
    sys.stderr.write("unknown command %r\n" % cmd)
    sys.exit(1)
"""


def ns_at(wall: float) -> str:
    """protojson int64 nanoseconds, as crictl prints them."""
    return str(int(wall * 1_000_000_000))


def sandbox(
    sid: str, pod: str, ns: str, config_hash: str, *, ready: bool = True, created: float | None = None, ip: str = ""
) -> dict[str, Any]:
    """One ``crictl pods -o json`` item as the kubelet creates it for a static pod."""
    return {
        "id": sid,
        "metadata": {"name": pod, "uid": config_hash, "namespace": ns, "attempt": 0},
        "state": "SANDBOX_READY" if ready else "SANDBOX_NOTREADY",
        "createdAt": ns_at(created if created is not None else time.time() - 3600),
        "labels": {
            "io.kubernetes.pod.name": pod,
            "io.kubernetes.pod.namespace": ns,
            "io.kubernetes.pod.uid": config_hash,
            "tier": "control-plane",
        },
        "annotations": {
            "kubernetes.io/config.hash": config_hash,
            "kubernetes.io/config.seen": "2026-11-29T18:00:00.000000000Z",
            "kubernetes.io/config.source": "file",
        },
        "runtimeHandler": "",
        "_ip": ip,
    }


def container(
    cid: str,
    sb: dict[str, Any],
    name: str,
    *,
    state: str = "CONTAINER_RUNNING",
    created: float | None = None,
    attempt: int = 0,
) -> dict[str, Any]:
    """One ``crictl ps -o json`` item belonging to sandbox ``sb``."""
    return {
        "id": cid,
        "podSandboxId": sb["id"],
        "metadata": {"name": name, "attempt": attempt},
        "image": {"image": "sha256:0123", "annotations": {}, "userSpecifiedImage": "", "runtimeHandler": ""},
        "imageRef": "sha256:0123",
        "state": state,
        "createdAt": ns_at(created if created is not None else time.time() - 3600),
        "labels": {
            "io.kubernetes.container.name": name,
            "io.kubernetes.pod.name": sb["metadata"]["name"],
            "io.kubernetes.pod.namespace": sb["metadata"]["namespace"],
            "io.kubernetes.pod.uid": sb["metadata"]["uid"],
        },
        "annotations": {"io.kubernetes.container.restartCount": str(attempt)},
    }


class FakeRuntime:
    """Drives the stand-in crictl. ``set(*phases)``: each phase is (at_seconds, sandboxes,
    containers) or a dict with extra keys (fail, hang, exec). The clock starts at ``set``."""

    def __init__(self, bindir: Path, state: Path, log: Path) -> None:
        self.bindir = bindir
        self.state = state
        self.log = log
        self.exe = bindir / "crictl"

    def set(self, *phases: Any) -> None:
        out = []
        for p in phases:
            if isinstance(p, dict):
                out.append(p)
            else:
                at, sbs, conts = p
                out.append({"at": at, "sandboxes": sbs, "containers": conts})
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps({"t0": time.time(), "phases": out}))
        os.replace(tmp, self.state)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


@pytest.fixture
def fake_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRuntime:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "crictl"
    exe.write_text(FAKE_CRICTL.replace("__PYTHON__", sys.executable))
    exe.chmod(0o755)
    state = tmp_path / "crictl-state.json"
    log = tmp_path / "crictl-calls.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CRICTL_STATE", str(state))
    monkeypatch.setenv("FAKE_CRICTL_LOG", str(log))
    rt = FakeRuntime(bindir, state, log)
    rt.set((0, [], []))
    return rt


# --- probe servers -----------------------------------------------------------------------------


class ProbeServer:
    """A real HTTP(S) server on 127.0.0.1. ``statuses``: codes answered in order, the last one
    repeated. ``requests``: (path, headers) of each request received."""

    def __init__(self, statuses: list[int], tls: ssl.SSLContext | None = None) -> None:
        self.statuses = list(statuses)
        self.requests: list[tuple[str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                code = outer.statuses.pop(0) if len(outer.statuses) > 1 else outer.statuses[0]
                body = b"ok" if code < 400 else b"not yet"
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http_server() -> Iterator[Any]:
    servers: list[ProbeServer] = []

    def make(statuses: list[int]) -> ProbeServer:
        s = ProbeServer(statuses)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1/localhost (also its own CA) and its key."""
    cert, key = tmp / "tls.crt", tmp / "tls.key"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if not shutil.which("openssl"):
            pytest.skip("neither the cryptography package nor the openssl CLI is available")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=kube-scheduler",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-addext", "basicConstraints=critical,CA:TRUE"],
            check=True, capture_output=True,
        )  # fmt: skip
        return cert, key
    k = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-scheduler")])
    now = datetime.datetime.now(datetime.timezone.utc)
    c = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(k.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(k.public_key()), critical=False)
        .sign(k, hashes.SHA256())
    )
    cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert, key


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[Any]:
    cert, key = self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    servers: list[ProbeServer] = []

    def make(statuses: list[int]) -> ProbeServer:
        s = ProbeServer(statuses, tls=ctx)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


@pytest.fixture
def tcp_port() -> Iterator[int]:
    """A real listening TCP socket on 127.0.0.1 (connections complete in the kernel backlog)."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.listen(16)
    yield srv.getsockname()[1]
    srv.close()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
