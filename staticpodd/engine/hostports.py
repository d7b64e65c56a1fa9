"""Host ports: refusing new live bytes that claim a host port another live pod already holds.

``staticpodctl validate DIR`` reports two live pods on one host port as ``host-port-conflict``
(:func:`staticpodd.validate.directory._port_conflicts`): the kubelet admits one and rejects the
other (docs/kubelet-contract.md "What the kubelet refuses": "Host ports already taken fail admission too").
:class:`Ports` refuses such bytes before ``apply``, ``edit``, ``rollback`` or ``unpark`` put
them live, by the same rule (:func:`staticpodd.manifest.hostclaims.claims_clash`).

Cost: each live file's claims are a fact about its bytes, memoised in the store by
digest (``facts``, kind :func:`ports_kind`), and found for every live file with one
query joined on the stat signature its bytes were read with
(:meth:`VersionStore.live_identities_and_facts`):
a file is read and decoded only when its stat changed or its bytes were never seen.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable

from ..errors import Conflict
from ..manifest.hostclaims import admission_clash, clashes_with
from ..store.versions import digest_of
from .known import known_digest
from .model import _q

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

    from .core import EngineCore
    from .gate import Gatekeeper

    Claim = tuple[str, int, str, str]
    Claims = tuple[tuple[str, str], list[Claim]] | None


def ports_kind() -> str:
    """The ``facts`` kind of a file's host-port claims: changes with the validator's code
    (:func:`staticpodd.resources.validator_id`: the decoder and ``validate/``, where
    :func:`~staticpodd.validate.podfacts.host_ports` lives), so a new rule is never
    answered from an old memo. The kind the gatekeeper's looks read
    (:class:`~staticpodd.engine.gate.Gatekeeper`'s ``look_fact_kind``)."""
    from ..resources import validator_id

    return "host-ports/" + validator_id()


class Ports:
    """The host-port refusal of new live bytes, over a digest-keyed memo of each file's claims.

    ``core``: the directory, store and lock; ``gatekeeper``: the validation options, the pod
    identities and the one look at the other live files its checks share.
    """

    def __init__(self, core: EngineCore, gatekeeper: Gatekeeper) -> None:
        self.core = core
        self.gatekeeper = gatekeeper

    def port_claims(self, data: bytes, doc: Any = None) -> Claims:
        """``((namespace, name), [(protocol, port, hostIP, field), ...])`` of the pod ``data``
        defines (:func:`staticpodd.validate.podfacts.port_claims`), None when it is no pod.
        ``doc``: ``data`` as the gate decoded it, if at hand (not decoded again). Memoised in the
        store by digest (written only under the lock, like :meth:`pod_identity`)."""
        have_store = self.core.layout.db_path.exists()
        kind = ports_kind()
        digest = digest_of(data)
        if have_store:
            found, value = self.core.store.fact(digest, kind)
            if found:
                return _claims_from_json(value)
        if doc:
            from ..validate.podfacts import doc_claims

            claims = doc_claims(doc)
        else:
            from ..validate.podfacts import may_claim_host_ports, port_claims

            # a file that cannot claim a host port is not decoded (a 10 MiB pod beside the one a
            # verb changes cost that verb a full decode: seconds and hundreds of MB)
            claims = port_claims(data) if may_claim_host_ports(data) else None
            if claims is not None and claims[1] and self._kubelet_never_runs(data):
                claims = (claims[0], [])  # a pod the kubelet never runs holds no port
        if have_store and self.core.lock_held:
            self.core.store.set_fact(digest, kind, _claims_to_json(claims))
        return claims

    def _kubelet_never_runs(self, data: bytes) -> bool:
        """Whether the kubelet refuses ``data`` or its pod fails admission on its own
        (:func:`staticpodd.validate.verdict.kubelet_refuses`): such a pod holds no host port, as
        ``validate DIR`` judges it too. Validates once per digest (the caller memoises)."""
        from ..validate import validate_bytes
        from ..validate.verdict import kubelet_refuses

        return kubelet_refuses(validate_bytes(data, "<live file>", self.gatekeeper.validate_options()))

    def live_port_claims(self, *, besides: str, ports: Iterable[tuple[str, int]] | None = None
                         ) -> list[tuple[str, tuple[str, str], list[Claim]]]:
        """``(file, (namespace, name), claims)`` for every live file but ``besides`` that defines
        a pod claiming host ports, in the kubelet's (sorted) order; non-UTF-8 names (shown with
        \\xNN escapes) and links to files count, as the kubelet reads them (docs/kubelet-contract.md "Which
        files are pods"). A file whose stat is what it was when its bytes were read is not read
        again (:meth:`VersionStore.live_identities_and_facts`, in one look: :meth:`one_look`).
        ``ports``: ``(protocol, port)`` pairs; when given, a file whose memoised claims hold none
        of them may be left out (its memo is not even decoded: one substring test per file)."""
        with self.gatekeeper.one_look():  # in a verb's look: the listing, stats and rows its duplicate check read
            return self._live_port_claims(besides, ports)

    def _live_port_claims(self, besides: str, ports: Iterable[tuple[str, int]] | None
                          ) -> list[tuple[str, tuple[str, str], list[Claim]]]:
        have_store = self.core.layout.db_path.exists()
        # file -> (sig, identity known, namespace, name, memoised claims as JSON text)
        cached = self.gatekeeper.looked_rows() if have_store else {}
        # a claim on (proto, port) is memoised as the JSON text '["TCP", 10259, ...' (json.dumps's
        # own separators, _claims_to_json): a memo without any of these texts claims none of them
        needles = None if ports is None else [json.dumps([p, n])[:-1] + "," for p, n in set(ports)]
        out: list[tuple[str, tuple[str, str], list[Claim]]] = []
        # the claims this call memoises go in one transaction, not one commit per file
        batch = (self.core.store.transaction() if have_store and self.core.lock_held and not self.core.store.readonly
                 else contextlib.nullcontext())
        with batch:
            for shown, path, tracked, sig in self.gatekeeper.live_others(besides):
                row = cached.get(shown) if tracked else None
                text = row[-1] if row is not None and sig is not None and sig == row[0] else None
                if text is None and tracked and have_store:
                    # not in the look's rows (e.g. written in the last two seconds, so no
                    # signature is stored), but this hold's scan hashed it: its memo by digest
                    digest = known_digest(self.core, shown, sig)
                    found, value = self.core.store.fact(digest, ports_kind()) if digest else (False, None)
                    text = json.dumps(value) if found else None
                if text is not None:
                    if needles is not None and not any(n in text for n in needles):
                        continue
                    claims = _claims_from_json(json.loads(text))
                else:
                    data = self.gatekeeper.live_bytes(path, tracked)
                    claims = self.port_claims(data) if data is not None else None
                if claims is not None and claims[1]:
                    out.append((shown, claims[0], claims[1]))
        return out

    def check_host_ports(self, fn: str, data: bytes, source: str, *, action: str, doc: Any = None) -> None:
        """Refuse ``data``, about to become the live file ``fn``, when it claims a host port that
        a pod of another live file already claims (the component's own live file ``fn`` is what
        the bytes replace: it never counts). Raises Conflict naming the port and protocol, the
        field (``path``/``line`` locate it in ``source``), the other file and its pod; its
        ``details`` carry them too. No ``--force``: the kubelet would reject one of the two pods
        at admission whatever staticpodd is told. Source: docs/kubelet-contract.md "What the kubelet refuses"
        (host ports); the rule is :func:`staticpodd.manifest.hostclaims.claims_clash`, the one
        ``validate DIR``'s ``host-port-conflict`` uses. ``doc``: ``data`` decoded (the gate's), if
        at hand."""
        mine = self.port_claims(data, doc)
        if mine is None or not mine[1]:
            return
        clashes = clashes_with(mine[0], mine[1],
                               self.live_port_claims(besides=fn, ports=[(c[0], c[1]) for c in mine[1]]))
        # of files defining one pod the kubelet runs the lexically last only: the others claim
        # nothing (docs/kubelet-contract.md "Duplicate names across files"; validate DIR judges so too)
        clashes = [c for c in clashes if not self._shadowed(c[1], c[2])]
        if not clashes:
            return
        # an admission rejection first: it is the one the kubelet reports on the pod
        clashes.sort(key=lambda c: not admission_clash(c[0], c[3]))
        (proto, port, _ip, field), other, okey, oclaim = clashes[0]
        line, column = _where(data, field)
        why = self.gatekeeper.why_not_parkable(other)
        more = {o for _c, o, _k, _oc in clashes[1:] if o != other}
        also = f" (and {', '.join(sorted(more))})" if more else ""
        verb = "unparking" if action == "unpark" else "putting it live"
        admission = admission_clash(clashes[0][0], oclaim)
        if admission:
            effect = (f"{verb} would leave pod {mine[0][0]}/{mine[0][1]} rejected at admission by the kubelet "
                      "(\"node(s) didn't have free ports for the requested pod ports\")")
        else:  # a port a flag names: admission does not see it, the bind fails
            effect = (f"{verb}, the kubelet would admit both pods (admission sees only declared ports) and "
                      "the second to start would fail to bind the port (its container restarts in a loop)")
        raise Conflict(
            f"{fn}: host port {port}/{proto} ({field}) is already claimed by pod {okey[0]}/{okey[1]} in {other}"
            f"{also}; {effect}",
            path=source, line=line, column=column, field=field,
            hint=(f"give {okey[0]}/{okey[1]} and {mine[0][0]}/{mine[0][1]} different host ports"
                  + (f"; or, if {other} is a leftover, move it out of the directory ({why}, so staticpodctl "
                     "cannot park it)" if why else
                     f"; or, if {okey[0]}/{okey[1]} is to stop, park it first: staticpodctl park {_q(other)}")),
            details={"code": "host-port-conflict" if admission else "host-port-bind-conflict",
                     "port": port, "protocol": proto, "field": field,
                     "other_file": other, "other_pod": f"{okey[0]}/{okey[1]}"},
        )


    def _shadowed(self, shown: str, key: tuple[str, str]) -> bool:
        """Whether live file ``shown`` (as :meth:`live_port_claims` names it) is not the file the
        kubelet runs for its pod ``key``: another live file defining that pod sorts after it."""
        others = self.gatekeeper.files_defining(key, besides=shown)
        return bool(others) and sorted([*others, shown])[-1] != shown


def _where(data: bytes, field: str) -> tuple[int | None, int | None]:
    """(line, column) of ``field`` in ``data`` (the ``Finding`` machinery's
    :func:`staticpodd.manifest.positions.locate`), (None, None) when it cannot be told."""
    from ..manifest.decoded import KUBELET_MAX_BYTES, DecodeProblem
    from ..manifest.decoding import decode
    from ..manifest.positions import locate

    try:
        return locate(decode(data, max_bytes=KUBELET_MAX_BYTES).positions, field)
    except DecodeProblem:
        return None, None


def _claims_to_json(claims: Claims) -> Any:
    return None if claims is None else [list(claims[0]), [list(c) for c in claims[1]]]


def _claims_from_json(value: Any) -> Claims:
    if value is None:
        return None
    (ns, name), ports = value
    return (ns, name), [(str(p), int(n), str(ip), str(f)) for p, n, ip, f in ports]
