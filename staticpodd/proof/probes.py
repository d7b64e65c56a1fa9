"""Run a manifest's own startup/readiness/liveness probes from the node, as the kubelet would.

Semantics follow the kubelet's prober (kubernetes ``pkg/probe/http``, ``pkg/probe/tcp``,
``pkg/kubelet/prober``):

- httpGet: ``scheme`` (HTTP|HTTPS, default HTTP), ``host``, ``port`` (number or a named container
  port), ``path`` (a missing leading ``/`` is added, a query string is kept), ``httpHeaders``
  (a ``Host`` header overrides the request's Host). Success: status 200-399. HTTPS certificates are
  **not** verified (the kubelet does not verify them either). Redirects are not followed and a
  3xx counts as success (the kubelet follows up to 10 redirects to the same host and judges the
  last answer; a redirect elsewhere is a success with a warning). No HTTP proxy is used.
- tcpSocket: success when a TCP connection opens within ``timeoutSeconds``.
- exec: run through ``crictl exec --sync`` in the container (the kubelet uses CRI ExecSync too).
- grpc: not run from here; reported as ``skipped`` (it counts as passing, and says so).
- Defaults: periodSeconds 10, timeoutSeconds 1, successThreshold 1, failureThreshold 3,
  initialDelaySeconds 0. Numbers are read as floats (the API demands integers; fractions only
  make the tests fast).

Host when the probe names none: the kubelet uses the pod IP. For a ``hostNetwork`` pod that is
the node's own address, and from the node ``127.0.0.1`` reaches it unless the component binds
only to one non-loopback address (then the manifest sets ``host:``, as kubeadm does for the
apiserver). For other pods the sandbox IP from ``crictl inspectp`` is used, else 127.0.0.1.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Callable, Mapping, Sequence

from ..errors import StaticpodError
from ..record import FrozenRecord, Record

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

USER_AGENT = "kube-probe/staticpodd"
PROBE_KINDS = ("startupProbe", "readinessProbe", "livenessProbe")


class ProbeSpec(FrozenRecord):
    """One probe of one container, with the kubelet's defaults filled in (seconds)."""

    container: Final[str]
    kind: Final[str]  # startupProbe | readinessProbe | livenessProbe
    handler: Final[str]  # httpGet | tcpSocket | exec | grpc | none
    scheme: Final[str]
    host: Final[str | None]
    port: Final[int | None]
    path: Final[str]
    headers: Final[tuple[tuple[str, str], ...]]
    command: Final[tuple[str, ...]]
    period: Final[float]
    timeout: Final[float]
    success_threshold: Final[int]
    failure_threshold: Final[int]
    initial_delay: Final[float]
    error: Final[str | None]  # why the spec cannot be run (bad port name, ...)

    def __init__(self, container: str, kind: str, handler: str, scheme: str = "HTTP", host: str | None = None,
                 port: int | None = None, path: str = "/", headers: tuple[tuple[str, str], ...] = (),
                 command: tuple[str, ...] = (), period: float = 10.0, timeout: float = 1.0, success_threshold: int = 1,
                 failure_threshold: int = 3, initial_delay: float = 0.0, error: str | None = None) -> None:
        self.container = container
        self.kind = kind
        self.handler = handler
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.headers = headers
        self.command = command
        self.period = period
        self.timeout = timeout
        self.success_threshold = success_threshold
        self.failure_threshold = failure_threshold
        self.initial_delay = initial_delay
        self.error = error

    def describe(self, host: str) -> str:
        """``readinessProbe of kube-apiserver: GET https://127.0.0.1:6443/readyz``"""
        where = f"{self.kind} of {self.container}"
        if self.handler == "httpGet":
            return f"{where}: GET {self.scheme.lower()}://{self.host or host}:{self.port}{self.path}"
        if self.handler == "tcpSocket":
            return f"{where}: TCP {self.host or host}:{self.port}"
        if self.handler == "exec":
            return f"{where}: exec {' '.join(self.command)[:60]}"
        return f"{where}: {self.handler}"


