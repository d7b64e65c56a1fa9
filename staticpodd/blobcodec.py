"""How the version store keeps a manifest's bytes on disk (issue 14): compressed, losslessly.

A blob row carries a ``codec`` naming how its ``data`` column was written:

``raw``  the bytes as they are (every store written before schema 3; blobs that do not shrink).
``zd1``  zlib (deflate, level 9, stdlib) with the preset dictionary :data:`ZDICT_1`: a static
         pod manifest is small (0.5-8 KB) and mostly the same words as every other one, so a
         dictionary of those words makes even the first version of a file compress well, where
         plain per-blob gzip has nothing to refer back to.

A codec id is a promise: the bytes behind ``zd1`` must never change, or old stores would decode
to garbage. A better dictionary gets a new id (``zd2``) and both stay readable forever. Every
decoded blob is checked against its sha256 digest by :func:`decode` callers that want it
(:meth:`staticpodd.store.VersionStore.data` does), so a wrong codec can never hand out wrong
bytes silently.
"""

from __future__ import annotations

import zlib

RAW = "raw"
ZD1 = "zd1"
CODECS = (RAW, ZD1)

#: The preset dictionary of codec ``zd1``: the words kubeadm's own manifests (and most static
#: pods) are made of. Frozen: never edit (see the module docstring); add ``ZDICT_2`` instead.
ZDICT_1 = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    kubeadm.kubernetes.io/etcd.advertise-client-urls: "
    "https://\n    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: \n"
    "  creationTimestamp: null\n  labels:\n    component: \n    tier: control-plane\n  name: \n"
    "  namespace: kube-system\nspec:\n  containers:\n  - command:\n    - --advertise-address=\n"
    "    - --allow-privileged=true\n    - --authorization-mode=Node,RBAC\n    - --client-ca-file=/etc/kubernetes/pki/ca.crt\n"
    "    - --enable-admission-plugins=NodeRestriction\n    - --enable-bootstrap-token-auth=true\n"
    "    - --etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt\n    - --etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt\n"
    "    - --etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key\n    - --etcd-servers=https://127.0.0.1:2379\n"
    "    - --kubelet-client-certificate=/etc/kubernetes/pki/apiserver-kubelet-client.crt\n"
    "    - --kubelet-client-key=/etc/kubernetes/pki/apiserver-kubelet-client.key\n"
    "    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname\n"
    "    - --proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt\n"
    "    - --proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key\n"
    "    - --requestheader-allowed-names=front-proxy-client\n"
    "    - --requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt\n"
    "    - --requestheader-extra-headers-prefix=X-Remote-Extra-\n    - --requestheader-group-headers=X-Remote-Group\n"
    "    - --requestheader-username-headers=X-Remote-User\n    - --secure-port=6443\n"
    "    - --service-account-issuer=https://kubernetes.default.svc.cluster.local\n"
    "    - --service-account-key-file=/etc/kubernetes/pki/sa.pub\n"
    "    - --service-account-signing-key-file=/etc/kubernetes/pki/sa.key\n    - --service-cluster-ip-range=10.96.0.0/12\n"
    "    - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt\n    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key\n"
    "    - --allocate-node-cidrs=true\n    - --cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt\n"
    "    - --cluster-signing-key-file=/etc/kubernetes/pki/ca.key\n    - --controllers=*,bootstrapsigner,tokencleaner\n"
    "    - --root-ca-file=/etc/kubernetes/pki/ca.crt\n    - --use-service-account-credentials=true\n"
    "    - --data-dir=/var/lib/etcd\n    - --listen-client-urls=https://127.0.0.1:2379,https://\n"
    "    - --listen-metrics-urls=http://127.0.0.1:2381\n    - --peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt\n"
    "    - --snapshot-count=10000\n    - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt\n"
    "    - kube-scheduler\n    - --authentication-kubeconfig=/etc/kubernetes/scheduler.conf\n"
    "    - --authorization-kubeconfig=/etc/kubernetes/scheduler.conf\n    - --bind-address=127.0.0.1\n"
    "    - --kubeconfig=/etc/kubernetes/scheduler.conf\n    - --leader-elect=true\n"
    "    image: registry.k8s.io/kube-scheduler:v1.34.2\n    imagePullPolicy: IfNotPresent\n"
    "    livenessProbe:\n      failureThreshold: 8\n      httpGet:\n        host: 127.0.0.1\n        path: /healthz\n"
    "        port: 10259\n        scheme: HTTPS\n      initialDelaySeconds: 10\n      periodSeconds: 10\n"
    "      timeoutSeconds: 15\n    name: kube-scheduler\n    readinessProbe:\n    resources:\n      requests:\n"
    "        cpu: 100m\n        memory: 100Mi\n      limits:\n    securityContext:\n    startupProbe:\n"
    "      failureThreshold: 24\n      httpGet:\n        host: 127.0.0.1\n        path: /livez\n        port: 6443\n"
    "    env:\n    - name: \n      value: \n    ports:\n    - containerPort: \n      hostPort: \n      protocol: TCP\n"
    "    volumeMounts:\n    - mountPath: /etc/kubernetes/scheduler.conf\n      name: kubeconfig\n      readOnly: true\n"
    "    - mountPath: /etc/ssl/certs\n      name: ca-certs\n      readOnly: true\n    - mountPath: /etc/kubernetes/pki\n"
    "      name: k8s-certs\n  hostNetwork: true\n  priority: 2000001000\n  priorityClassName: system-node-critical\n"
    "  securityContext:\n    seccompProfile:\n      type: RuntimeDefault\n  volumes:\n  - hostPath:\n"
    "      path: /etc/kubernetes/scheduler.conf\n      type: FileOrCreate\n    name: kubeconfig\n  - hostPath:\n"
    "      path: /etc/ssl/certs\n      type: DirectoryOrCreate\n    name: ca-certs\nstatus: {}\n"
).encode()


def encode(data: bytes) -> tuple[str, bytes]:
    """``(codec, stored bytes)`` for ``data``: ``zd1`` when that is smaller, else ``raw``."""
    c = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT_1)
    packed = c.compress(data) + c.flush()
    if len(packed) < len(data):
        return ZD1, packed
    return RAW, data


def decode(codec: str | None, stored: bytes) -> bytes:
    """The original bytes of a blob written with ``codec`` (None or ``raw``: as stored).

    Raises ValueError for an unknown codec (a store written by a newer staticpodd) and
    zlib.error for damaged data.
    """
    if codec is None or codec == RAW:
        return bytes(stored)
    if codec == ZD1:
        d = zlib.decompressobj(15, ZDICT_1)
        return d.decompress(stored) + d.flush()
    raise ValueError(f"unknown blob codec {codec!r}")
