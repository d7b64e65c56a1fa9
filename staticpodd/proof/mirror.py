"""Optional: ask the apiserver for the mirror pod's ``config.hash`` and Ready (never required).

The kubelet publishes a mirror pod for each static pod, with the annotations
``kubernetes.io/config.hash`` and ``kubernetes.io/config.mirror`` (both the pod UID; docs/kubelet-contract.md
"Identity and restarts"); kubeadm upgrade waits for that hash. Here it is evidence in
``Outcome.details["mirror_pod"]``, and the kubelet's own Ready when a wait asks for it; the
apiserver may be the very thing being changed, so its silence never fails a wait. Credentials
come from a kubeconfig (e.g. the kubelet's own ``/etc/kubernetes/kubelet.conf``), read and used
by the official ``kubernetes`` client (:mod:`staticpodd.cluster.client`, the ``cluster`` extra):
without it the mirror pod is not looked at, and the entry says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..cluster.client import NODE_AUTHORIZER_NO_RELATIONSHIP
from .runtime import CONFIG_HASH

__all__ = ["CONFIG_HASH", "CONFIG_MIRROR", "NODE_AUTHORIZER_NO_RELATIONSHIP", "mirror_pod_hash"]

CONFIG_MIRROR = "kubernetes.io/config.mirror"

#: One connection per kubeconfig (its path, size and mtime) and timeout: a wait asks every second.
_apis: dict[tuple[str, int, int, float], Any] = {}


def _api(kubeconfig: Path, timeout: float) -> Any:
    """The connection for ``kubeconfig``. The client runs what a kubeconfig says
    (``users[].user.exec``) as the caller, so the file and every directory above it are checked
    first, as the cluster view checks its own (:func:`staticpodd.node.trust.trusted_kubeconfig`;
    Untrusted, FileNotFoundError)."""
    from ..cluster.client import Api
    from ..node.trust import trusted_kubeconfig

    trusted_kubeconfig(Path(os.path.abspath(kubeconfig)), "kubeconfig", parents_up_to=Path("/"))
    st = os.stat(kubeconfig)
    key = (str(kubeconfig), st.st_size, st.st_mtime_ns, timeout)
    api = _apis.get(key)
    if api is None:
        _apis.clear()
        api = _apis[key] = Api(str(kubeconfig), timeout=timeout)
    return api


def mirror_pod_hash(kubeconfig: Path, pod_name: str, namespace: str, *, timeout: float = 2.0) -> dict[str, Any]:
    """GET the mirror pod through ``kubeconfig``'s current context (``timeout`` seconds to connect
    and for the answer).

    Returns ``{"found": bool, "config_hash": str | None, "mirror": bool, "ready": bool | None}``
    (``ready``: the kubelet's Ready condition on the mirror pod, None when it reports none) or
    ``{"error": str}`` (unreadable kubeconfig, no client installed, apiserver unreachable, 401, a
    403 other than the one below...). Never raises.

    With the kubelet's own credentials (``kubelet.conf``, user ``system:node:<node>``) the node
    authorizer answers 403, not 404, for a pod that is not bound to this node: a mirror pod the
    kubelet has deleted reads as forbidden (seen on a real kubeadm v1.37.2 control plane: "node:
    no relationship found between node 'NAME' and this object"). That answer means the pod is
    gone: ``{"found": False, ..., "via": "node-authorizer"}``.
    """
    from ..cluster.client import ClusterError
    from ..errors import StaticpodError

    try:
        pod = _api(Path(kubeconfig), timeout).pod(pod_name, namespace)
    except ClusterError as exc:
        if exc.status == 403 and NODE_AUTHORIZER_NO_RELATIONSHIP in str(exc):
            return {"found": False, "config_hash": None, "mirror": False, "ready": None, "via": "node-authorizer"}
        return {"error": str(exc)}
    except StaticpodError as exc:
        return {"error": str(exc)}
    except OSError as exc:
        return {"error": f"{kubeconfig}: {exc.strerror or exc}"}
    except Exception as exc:  # noqa: BLE001 - a bad kubeconfig must never break a wait
        return {"error": f"{kubeconfig}: {type(exc).__name__}: {exc}"}
    if pod is None:
        return {"found": False, "config_hash": None, "mirror": False, "ready": None}
    try:
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        conds = (pod.get("status") or {}).get("conditions") or []
        ready = next((c.get("status") == "True" for c in conds if isinstance(c, dict) and c.get("type") == "Ready"),
                     None)
    except AttributeError:
        return {"error": "apiserver answered something that is not a Pod"}
    return {"found": True, "config_hash": ann.get(CONFIG_HASH), "mirror": CONFIG_MIRROR in ann, "ready": ready}
