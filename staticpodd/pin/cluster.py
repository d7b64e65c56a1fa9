"""The API calls of ``staticpodctl pin``, through the official ``kubernetes`` Python client.

Imported only when ``pin`` runs (the client costs about a second of imports): install it with the
``cluster`` extra (``pip install staticpodd[cluster]``). Objects travel as plain JSON mappings
(``_preload_content=False``), exactly as the API server sends them, so the pure modules
(:mod:`staticpodd.pin.strip`, :mod:`staticpodd.pin.checks`) see what ``kubectl get -o yaml`` shows.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..cluster.client import ClusterError, api_message, load_client

__all__ = ["Cluster", "ClusterError", "api_message"]


class Cluster:
    """A CoreV1 connection made from a kubeconfig file. Every method raises ClusterError."""

    def __init__(self, kubeconfig: str) -> None:
        client, config = load_client()
        try:
            # no retries: urllib3 would try a GET that timed out 3 more times (4 x 30 s before a
            # silent API server is reported); pin says what failed and the operator runs it again
            conf = type.__call__(client.Configuration)
            conf.retries = False
            api = config.new_client_from_config(config_file=kubeconfig, client_configuration=conf)
        except Exception as exc:  # the client raises ConfigException, OSError, yaml errors ...
            raise ClusterError(f"{kubeconfig}: cannot use this kubeconfig: {exc}",
                               hint="pass the admin kubeconfig with --kubeconfig") from None
        self._client = client
        self.core = client.CoreV1Api(api)

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = fn(*args, _preload_content=False, _request_timeout=30, **kw)
        except ApiException as exc:
            raise ClusterError(f"{what}: {api_message(exc)}", status=int(exc.status or 0)) from None
        except Exception as exc:  # urllib3: connection refused, TLS ...
            raise ClusterError(f"{what}: cannot reach the API server: {exc}") from None
        data = resp.data
        return json.loads(data) if data else {}

    def pod(self, name: str, namespace: str) -> dict[str, Any] | None:
        """The pod as the API server returns it, or None when it does not exist."""
        try:
            return dict(self._call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace))
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def node(self, name: str) -> dict[str, Any] | None:
        """The Node, or None when there is no such node."""
        try:
            return dict(self._call(f"get node {name}", self.core.read_node, name))
        except ClusterError as exc:
            if exc.status == 404:
                return None
            raise

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """Every pod bound to ``node``, all namespaces."""
        doc = self._call(f"list pods on node {node}", self.core.list_pod_for_all_namespaces,
                         field_selector=f"spec.nodeName={node}")
        return list(doc.get("items") or [])

    def delete(self, name: str, namespace: str, uid: str, resource_version: str | None = None) -> None:
        """Delete the pod with this ``uid`` and ``resource_version`` only (preconditions: never a pod
        created or changed meanwhile, e.g. bound by a scheduler; the API server answers 409)."""
        pre = self._client.V1Preconditions(uid=uid, resource_version=resource_version)
        body = self._client.V1DeleteOptions(preconditions=pre)
        self._call(f"delete pod {namespace}/{name}", self.core.delete_namespaced_pod, name, namespace, body=body)

    def wait_gone(self, name: str, namespace: str, uid: str, timeout: float) -> bool:
        """True once no pod ``namespace/name`` with ``uid`` exists (another uid counts as gone)."""
        end = time.monotonic() + timeout
        while True:
            pod = self.pod(name, namespace)
            if pod is None or (pod.get("metadata") or {}).get("uid") != uid:
                return True
            if time.monotonic() > end:
                return False
            time.sleep(0.2)

    def create(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Create ``pod`` (a mapping); returns the created object."""
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        name = (pod.get("metadata") or {}).get("name")
        return dict(self._call(f"create pod {ns}/{name}", self.core.create_namespaced_pod, ns, pod))
