"""Which components the kubelet's own connection to the apiserver runs through.

Parking one of these cuts the kubelet off from the apiserver: the mirror pods, node status and
leases stop, and a kubelet restarted meanwhile may skip removals and additions
(docs/kubelet-contract.md "Identity and restarts", k/k #88402). ``park`` asks for ``--force`` for them.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


def _image_base(image: Any) -> str:
    """``registry.k8s.io/kube-apiserver:v1.29.0`` -> ``kube-apiserver``."""
    s = str(image or "")
    s = s.split("@", 1)[0]
    last = s.rsplit("/", 1)[-1]
    return last.split(":", 1)[0].lower()


def _words(doc: Mapping[str, Any]) -> tuple[str, set[str], set[str]]:
    """(pod name, label values, image bases + first command words of the containers)."""
    meta = doc.get("metadata") or {}
    name = str(meta.get("name") or "").lower()
    labels = {str(v).lower() for v in (meta.get("labels") or {}).values()} if isinstance(meta, Mapping) else set()
    spec = doc.get("spec") or {}
    things: set[str] = set()
    for c in spec.get("containers") or []:
        if not isinstance(c, Mapping):
            continue
        things.add(_image_base(c.get("image")))
        argv = [str(x) for x in (c.get("command") or [])[:2]] + [str(x) for x in (c.get("args") or [])[:1]]
        things.update(a.rsplit("/", 1)[-1].lower() for a in argv)
    return name, labels, things


def _is(name: str, labels: set[str], things: set[str], word: str) -> bool:
    return word in name or word in labels or any(t == word or t.startswith(word + "-") for t in things)


def critical_component_reason(
    manifest_doc: Mapping[str, Any], *, node_has_other_apiservers: bool | None = None
) -> str | None:
    """Why parking this component would cut the kubelet off from the apiserver, or None.

    - a local API load balancer or VIP holder (haproxy, nginx-proxy, kube-vip, keepalived): the
      kubelet's kubeconfig points at it (kubeadm HA docs, kubespray ``loadbalancer_apiserver_localhost``);
    - the local kube-apiserver, or etcd, which the local apiserver needs: critical unless
      ``node_has_other_apiservers`` is True (the caller knows the kubelet reaches another one).
      None means unknown and is treated as critical, with the reason saying so.

    ``manifest_doc``: the decoded Pod. Recognised by pod name, label values, image name and the
    first command words (hyperkube ``kube-apiserver``). Never raises.
    """
    if not isinstance(manifest_doc, Mapping):
        return None
    name, labels, things = _words(manifest_doc)
    for word, what in (
        ("haproxy", "haproxy load-balances the apiserver for this node"),
        ("nginx-proxy", "nginx-proxy is the local apiserver load balancer (kubespray)"),
        ("kube-nginx", "nginx-proxy is the local apiserver load balancer (kubespray)"),
        ("kube-vip", "kube-vip holds the control-plane virtual IP"),
        ("keepalived", "keepalived holds the control-plane virtual IP"),
    ):
        if _is(name, labels, things, word):
            return (
                f"{what}; the kubelet's own connection to the apiserver goes through it, so parking it "
                "cuts this node (and possibly others) off from the apiserver"
            )
    if node_has_other_apiservers:
        return None
    unknown = node_has_other_apiservers is None
    tail = (
        " unless this kubelet reaches another apiserver (not known here)"
        if unknown
        else " (this node has no other apiserver)"
    )
    if _is(name, labels, things, "kube-apiserver"):
        return "this is the local kube-apiserver: the kubelet loses its apiserver" + tail
    if _is(name, labels, things, "etcd") or "etcd-server" in name:
        return "etcd backs the local kube-apiserver: parking it takes the apiserver down" + tail
    return None
