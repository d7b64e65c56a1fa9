"""What the directory-wide checks need of one file's pod, and the per-file results kept between
passes over one directory.

:class:`PodFacts` is a pod as the checks across files see it (duplicate names, host ports, node
fit: docs/kubelet-contract.md "Duplicate names across files", "What the kubelet refuses"), kept instead of
its decoded document and source positions. :class:`FileMemo` keeps each file's own findings and
facts under the sha256 of its bytes, so a pass over a directory where one file changed decodes
and validates that file only (the cost of a pass follows the change, not the node).
"""

from __future__ import annotations

import os
import re

from staticpodd.manifest.positions import locate
from staticpodd.record import FrozenRecord
from staticpodd.validate.context import Options, as_dict, as_list
from staticpodd.validate.findings import Finding

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Final

_DEFAULT_SECURE_PORT = {"kube-apiserver": 6443, "kube-controller-manager": 10257, "kube-scheduler": 10259}
_URL_PORT = re.compile(r"^[a-z]+://[^,/]*:(\d+)")


def inferred_ports(c: dict) -> list[tuple[int, str]]:
    """Ports a hostNetwork control-plane container listens on without declaring them (inferred).

    kube-apiserver / kube-controller-manager / kube-scheduler: ``--secure-port`` or its
    default (6443 / 10257 / 10259); etcd: the ports of ``--listen-client-urls`` and
    ``--listen-peer-urls`` (default 2379 / 2380).
    """
    argv = [a for a in as_list(c.get("command")) + as_list(c.get("args")) if isinstance(a, str)]
    if not argv:
        return []
    binary = os.path.basename(argv[0])
    flags: dict[str, str] = {}
    for i, a in enumerate(argv):
        if a.startswith("--"):
            key, eq, value = a[2:].partition("=")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                value = argv[i + 1]
            flags[key] = value
    out: list[tuple[int, str]] = []
    if binary in _DEFAULT_SECURE_PORT:
        secure = flags.get("secure-port", str(_DEFAULT_SECURE_PORT[binary]))
        if secure.isdigit() and int(secure) > 0:
            out.append((int(secure), f"{binary} --secure-port"))
    elif binary == "etcd":
        for flag, default in (("listen-client-urls", 2379), ("listen-peer-urls", 2380)):
            urls = flags.get(flag)
            ports = {int(m.group(1)) for u in (urls or "").split(",") if (m := _URL_PORT.match(u.strip()))}
            for p in sorted(ports or {default}):
                out.append((p, f"etcd --{flag}"))
    return out


def host_ports(doc: dict) -> list[tuple[str, int, str, str]]:
    """(protocol, port, hostIP, field) the pod claims on the node.

    hostNetwork pods claim every containerPort (defaulting sets hostPort = containerPort), and
    control-plane binaries the ports their flags name (inferred); other pods claim explicit
    hostPorts. Source: pkg/apis/core/v1/defaults.go SetDefaults_Pod; NodePorts predicate.
    """
    spec = as_dict(doc.get("spec"))
    host_network = spec.get("hostNetwork") is True
    out = []
    for key in ("initContainers", "containers"):
        for i, c in enumerate(as_list(spec.get(key))):
            c = as_dict(c)
            if key == "initContainers" and c.get("restartPolicy") != "Always":
                continue  # plain init containers have exited before others start
            declared = set()
            for j, port in enumerate(as_list(c.get("ports"))):
                port = as_dict(port)
                hp = port.get("hostPort")
                if host_network and not hp:
                    hp = port.get("containerPort")
                if isinstance(hp, int) and not isinstance(hp, bool) and hp > 0:
                    proto = port.get("protocol") or "TCP"
                    ip = port.get("hostIP") or "0.0.0.0"
                    declared.add((str(proto), hp))
                    out.append((str(proto), hp, str(ip), f"spec.{key}[{i}].ports[{j}]"))
            if host_network:
                for port, _why in inferred_ports(c):
                    if ("TCP", port) not in declared:
                        out.append(("TCP", port, "0.0.0.0", f"spec.{key}[{i}].command"))
    return out


