"""How the version store keeps a manifest's bytes on disk: compressed, losslessly.

A blob row carries a ``codec`` naming how its ``data`` column was written:

``raw``  the bytes as they are (every store written before schema 3; blobs that do not shrink).
``zd1``  zlib (deflate, level 9, stdlib) with the preset dictionary :data:`ZDICT_1`: a static
         pod manifest is small (0.5-8 KB) and mostly the same words as every other one, so a
         dictionary of those words makes even the first version of a file compress well, where
         plain per-blob gzip has nothing to refer back to.

A codec id is a promise: the bytes behind ``zd1`` must never change, or old stores would decode
to garbage. A better dictionary gets a new id (``zd2``) and both stay readable forever. Every
decoded blob is checked against its sha256 digest by :func:`decode` callers that want it
(:meth:`staticpodd.store.versions.VersionStore.data` does), so a wrong codec can never hand out wrong
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
    b"apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    kubeadm.kubernetes.io/etcd.advertise-client-urls: "
    b"https://\n    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: \n"
    b"  creationTimestamp: null\n  labels:\n    component: \n    tier: control-plane\n  name: \n"
    b"  namespace: kube-system\nspec:\n  containers:\n  - command:\n    - --advertise-address=\n"
    b"    - --allow-privileged=true\n    - --authorization-mode=Node,RBAC\n"
    b"    - --client-ca-file=/etc/kubernetes/pki/ca.crt\n"
    b"    - --enable-admission-plugins=NodeRestriction\n    - --enable-bootstrap-token-auth=true\n"
    b"    - --etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt\n"
    b"    - --etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt\n"
    b"    - --etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key\n    - --etcd-servers=https://127.0.0.1:2379\n"
    b"    - --kubelet-client-certificate=/etc/kubernetes/pki/apiserver-kubelet-client.crt\n"
    b"    - --kubelet-client-key=/etc/kubernetes/pki/apiserver-kubelet-client.key\n"
    b"    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname\n"
    b"    - --proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt\n"
    b"    - --proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key\n"
    b"    - --requestheader-allowed-names=front-proxy-client\n"
    b"    - --requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt\n"
    b"    - --requestheader-extra-headers-prefix=X-Remote-Extra-\n    - --requestheader-group-headers=X-Remote-Group\n"
    b"    - --requestheader-username-headers=X-Remote-User\n    - --secure-port=6443\n"
    b"    - --service-account-issuer=https://kubernetes.default.svc.cluster.local\n"
    b"    - --service-account-key-file=/etc/kubernetes/pki/sa.pub\n"
    b"    - --service-account-signing-key-file=/etc/kubernetes/pki/sa.key\n"
    b"    - --service-cluster-ip-range=10.96.0.0/12\n"
    b"    - --tls-cert-file=/etc/kubernetes/pki/apiserver.crt\n"
    b"    - --tls-private-key-file=/etc/kubernetes/pki/apiserver.key\n"
    b"    - --allocate-node-cidrs=true\n    - --cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt\n"
    b"    - --cluster-signing-key-file=/etc/kubernetes/pki/ca.key\n    - --controllers=*,bootstrapsigner,tokencleaner\n"
    b"    - --root-ca-file=/etc/kubernetes/pki/ca.crt\n    - --use-service-account-credentials=true\n"
    b"    - --data-dir=/var/lib/etcd\n    - --listen-client-urls=https://127.0.0.1:2379,https://\n"
    b"    - --listen-metrics-urls=http://127.0.0.1:2381\n    - --peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt\n"
    b"    - --snapshot-count=10000\n    - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt\n"
    b"    - kube-scheduler\n    - --authentication-kubeconfig=/etc/kubernetes/scheduler.conf\n"
    b"    - --authorization-kubeconfig=/etc/kubernetes/scheduler.conf\n    - --bind-address=127.0.0.1\n"
    b"    - --kubeconfig=/etc/kubernetes/scheduler.conf\n    - --leader-elect=true\n"
    b"    image: registry.k8s.io/kube-scheduler:v1.34.2\n    imagePullPolicy: IfNotPresent\n"
    b"    livenessProbe:\n      failureThreshold: 8\n      httpGet:\n        host: 127.0.0.1\n        path: /healthz\n"
    b"        port: 10259\n        scheme: HTTPS\n      initialDelaySeconds: 10\n      periodSeconds: 10\n"
    b"      timeoutSeconds: 15\n    name: kube-scheduler\n    readinessProbe:\n    resources:\n      requests:\n"
    b"        cpu: 100m\n        memory: 100Mi\n      limits:\n    securityContext:\n    startupProbe:\n"
    b"      failureThreshold: 24\n      httpGet:\n        host: 127.0.0.1\n        path: /livez\n        port: 6443\n"
    b"    env:\n    - name: \n      value: \n    ports:\n    - containerPort: \n      hostPort: \n      protocol: TCP\n"
    b"    volumeMounts:\n    - mountPath: /etc/kubernetes/scheduler.conf\n"
    b"      name: kubeconfig\n      readOnly: true\n"
    b"    - mountPath: /etc/ssl/certs\n      name: ca-certs\n"
    b"      readOnly: true\n    - mountPath: /etc/kubernetes/pki\n"
    b"      name: k8s-certs\n  hostNetwork: true\n  priority: 2000001000\n  priorityClassName: system-node-critical\n"
    b"  securityContext:\n    seccompProfile:\n      type: RuntimeDefault\n  volumes:\n  - hostPath:\n"
    b"      path: /etc/kubernetes/scheduler.conf\n      type: FileOrCreate\n    name: kubeconfig\n  - hostPath:\n"
    b"      path: /etc/ssl/certs\n      type: DirectoryOrCreate\n    name: ca-certs\nstatus: {}\n"
)


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
