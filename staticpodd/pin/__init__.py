"""``staticpodctl pin``: place a Pending API pod on a node by hand, with the kubelet's checks.

With kube-scheduler parked nothing binds new pods; the manual step is to write the pod again with
``spec.nodeName`` set (the field is immutable once set, so the pod is deleted and created). The
package splits that step in parts that import no Kubernetes client:

- :mod:`staticpodd.pin.strip`: the pod as the API server returns it -> the pod as the user wrote it;
- :mod:`staticpodd.pin.checks`: what the kubelet will refuse (in its words) and each scheduler rule
  the pin walks around;
- :mod:`staticpodd.pin.local`: the node's own record of what was pinned (state dir), listed by
  ``staticpodctl status`` and by :func:`staticpodd.pin.local.list_local_pins`;

and one that does (:mod:`staticpodd.pin.cluster`, the official ``kubernetes`` client, imported only
when ``pin`` runs).
"""
