"""Optional: ask the apiserver for the mirror pod's ``config.hash`` (never required).

The kubelet publishes a mirror pod for each static pod, with the annotations
``kubernetes.io/config.hash`` and ``kubernetes.io/config.mirror`` (both the pod UID; docs/kubelet-contract.md
"Identity and restarts"); kubeadm upgrade waits for that hash. Here it is only extra evidence in
``Outcome.details["mirror_pod"]``: the apiserver may be the very thing being changed, so its
answer never decides a wait. Credentials come from a kubeconfig (e.g. the kubelet's own
``/etc/kubernetes/kubelet.conf``): client certificate/key (files or ``-data``), bearer token
(``token``/``tokenFile``), CA (file or ``-data``) or ``insecure-skip-tls-verify``.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from .runtime import CONFIG_HASH

CONFIG_MIRROR = "kubernetes.io/config.mirror"
#: What the node authorizer says (plugin/pkg/auth/authorizer/node) when a node asks for a pod
#: that is not bound to it: for a mirror pod, the kubelet has deleted it. v1.37.2 says
#: ``node: no relationship found between node 'NAME' and this object`` (seen on a real control plane).
NODE_AUTHORIZER_NO_RELATIONSHIP = "no relationship found between node"


def _named(items: Any, name: Any, key: str) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, Mapping) and item.get("name") == name and isinstance(item.get(key), Mapping):
            return dict(item[key])
    return {}


def _ssl_context(kubeconfig: Path, cluster: Mapping[str, Any], user: Mapping[str, Any]) -> ssl.SSLContext:
    base = kubeconfig.parent

    def path(value: Any) -> str:
        p = Path(str(value))
        return str(p if p.is_absolute() else base / p)

    if cluster.get("insecure-skip-tls-verify"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        ctx = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    elif cluster.get("certificate-authority"):
        ctx = ssl.create_default_context(cafile=path(cluster["certificate-authority"]))
    else:
        ctx = ssl.create_default_context()
    cert, key = user.get("client-certificate"), user.get("client-key")
    cert_data, key_data = user.get("client-certificate-data"), user.get("client-key-data")
    if cert_data:
        with tempfile.TemporaryDirectory(prefix="staticpodd-kc-") as tmp:  # 0700; removed at once
            cf = os.path.join(tmp, "c.pem")
            with open(os.open(cf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
                fh.write(base64.b64decode(cert_data))
                if key_data:
                    fh.write(b"\n" + base64.b64decode(key_data))
            ctx.load_cert_chain(cf, path(key) if key and not key_data else None)
    elif cert:
        ctx.load_cert_chain(path(cert), path(key) if key else None)
    return ctx


def mirror_pod_hash(kubeconfig: Path, pod_name: str, namespace: str, *, timeout: float = 2.0) -> dict[str, Any]:
    """GET the mirror pod through ``kubeconfig``'s current context.

    Returns ``{"found": bool, "config_hash": str | None, "mirror": bool, "ready": bool | None}``
    (``ready``: the kubelet's Ready condition on the mirror pod, None when it reports none) or
    ``{"error": str}`` (unreadable kubeconfig, apiserver unreachable, 401, a 403 other than the
    one below...). Never raises.

    With the kubelet's own credentials (``kubelet.conf``, user ``system:node:<node>``) the node
    authorizer answers 403, not 404, for a pod that is not bound to this node: a mirror pod the
    kubelet has deleted reads as forbidden (seen on a real kubeadm v1.37.2 control plane: "node:
    no relationship found between node 'NAME' and this object"). That answer means the pod is
    gone: ``{"found": False, ..., "via": "node-authorizer"}``.
    """
    try:
        from ..yamlsafe import safe_load

        kc = safe_load(kubeconfig.read_text(encoding="utf-8")) or {}
        ctx_name = kc.get("current-context")
        context = _named(kc.get("contexts"), ctx_name, "context")
        if not context and len(kc.get("contexts") or []) == 1:
            context = dict(kc["contexts"][0].get("context") or {})
        cluster = _named(kc.get("clusters"), context.get("cluster"), "cluster")
        user = _named(kc.get("users"), context.get("user"), "user")
        url = urlsplit(str(cluster.get("server") or ""))
        if url.scheme not in ("https", "http") or not url.hostname:
            return {"error": f"{kubeconfig}: no usable server in the current context"}
        headers = {"Accept": "application/json", "User-Agent": "staticpodd-proof"}
        token = user.get("token")
        if not token and user.get("tokenFile"):
            token = Path(str(user["tokenFile"])).read_text(encoding="utf-8").strip()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn: http.client.HTTPConnection
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(
                url.hostname, url.port or 443, timeout=timeout, context=_ssl_context(kubeconfig, cluster, user)
            )
        else:
            conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)
        prefix = url.path.rstrip("/")
        try:
            conn.request(
                "GET", f"{prefix}/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod_name)}", headers=headers
            )
            resp = conn.getresponse()
            body = resp.read(1024 * 1024)
        finally:
            conn.close()
    except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - a bad kubeconfig must never break a wait
        return {"error": f"{kubeconfig}: {type(exc).__name__}: {exc}"}
    if resp.status == 404:
        return {"found": False, "config_hash": None, "mirror": False, "ready": None}
    if resp.status == 403 and NODE_AUTHORIZER_NO_RELATIONSHIP in body.decode("utf-8", "replace"):
        return {"found": False, "config_hash": None, "mirror": False, "ready": None, "via": "node-authorizer"}
    if resp.status != 200:
        return {"error": f"apiserver answered HTTP {resp.status}{_status_message(body)}"}
    try:
        pod = json.loads(body)
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        conds = (pod.get("status") or {}).get("conditions") or []
        ready = next((c.get("status") == "True" for c in conds if isinstance(c, dict) and c.get("type") == "Ready"),
                     None)
    except (ValueError, AttributeError):
        return {"error": "apiserver answered something that is not a Pod"}
    return {"found": True, "config_hash": ann.get(CONFIG_HASH), "mirror": CONFIG_MIRROR in ann, "ready": ready}


def _status_message(body: bytes) -> str:
    """``: <message>`` of a Kubernetes Status body, or nothing."""
    try:
        msg = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {str(msg)[:300]}" if msg else ""