def _num(value: Any, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _resolve_port(value: Any, container: Mapping[str, Any]) -> tuple[int | None, str | None]:
    if isinstance(value, bool):
        return None, f"port {value!r} is not a number or a port name"
    if isinstance(value, int):
        return value, None
    if isinstance(value, str):
        if value.isdigit():
            return int(value), None
        for p in container.get("ports") or []:
            if isinstance(p, Mapping) and p.get("name") == value and isinstance(p.get("containerPort"), int):
                return int(p["containerPort"]), None
        return None, f"named port {value!r} is not among the container's ports"
    return None, f"port {value!r} is not a number or a port name"


def probe_specs(manifest_doc: Mapping[str, Any]) -> list[ProbeSpec]:
    """Every startup/readiness/liveness probe of ``spec.containers`` (init containers have none).

    Never raises: an unusable probe comes back with ``error`` set.
    """
    spec = manifest_doc.get("spec") or {}
    out: list[ProbeSpec] = []
    for c in spec.get("containers") or []:
        if not isinstance(c, Mapping):
            continue
        cname = str(c.get("name", ""))
        for kind in PROBE_KINDS:
            p = c.get(kind)
            if not isinstance(p, Mapping):
                continue
            common: dict[str, Any] = {
                "container": cname,
                "kind": kind,
                "period": _num(p.get("periodSeconds"), 10.0),
                "timeout": _num(p.get("timeoutSeconds"), 1.0),
                "success_threshold": max(1, int(_num(p.get("successThreshold"), 1))),
                "failure_threshold": max(1, int(_num(p.get("failureThreshold"), 3))),
                "initial_delay": _num(p.get("initialDelaySeconds"), 0.0),
            }
            if isinstance(p.get("httpGet"), Mapping):
                h = p["httpGet"]
                port, err = _resolve_port(h.get("port"), c)
                path = str(h.get("path") or "/")
                if not path.startswith("/"):
                    path = "/" + path
                headers = tuple(
                    (str(x.get("name")), str(x.get("value", "")))
                    for x in h.get("httpHeaders") or []
                    if isinstance(x, Mapping) and x.get("name")
                )
                out.append(
                    ProbeSpec(
                        handler="httpGet",
                        scheme=str(h.get("scheme") or "HTTP").upper(),
                        host=str(h["host"]) if h.get("host") else None,
                        port=port,
                        path=path,
                        headers=headers,
                        error=err,
                        **common,
                    )
                )
            elif isinstance(p.get("tcpSocket"), Mapping):
                t = p["tcpSocket"]
                port, err = _resolve_port(t.get("port"), c)
                out.append(
                    ProbeSpec(
                        handler="tcpSocket",
                        host=str(t["host"]) if t.get("host") else None,
                        port=port,
                        error=err,
                        **common,
                    )
                )
            elif isinstance(p.get("exec"), Mapping):
                cmd = tuple(str(x) for x in p["exec"].get("command") or [])
                out.append(ProbeSpec(handler="exec", command=cmd, **common))
            elif isinstance(p.get("grpc"), Mapping):
                out.append(ProbeSpec(handler="grpc", **common))
            else:
                out.append(ProbeSpec(handler="none", error="the probe has no handler", **common))
    return out


class ProbeResult(FrozenRecord):
    """``ok``: passed; ``skipped``: not run from the node (grpc); ``message``: what was seen."""

    ok: Final[bool]
    message: Final[str]
    skipped: Final[bool]

    def __init__(self, ok: bool, message: str, skipped: bool = False) -> None:
        self.ok = ok
        self.message = message
        self.skipped = skipped


def run_http(spec: ProbeSpec, host: str) -> ProbeResult:
    """One httpGet probe. Success is a status in 200..399."""
    target = spec.host or host
    conn: http.client.HTTPConnection
    if spec.scheme == "HTTPS":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the kubelet's prober does not verify certificates
        conn = http.client.HTTPSConnection(target, spec.port, timeout=spec.timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(target, spec.port, timeout=spec.timeout)
    headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
    skip_host = False
    for name, value in spec.headers:
        if name.lower() == "host":
            skip_host = True
        headers[name] = value
    try:
        conn.putrequest("GET", spec.path, skip_host=skip_host, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        resp = conn.getresponse()
        resp.read(10 * 1024)
        code = resp.status
    except (OSError, http.client.HTTPException) as exc:
        return ProbeResult(False, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    finally:
        conn.close()
    if 200 <= code < 400:
        return ProbeResult(True, f"HTTP {code}")
    return ProbeResult(False, f"HTTP {code}")


def run_tcp(spec: ProbeSpec, host: str) -> ProbeResult:
    """One tcpSocket probe: can a connection be opened within the probe's timeout?"""
    try:
        with socket.create_connection((spec.host or host, spec.port or 0), timeout=spec.timeout):
            return ProbeResult(True, "connected")
    except OSError as exc:
        return ProbeResult(False, f"{type(exc).__name__}: {exc}")


class ProbeTracker(Record):
    """The kubelet's counting for one probe: consecutive successes/failures, next due time."""

    spec: ProbeSpec
    next_due: float  # monotonic seconds
    successes: int
    failures: int
    runs: int
    passed_once: bool
    last: ProbeResult | None
    history: list[str]

    def __init__(self, spec: ProbeSpec, next_due: float, successes: int = 0, failures: int = 0, runs: int = 0,
                 passed_once: bool = False, last: ProbeResult | None = None, history: list[str] | None = None) -> None:
        self.spec = spec
        self.next_due = next_due
        self.successes = successes
        self.failures = failures
        self.runs = runs
        self.passed_once = passed_once
        self.last = last
        self.history = [] if history is None else history

    def record(self, result: ProbeResult, now: float) -> None:
        self.runs += 1
        self.last = result
        if result.ok:
            self.successes += 1
            self.failures = 0
            self.passed_once = True
        else:
            self.failures += 1
            self.successes = 0
        self.history.append(("ok" if result.ok else "fail") + ": " + result.message)
        del self.history[:-5]
        self.next_due = now + self.spec.period

    @property
    def succeeded(self) -> bool:
        """Reached successThreshold consecutive successes (startup: one success)."""
        need = 1 if self.spec.kind != "readinessProbe" else self.spec.success_threshold
        return self.successes >= need

    @property
    def failed(self) -> bool:
        """Reached failureThreshold consecutive failures."""
        return self.failures >= self.spec.failure_threshold

    def to_dict(self, host: str) -> dict[str, Any]:
        return {
            "container": self.spec.container,
            "kind": self.spec.kind,
            "handler": self.spec.handler,
            "target": self.spec.describe(host),
            "runs": self.runs,
            "consecutive_successes": self.successes,
            "consecutive_failures": self.failures,
            "success_threshold": self.spec.success_threshold,
            "failure_threshold": self.spec.failure_threshold,
            "last": None if self.last is None else self.last.message,
            "recent": list(self.history),
        }


ExecRunner = Callable[[str, Sequence[str], float], "tuple[int, str]"]


def run_probe(spec: ProbeSpec, host: str, *, container_id: str | None, exec_runner: ExecRunner | None) -> ProbeResult:
    """Run one probe once. Never raises."""
    if spec.error:
        return ProbeResult(False, spec.error)
    if spec.handler == "httpGet":
        return run_http(spec, host)
    if spec.handler == "tcpSocket":
        return run_tcp(spec, host)
    if spec.handler == "exec":
        if exec_runner is None or not container_id:
            return ProbeResult(True, "exec probe not run (no container id)", skipped=True)
        try:
            rc, line = exec_runner(container_id, spec.command, spec.timeout)
        except (StaticpodError, OSError) as exc:  # crictl gone mid-wait: a failed run
            return ProbeResult(False, f"exec: {exc}")
        return ProbeResult(rc == 0, f"exit status {rc}" + (f": {line}" if line else ""))
    if spec.handler == "grpc":
        return ProbeResult(True, "grpc probe not run from the node", skipped=True)
    return ProbeResult(False, spec.error or "no handler")