def is_pod_doc(doc: object) -> bool:
    """Whether a decoded document is a pod the checks across files count: ``apiVersion: v1``,
    ``kind: Pod`` and a non-empty string ``metadata.name`` (docs/kubelet-contract.md "Which files are pods")."""
    if not isinstance(doc, dict) or doc.get("kind") != "Pod" or doc.get("apiVersion") != "v1":
        return False
    name = as_dict(doc.get("metadata")).get("name")
    return isinstance(name, str) and bool(name)


def pod_key(doc: dict) -> tuple[str, str]:
    """``(namespace, name)`` of a document :func:`is_pod_doc` accepts (namespace ``default`` when unset)."""
    meta = doc["metadata"]
    return (meta.get("namespace") or "default", meta["name"])


def _maybe_escaped(data: bytes) -> bool:
    """Whether a key or string in ``data`` may be spelled other than literally: a backslash (a
    YAML double-quoted or JSON escape), a NUL byte (UTF-16/32 text) or a ``!`` (a YAML tag:
    go-yaml v2, so the kubelet, base64-decodes a ``!!binary`` scalar, so ``name: !!binary
    a3ViZS1zY2hlZHVsZXI=`` names kube-scheduler; ``%TAG`` can spell that tag otherwise)."""
    return b"\\" in data or b"\x00" in data or b"!" in data


def may_name(data: bytes, name: str) -> bool:
    """False only when ``data`` surely defines no pod named ``name``, found without decoding: the
    name appears nowhere in the bytes and nothing in them is escaped, tagged or UTF-16/32 (every other
    YAML or JSON spelling of a string holds it literally; folding would add a space, which no
    pod name has). One substring test, so an unrelated 10 MiB file is never decoded for it."""
    return _maybe_escaped(data) or name.encode("utf-8", "surrogateescape") in data


def may_claim_host_ports(data: bytes) -> bool:
    """False only when ``data`` surely claims no host port (:func:`host_ports`), found without
    decoding: neither ``hostPort`` nor ``hostNetwork`` appears, and nothing is escaped or tagged."""
    return _maybe_escaped(data) or b"hostPort" in data or b"hostNetwork" in data


def port_claims(data: bytes) -> tuple[tuple[str, str], list[tuple[str, int, str, str]]] | None:
    """``((namespace, name), host_ports)`` of the pod ``data`` defines as the kubelet decodes it
    (up to its 10 MiB), None when it is no pod (:func:`is_pod_doc`) or does not decode. Decoding
    only, no validation: what the engine caches for each live file (by digest) to refuse new
    bytes that claim a host port another live pod holds. Never raises for bad input."""
    from staticpodd.manifest.decoded import KUBELET_MAX_BYTES, DecodeProblem
    from staticpodd.manifest.decoding import decode

    try:
        doc = decode(data, max_bytes=KUBELET_MAX_BYTES).doc
    except DecodeProblem:
        return None
    return doc_claims(doc)


def doc_claims(doc: object) -> tuple[tuple[str, str], list[tuple[str, int, str, str]]] | None:
    """:func:`port_claims` of an already decoded document (the gate's)."""
    if not is_pod_doc(doc):
        return None
    assert isinstance(doc, dict)
    return pod_key(doc), host_ports(doc)


def _container_requests(c: dict) -> tuple[int, int]:
    from staticpodd.validate.quantity import cpu_millis, memory_bytes, parse_quantity

    res = as_dict(c.get("resources"))
    req = as_dict(res.get("requests"))
    lim = as_dict(res.get("limits"))
    out = []
    for name, conv in (("cpu", cpu_millis), ("memory", memory_bytes)):
        raw = req.get(name, lim.get(name))  # requests default to limits (SetDefaults_Pod)
        q = parse_quantity(raw) if raw is not None else None
        out.append(conv(q) if q is not None and q > 0 else 0)
    return out[0], out[1]


