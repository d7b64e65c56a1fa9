"""A stand-in Kubernetes API server for the cluster view's in-process tests (plain HTTP on
127.0.0.1): it keeps Nodes and Events in memory and answers the calls staticpodd makes (get, list
and merge-patch Nodes; create Events; get Pods). It is a stand-in only so that the fast tier runs
without Go: the real API server, its node authorizer and NodeRestriction are met in
tests/controlplane/test_cp_cluster_view.py.

``down = True`` makes it refuse every call with 503; ``forbid = {"patch-node"}`` answers 403 to
that call, as RBAC would; ``invalid = {"create-event"}`` answers 422, as validation would.
"""

from __future__ import annotations

import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml


class FakeApiServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``kubeconfig(path)`` writes one for it."""

    def __init__(self, nodes: tuple[str, ...] = ("node-1",)) -> None:
        self.nodes: dict[str, dict[str, Any]] = {
            n: {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n, "uid": str(uuid.uuid4()), "annotations": {}}} for n in nodes}
        self.events: list[dict[str, Any]] = []
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.down = False
        self.forbid: set[str] = set()
        self.invalid: set[str] = set()
        self.forbid_message: str | None = None  # what a 403 for patch-node says instead
        self.raw_node_list: bytes | None = None  # the bytes a list of Nodes answers instead
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def kubeconfig(self, path: Path, user: str = "system:node:node-1") -> Path:
        """Write a kubeconfig for this server (user name ``user``, a bearer token), mode 0600."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": user, "user": {"token": "t0ken"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": user}}],
            "current-context": "fake"}))
        path.chmod(0o600)
        return path

    def annotations(self, node: str = "node-1") -> dict[str, str]:
        return dict(self.nodes[node]["metadata"].get("annotations") or {})

    def reasons(self) -> list[str]:
        return [e["reason"] for e in self.events]

    def start(self) -> FakeApiServer:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, message: str) -> None:
                self._send(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                                  "message": message})

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def _route(self, method: str) -> None:
                path = self.path.split("?")[0]
                api.calls.append((method, path))
                if api.down:
                    return self._status(503, "the stand-in API server is down")
                parts = path.strip("/").split("/")
                if parts[:3] == ["api", "v1", "nodes"]:
                    if len(parts) == 3 and method == "GET" and api.raw_node_list is not None:
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(api.raw_node_list)))
                        self.end_headers()
                        self.wfile.write(api.raw_node_list)
                        return None
                    if len(parts) == 3 and method == "GET":
                        return self._send(200, {"kind": "NodeList", "items": list(api.nodes.values())})
                    node = api.nodes.get(parts[3]) if len(parts) > 3 else None
                    if node is None:
                        return self._status(404, f'nodes "{parts[3] if len(parts) > 3 else ""}" not found')
                    if method == "GET":
                        return self._send(200, node)
                    if method == "PATCH":
                        if "patch-node" in api.forbid:
                            return self._status(403, api.forbid_message or f'nodes "{parts[3]}" is forbidden: not allowed')
                        # a JSON merge patch; clients older than 25 send a strategic merge patch,
                        # which treats a map the same
                        assert self.headers.get("Content-Type") in ("application/merge-patch+json",
                                                                    "application/strategic-merge-patch+json")
                        ann = self._body()["metadata"]["annotations"]
                        have = node["metadata"].setdefault("annotations", {})
                        for k, v in ann.items():
                            if v is None:
                                have.pop(k, None)
                            else:
                                have[k] = v
                        return self._send(200, node)
                if parts[:4] == ["api", "v1", "namespaces", "default"] and parts[4:5] == ["events"] and method == "POST":
                    if "create-event" in api.forbid:
                        return self._status(403, "events is forbidden")
                    if "create-event" in api.invalid:
                        return self._status(422, "Event is invalid: metadata.name: Invalid value")
                    ev = self._body()
                    if any(e["metadata"]["name"] == ev["metadata"]["name"] for e in api.events):
                        return self._status(409, "already exists")
                    api.events.append(ev)
                    return self._send(201, ev)
                if parts[:3] == ["api", "v1", "namespaces"] and len(parts) == 6 and parts[4] == "pods":
                    pod = api.pods.get((parts[3], parts[5]))
                    return self._send(200, pod) if pod else self._status(404, "not found")
                return self._status(404, f"the stand-in does not serve {method} {path}")

            def do_GET(self) -> None:  # noqa: N802
                self._route("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._route("POST")

            def do_PATCH(self) -> None:  # noqa: N802
                self._route("PATCH")

            def log_message(self, *args: Any) -> None:
                return None

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()


class SilentApiServer:
    """An API server that accepts every TCP connection and never answers (a hung kube-apiserver,
    a black-holing load balancer). ``accepted``: connections made to it so far."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._conns: list[socket.socket] = []
        self.accepted = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    kubeconfig = FakeApiServer.kubeconfig

    def start(self) -> SilentApiServer:
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)

        def accept() -> None:
            while True:
                try:
                    conn, _addr = self._sock.accept()
                except OSError:
                    return
                self._conns.append(conn)  # kept open, never read nor answered
                self.accepted += 1

        threading.Thread(target=accept, daemon=True).start()
        return self

    def stop(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        self._sock.close()
        for conn in self._conns:
            conn.close()
