"""The Kubernetes API through the official ``kubernetes`` Python client (the ``cluster`` extra).

The one place (with :mod:`staticpodd.pin.cluster`, which builds on it) that imports the client,
and only when something talks to the API server: it costs about 0.2 s of imports, which no verb
that does not publish or read the cluster pays. Objects travel as plain JSON mappings
(``_preload_content=False``), exactly as the API server sends them, so the pure modules see what
``kubectl get -o json`` shows. Every call raises :class:`ClusterError` (never a client exception).
"""

from __future__ import annotations

import json
import time

from ..errors import StaticpodError

TYPE_CHECKING = False  # typing is for mypy only
if TYPE_CHECKING:
    from typing import Any

#: What the node authorizer says (plugin/pkg/auth/authorizer/node) when a node asks for an object
#: not related to it: for a mirror pod, the kubelet has deleted it. v1.37.2 says ``node: no
#: relationship found between node 'NAME' and this object`` (seen on a real control plane).
NODE_AUTHORIZER_NO_RELATIONSHIP = "no relationship found between node"


class ClusterError(StaticpodError):
    """The API server refused or could not be reached; ``status`` is the HTTP status (0: none)."""

    code = "cluster"

    def __init__(self, message: str, *, status: int = 0, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.status = status


def load_client() -> tuple[Any, Any]:
    """``(kubernetes.client, kubernetes.config)``. Raises StaticpodError (with the install hint)
    when the client is not installed."""
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        raise StaticpodError("the cluster view needs the official kubernetes Python client, which is not installed",
                             hint="pip install 'staticpodd[cluster]' (or the kubernetes package)") from None
    from kubernetes import client, config

    return client, config


def api_message(exc: Any) -> str:
    """The API server's own ``message`` from an ApiException (else its status and reason), as one
    line of valid UTF-8 (it may quote names others chose: it must not forge a line of output)."""
    from ..termsafe import one_line, printable_name

    body = getattr(exc, "body", None)
    if body:
        try:
            doc = json.loads(body)
            if isinstance(doc, dict) and doc.get("message"):
                return one_line(printable_name(str(doc["message"])[:500]))
        except (ValueError, RecursionError):
            pass
    return one_line(printable_name(f"{getattr(exc, 'status', '')} {getattr(exc, 'reason', '') or exc}".strip()))


class Api:
    """A CoreV1 connection made from ``kubeconfig`` (its current context). ``timeout``: seconds
    for connecting and for each answer. Raises ClusterError when the kubeconfig cannot be used."""

    def __init__(self, kubeconfig: str, *, timeout: float = 30.0) -> None:
        client, config = load_client()
        try:
            # no retries: urllib3 would otherwise try a GET that timed out 3 more times, holding
            # the caller 4 times ``timeout``; the outbox is what retries here, in its own time
            conf = type.__call__(client.Configuration)  # as the client does: not a copy of its default
            conf.retries = False
            api = config.new_client_from_config(config_file=kubeconfig, client_configuration=conf)
        except Exception as exc:  # noqa: BLE001 - the client raises ConfigException, OSError, yaml errors ...
            raise ClusterError(f"{kubeconfig}: cannot use this kubeconfig: {exc}") from None
        self.kubeconfig = kubeconfig
        self.timeout = timeout
        #: ``time.monotonic()`` after which no call is made (each call's timeout is cut to what is
        #: left): a verb waits at most ``cluster.timeout`` for the whole flush. None: no deadline.
        self.deadline: float | None = None
        self.client = client
        self.core = client.CoreV1Api(api)
        self.user = _kubeconfig_user(kubeconfig)

    def call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        """``fn(*args, **kw)`` as JSON (a mapping; {} for an empty answer). Raises ClusterError."""
        from kubernetes.client.exceptions import ApiException

        timeout = self.timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
            if timeout <= 0.01:
                raise ClusterError(f"{what}: no time left to ask the API server (cluster.timeout)")
        try:
            resp = fn(*args, _preload_content=False, _request_timeout=(timeout, timeout), **kw)
        except ApiException as exc:
            raise ClusterError(f"{what}: {api_message(exc)}", status=int(exc.status or 0)) from None
        except Exception as exc:  # noqa: BLE001 - urllib3: connection refused, timeouts, TLS ...
            raise ClusterError(f"{what}: cannot reach the API server: {_short(exc)}") from None
        data = resp.data
        try:
            return json.loads(data) if data else {}
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python recurses
            raise ClusterError(f"{what}: the API server answered something that is not JSON") from None

    def node(self, name: str) -> dict[str, Any] | None:
        """The Node, or None when there is no such node."""
        try:
            return dict(self.call(f"get node {name}", self.core.read_node, name))
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def nodes(self) -> list[dict[str, Any]]:
        """Every Node."""
        return list(self.call("list nodes", self.core.list_node).get("items") or [])

    def patch_node_annotations(self, name: str, annotations: dict[str, str | None]) -> dict[str, Any]:
        """Set (None: remove) annotations on Node ``name`` with one JSON merge patch; returns the Node."""
        body = {"metadata": {"annotations": annotations}}
        try:
            return dict(self.call(f"annotate node {name}", self.core.patch_node, name, body,
                                  _content_type="application/merge-patch+json"))
        except ClusterError as exc:
            if "_content_type" not in str(exc):
                raise
        # an older client (Debian 12's python3-kubernetes 22) has no _content_type: for a mapping
        # it sends a strategic merge patch, which treats annotations (a map) exactly the same
        return dict(self.call(f"annotate node {name}", self.core.patch_node, name, body))

    def create_event(self, event: dict[str, Any]) -> None:
        """Create a core/v1 Event. One that exists already (409: a retry after a lost answer)
        counts as created."""
        ns = event["metadata"]["namespace"]
        try:
            self.call(f"create event {event['metadata']['name']}", self.core.create_namespaced_event, ns, event)
        except ClusterError as exc:
            if exc.status != 409:
                raise

    def pod(self, name: str, namespace: str) -> dict[str, Any] | None:
        """The Pod, or None when there is none (404)."""
        try:
            return dict(self.call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace))
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise


def _short(exc: BaseException) -> str:
    """A one-line reason from urllib3's nested errors (``MaxRetryError(... NewConnectionError(...
    Connection refused))`` reads ``connection refused``)."""
    text = str(exc)
    for marker, say in (("Connection refused", "connection refused"), ("timed out", "timed out"),
                        ("Name or service not known", "host name not known"),
                        ("No route to host", "no route to host"),
                        ("CERTIFICATE_VERIFY_FAILED", "TLS: certificate not trusted")):
        if marker in text:
            return say
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _kubeconfig_user(path: str) -> str | None:
    """The user name of ``path``'s current context (``system:node:NAME`` in a kubeadm
    ``kubelet.conf``), or None."""
    try:
        from ..manifest.yamlsafe import safe_load

        with open(path, encoding="utf-8") as fh:
            kc = safe_load(fh.read()) or {}
        current = kc.get("current-context")
        for c in kc.get("contexts") or []:
            if isinstance(c, dict) and c.get("name") == current and isinstance(c.get("context"), dict):
                user = c["context"].get("user")
                return str(user) if user else None
    except Exception:  # noqa: BLE001 - only a hint for the node name
        return None
    return None


def node_name_from_user(user: str | None) -> str | None:
    """``NAME`` of a node identity ``system:node:NAME`` (the kubelet's credentials), else None."""
    if user and user.startswith("system:node:") and len(user) > len("system:node:"):
        return user[len("system:node:"):]
    return None