def pod_requests(spec: dict) -> tuple[int, int]:
    """Effective (cpu millicores, memory bytes) the scheduler counts for a pod spec.

    max(sum of containers + sidecars, max over init containers of (init + sidecars started
    before it)), plus ``overhead``. Source: k8s.io/component-helpers/resource PodRequests.
    """
    from staticpodd.validate.quantity import cpu_millis, memory_bytes, parse_quantity

    total = [0, 0]
    for c in as_list(spec.get("containers")):
        r = _container_requests(as_dict(c))
        total = [total[0] + r[0], total[1] + r[1]]
    sidecars = [0, 0]
    init_max = [0, 0]
    for c in as_list(spec.get("initContainers")):
        c = as_dict(c)
        r = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = [sidecars[0] + r[0], sidecars[1] + r[1]]
            total = [total[0] + r[0], total[1] + r[1]]
            init_max = [max(init_max[0], sidecars[0]), max(init_max[1], sidecars[1])]
        else:
            init_max = [max(init_max[0], r[0] + sidecars[0]), max(init_max[1], r[1] + sidecars[1])]
    out = [max(total[0], init_max[0]), max(total[1], init_max[1])]
    overhead = as_dict(spec.get("overhead"))
    for i, (name, conv) in enumerate((("cpu", cpu_millis), ("memory", memory_bytes))):
        q = parse_quantity(overhead.get(name)) if name in overhead else None
        if q is not None and q > 0:
            out[i] += conv(q)
    return out[0], out[1]


def request_field(spec: dict, resource: str) -> str | None:
    """Field path of the first request (else limit) of ``resource`` in a pod spec; ``spec`` when none."""
    for key in ("containers", "initContainers"):
        for i, c in enumerate(as_list(spec.get(key))):
            res = as_dict(as_dict(c).get("resources"))
            for kind in ("requests", "limits"):
                if resource in as_dict(res.get(kind)):
                    return f"spec.{key}[{i}].resources.{kind}.{resource}"
    return "spec"


class PodFacts(FrozenRecord):
    """One file's pod for the checks across files. ``display``: the path as shown; ``key``:
    (namespace, name); ``ports``: (protocol, port, hostIP, field) it claims (:func:`host_ports`);
    ``requests``: (cpu millicores, memory bytes) the scheduler counts
    (:func:`pod_requests`); ``request_fields``: the field paths of its
    cpu and memory requests; ``located``: field path -> (line, column) for ``metadata.name``, the
    port fields and the request fields (what those checks' findings point at)."""

    display: Final[str]
    key: Final[tuple[str, str]]
    ports: Final[tuple[tuple[str, int, str, str], ...]]
    requests: Final[tuple[int, int]]
    request_fields: Final[tuple[str | None, str | None]]
    located: Final[dict[str, tuple[int | None, int | None]]]

    def __init__(self, display: str, key: tuple[str, str], ports: tuple[tuple[str, int, str, str], ...],
                 requests: tuple[int, int], request_fields: tuple[str | None, str | None],
                 located: dict[str, tuple[int | None, int | None]]) -> None:
        self.display = display
        self.key = key
        self.ports = ports
        self.requests = requests
        self.request_fields = request_fields
        self.located = located


def pod_facts(display: str, doc: dict, positions: dict) -> PodFacts:
    """The :class:`PodFacts` of a decoded Pod ``doc`` (``metadata.name`` set) read from ``display``."""
    spec = as_dict(doc.get("spec"))
    ports = tuple(host_ports(doc))
    fields = (request_field(spec, "cpu"), request_field(spec, "memory"))
    wanted = ["metadata.name", *(p[3] for p in ports), *(f for f in fields if f)]
    return PodFacts(display, pod_key(doc), ports, pod_requests(spec),
                    fields, {f: locate(positions, f) for f in wanted})


class FileMemo:
    """Each file's own findings and :class:`PodFacts` from the last :func:`check_directory` over
    one directory, by file (as displayed) and the sha256 of the bytes they were made from; all of
    it forgotten when the options change. Holds one entry per file seen at the last pass."""

    def __init__(self) -> None:
        self.options: Options | None = None
        self.files: dict[str, tuple[str, tuple[Finding, ...], PodFacts | None]] = {}
        #: files decoded and validated by the last pass (the others came from the memo)
        self.validated = 0

    def start(self, options: Options) -> dict[str, tuple[str, tuple[Finding, ...], PodFacts | None]]:
        """Begin a pass: returns the entries of the previous one (empty when ``options``
        differ) and starts an empty set for this pass, which :meth:`keep` fills."""
        before = self.files if options == self.options else {}
        self.options, self.files, self.validated = options, {}, 0
        return before

    def keep(self, display: str, digest: str, own: tuple[Finding, ...], facts: PodFacts | None) -> None:
        """Remember one file's results for the next pass."""
        self.files[display] = (digest, own, facts)
