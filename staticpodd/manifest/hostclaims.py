"""Which host-port claims clash: the rule ``validate DIR``'s ``host-port-conflict`` and the
engine's refusal of new live bytes share (docs/kubelet-contract.md "What the kubelet refuses": "Host ports
already taken fail admission too"; the NodePorts predicate the kubelet runs at admission,
pkg/kubelet/lifecycle/predicate.go).

A claim is ``(protocol, port, hostIP, field)`` as :func:`staticpodd.validate.podfacts.host_ports`
makes it. Pure, and imports nothing of staticpodd: the engine's check runs on every ``apply``/``unpark`` and
must not load the decoders for files whose claims are memoised. Hashed into the
validator id with ``validate/`` (:data:`staticpodd.resources._DECODER`): the daemon's kept
directory findings depend on it.
"""

from __future__ import annotations

from collections.abc import Iterable


def claims_clash(key: tuple[str, str], claim: tuple[str, int, str, str], other_key: tuple[str, str],
                 other_claim: tuple[str, int, str, str]) -> bool:
    """Whether host-port claim ``claim`` of pod ``key`` and ``other_claim`` of pod ``other_key``
    (each ``(protocol, port, hostIP, field)``: :func:`staticpodd.validate.podfacts.host_ports`)
    keep one of the two pods out: same protocol and port, overlapping hostIPs (equal, or either
    is ``0.0.0.0``), and two different pods. Files that define one pod (same namespace/name)
    never clash: the kubelet runs only one of them (docs/kubelet-contract.md "Duplicate names across files");
    that also covers a file with itself. Source: docs/kubelet-contract.md "What the kubelet refuses" (host
    ports), the NodePorts predicate the kubelet runs at admission
    (pkg/kubelet/lifecycle/predicate.go)."""
    if claim[0] != other_claim[0] or claim[1] != other_claim[1]:
        return False
    if claim[2] != other_claim[2] and "0.0.0.0" not in (claim[2], other_claim[2]):
        return False
    return key != other_key


def inferred_claim(claim: tuple[str, int, str, str]) -> bool:
    """Whether ``claim`` is a port a control-plane binary's flags name (``--secure-port``, etcd's
    ``--listen-*-urls``) rather than a declared ``hostPort``/``containerPort``: its field is the
    container's ``command`` (:func:`staticpodd.validate.podfacts.host_ports`)."""
    return claim[3].endswith(".command")


def admission_clash(claim: tuple[str, int, str, str], other_claim: tuple[str, int, str, str]) -> bool:
    """Whether a clash of ``claim`` and ``other_claim`` (:func:`claims_clash`) keeps a pod out at
    admission: only when both ports are declared. The NodePorts predicate sees only declared
    ports, so when either side is a port a flag names (:func:`inferred_claim`) the kubelet admits
    both pods and the second one to start fails to bind (a crash-looping container)."""
    return not inferred_claim(claim) and not inferred_claim(other_claim)


def clashes_with(key: tuple[str, str], ports: Iterable[tuple[str, int, str, str]],
                 others: Iterable[tuple[str, tuple[str, str], Iterable[tuple[str, int, str, str]]]]
                 ) -> list[tuple[tuple[str, int, str, str], str, tuple[str, str], tuple[str, int, str, str]]]:
    """Every clash (:func:`claims_clash`) between the claims ``ports`` of pod ``key`` and those
    of ``others``, each ``(file, key, claims)``: ``(claim, other file, other key, other claim)``,
    in the order of ``ports`` then ``others``. Empty when nothing clashes."""
    mine = list(ports)
    if not mine:
        return []
    wanted = {(c[0], c[1]) for c in mine}
    out = []
    for other, okey, oclaims in others:
        for oclaim in oclaims:
            if (oclaim[0], oclaim[1]) not in wanted:
                continue
            for claim in mine:
                if claims_clash(key, claim, okey, oclaim):
                    out.append((claim, other, okey, oclaim))
    out.sort(key=lambda c: mine.index(c[0]))
    return out
