"""The validation gate and the pod-identity checks: what decides whether bytes may enter.

:class:`Gatekeeper` runs :func:`staticpodd.validate.gate` with the configured options and caches
the verdict by digest; reads the pod (namespace/name) bytes define, cached too; and refuses
what would make the kubelet run something else than the operator meant: a second file
defining the same pod (docs/kubelet-contract.md "Duplicate names across files"), new bytes that turn a
component into another pod (docs/kubelet-contract.md "Identity and restarts"), a live file for a pod that is
parked under another component.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import Conflict, InvalidManifest
from ..journal import WARNING, Event
from ..layout import component_of
from ..store.versions import digest_of
from ..termsafe import printable_name
from .fsfacts import _sig_text, _stat_sig
from .known import known_digest, note_not_named, surely_not_named
from .model import _q

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

    from .core import EngineCore


#: Files up to this size are decoded for their pod identity (cached by digest: later verbs do not
#: read them); larger ones only when their bytes could name the pod (podfacts.may_name).
_DECODE_FOR_IDENTITY = 256 * 1024


class Gatekeeper:
    """The gate, the verdict and identity caches, and the identity and duplicate refusals.

    ``core``: the directory, store, configuration, journal and lock it works with.
    ``look_fact_kind``: the store ``facts`` kind the checks of one look read beside each live
    file's identity (:meth:`looked_rows`; the host-port claims,
    :func:`staticpodd.engine.hostports.ports_kind`), None for none.
    """

    #: How many verdicts :meth:`judge_recorded` keeps in memory (the oldest goes first).
    JUDGED_KEEP = 16

    def __init__(self, core: EngineCore, *, look_fact_kind: Callable[[], str] | None = None) -> None:
        self.core = core
        self._look_fact_kind = look_fact_kind
        #: (digest, options, node name) -> what :meth:`judge_recorded` found: ``(manifest, warnings)``
        #: or None (fails). Per engine; the daemon builds a new engine on every reload.
        self._judged: dict[tuple[str, Any, str], tuple[Any, list[Any]] | None] | None = None
        #: The live files with their stat signatures, listed once for the checks of one look at
        #: the directory (:meth:`one_look`); None outside one, or before its first listing.
        self._look: list[tuple[str, str, bool, str | None]] | None = None
        #: The store's rows for the live files in one look (:meth:`looked_rows`).
        self._look_rows: dict[str, tuple[str, bool, str | None, str | None, str | None]] | None = None
        self._looking = False

    # -- validation ---------------------------------------------------------------------------

    def validate_options(self) -> Any:
        """``staticpodd.validate.Options`` built from the configuration."""
        from ..validate import Options

        kw: dict[str, Any] = {}
        cfg = self.core.config
        if cfg is not None:
            for src, dst in (
                ("kubernetes_version", "kubernetes_version"),
                ("max_manifest_bytes", "max_bytes"),
                ("node_name", "node_name"),
            ):
                value = getattr(cfg, src, None)
                if value is not None:
                    kw[dst] = value
            cap = getattr(cfg, "node_capacity", None)
            if cap is not None:
                from ..validate.quantity import cpu_millis, memory_bytes, parse_quantity

                for src, dst, conv in (("cpu", "cpu_capacity_millis", cpu_millis),
                                       ("memory", "memory_capacity_bytes", memory_bytes)):
                    raw = cap.get(src) if isinstance(cap, dict) else getattr(cap, src, None)
                    q = parse_quantity(raw) if raw is not None else None
                    if q is not None:
                        kw[dst] = conv(q)
        return Options(**kw)

    def gate(self, data: bytes, display_path: str, *, component: str | None = None) -> tuple[Any, list[Any]]:
        """Run the validation gate (``staticpodd.validate.gate``) and cache the verdict.

        Returns ``(manifest, warnings)``. Raises InvalidManifest (nothing changed), after logging
        REFUSED_INVALID.
        """
        from ..resources import validator_id
        from ..validate import gate

        digest = digest_of(data)
        try:
            manifest, warnings = gate(data, display_path, self.validate_options())
        except InvalidManifest as exc:
            self.core.store.set_verdict(digest, validator_id(), False)
            # counted in staticpodd_refused_applies_total (metrics.store_counters)
            self.core.store.record_event("refused-invalid", component=component, file_name=None,
                                         actor=self.core.actor.name,
                                         details={"digest": digest,
                                                  "code": exc.findings[0].code if exc.findings else None})
            first = exc.findings[0] if exc.findings else None
            where = f" at line {exc.line}" if exc.line else ""
            what = f" ({first.code}{', ' + exc.field if exc.field else ''})" if first else ""
            from ..validate import kubelet_refuses  # two levels: say when only staticpodd refuses it

            ours = "" if kubelet_refuses(exc.findings) else " by staticpodd's own rules (the kubelet would run it)"
            self.core.log(  # codes, lines and field paths only: messages may quote values from the manifest
                Event.REFUSED_INVALID,
                f"refused {display_path}: not a valid static pod manifest{where}{what}{ours}",
                priority=WARNING,
                component=component,
                digest=digest,
                file=display_path,
                line=exc.line,
                field_path=exc.field,
                code=exc.findings[0].code if exc.findings else None,
            )
            raise
        self.cache_passed(digest, manifest)
        return manifest, warnings

    def cache_passed(self, digest: str, manifest: Any) -> None:
        """Cache that bytes ``digest`` pass the gate and define pod ``manifest`` (namespace, name),
        in one transaction. Both rows are caches (lost, they are computed again), so the commit
        is not synced on its own (:meth:`staticpodd.store.versions.VersionStore.relaxed`): an intent
        committed before the rename that follows, or the next checkpoint, makes it durable."""
        from ..resources import validator_id

        if self.core.store.readonly:
            return  # caches: a read-only store does without
        with self.core.store.relaxed():
            self.core.store.set_verdict(digest, validator_id(), True)
            self.core.store.set_identity(digest, (manifest.namespace, manifest.name))

    def judge_recorded(self, data: bytes, display_path: str) -> tuple[Any, list[Any]] | None:
        """The gate's verdict on recorded bytes that a restore may put back: ``(manifest,
        warnings)`` when they pass (``manifest`` carries name, namespace and digest, not the
        document), None when they fail. Nothing is logged (a restore walks back over invalid
        versions in silence).

        Kept in memory for this engine's life by (digest, validation options, node name), and
        in the store's verdict cache under :meth:`judged_key` (the validator's code, the
        options, the node's name and capacity: everything the verdict depends on), written only
        under the lock: a daemon that restores the same version again, also after a restart,
        does not validate it again, and :meth:`apply` given the verdict (``gated``) does not run
        the gate a second time. What a kept verdict cannot follow: the ``hostpath-missing``
        *warnings* look at paths on the host (they never decide whether bytes pass); one read
        back from the store carries no warnings.
        """
        from ..manifest.decoded import Manifest
        from ..validate import gate

        options = self.validate_options()
        digest = digest_of(data)
        key = (digest, options, options.resolved_node_name())
        memo = self._judged
        if memo is None:
            memo = self._judged = {}
        if key in memo:
            return memo[key]
        store = self.core.store if self.core.layout.db_path.exists() else None
        vkey = self.judged_key(options)
        kept = store.verdict(digest, vkey) if store is not None else None
        ident = store.identity(digest) if store is not None and kept else None
        found: tuple[Any, list[Any]] | None
        if kept is False:
            found = None
        elif kept and ident is not None and ident[0] is not None and ident[1] is not None:
            found = (Manifest({}, ident[1], ident[0], digest), [])
        else:
            try:
                manifest, warnings = gate(data, display_path, options)
            except InvalidManifest:
                found = None
            else:
                found = (Manifest({}, manifest.name, manifest.namespace, manifest.digest), warnings)
            if store is not None and self.core.lock_held and not store.readonly:
                with store.relaxed():  # a cache: made durable by the intent that follows, if any
                    store.set_verdict(digest, vkey, found is not None)
                    if found is not None:
                        store.set_identity(digest, (found[0].namespace, found[0].name))
        while len(memo) >= self.JUDGED_KEEP:
            del memo[next(iter(memo))]
        memo[key] = found
        return found

    @staticmethod
    def judged_key(options: Any) -> str:
        """The store's verdict-cache key of :meth:`judge_recorded`: a hash of the validator's
        code and schemas (:func:`staticpodd.resources.validator_id`), the validation options,
        and what they leave to the host (its node name, CPU and memory capacity: the node-fit
        check reads /proc when ``node_capacity`` is not set). Other keys than ``gate``'s own
        (:func:`validator_id` alone, which ``unpark`` trusts): a restore must judge by the
        options in force."""
        from ..resources import validator_id
        from ..validate.nodefit import node_capacity

        facts = (validator_id(), repr(options), options.resolved_node_name(), node_capacity(options))
        return "restore/" + digest_of(repr(facts).encode())[:32]

    def gate_ro(self, data: bytes, source: str) -> tuple[Any, list[Any]]:
        from ..validate import gate

        return gate(data, source, self.validate_options())

    def verdict(self, data: bytes, path: str, component: str) -> tuple[bool, list[Any]]:
        from ..validate import has_errors, validate_bytes

        findings = validate_bytes(data, path, self.validate_options())
        return (not has_errors(findings)), findings

    def pod_identity(self, data: bytes) -> tuple[str, str] | None:
        """``(namespace, name)`` of the pod these bytes define, None when not a readable Pod.

        Cached by digest in the store, so steady-state park/unpark never parse YAML for it. The
        cache is written only under the lock (read-only verbs such as ``apply --check`` write
        nothing).
        """
        digest = digest_of(data)
        have_store = self.core.layout.db_path.exists()
        cached = self.core.store.identity(digest) if have_store else None
        if cached is not None:
            ns, name = cached
            return (ns, name) if ns is not None and name is not None else None
        from ..manifest.decoding import pod_identity

        ident = pod_identity(data)
        if self.core.lock_held:
            self.core.store.set_identity(digest, ident)
        return ident

    def memo(self, kind: str, data: bytes, compute: Callable[[], Any]) -> Any:
        """``compute()`` for these bytes, memoised in the store by (digest, kind, release).

        For facts that depend only on the bytes and on this release's code (a JSON value).
        Without a store yet, it just computes.
        """
        if not self.core.layout.db_path.exists():
            return compute()
        from .. import __version__

        digest, key = digest_of(data), f"{kind}@{__version__}"
        found, value = self.core.store.fact(digest, key)
        if not found:
            value = compute()
            self.core.store.set_fact(digest, key, value)
        return value

    # -- which files define a pod ---------------------------------------------------------------

    def files_defining(self, ident: tuple[str, str], *, besides: str) -> list[str]:
        """Live files other than ``besides`` that define pod ``ident`` = (namespace, name), in the
        kubelet's (sorted) order; the last one is what the kubelet runs (docs/kubelet-contract.md "Duplicate
        names across files")."""
        from ..validate.podfacts import may_name

        out = []
        # one query for every live file's cached identity and stat signature, then one stat per
        # file: a file whose stat is what it was when its bytes were read is not read again
        have_store = self.core.layout.db_path.exists()
        cached = self.looked_rows() if self._looking and have_store else (
            self.core.store.live_identities() if have_store else {})
        # the identities this call caches go in one transaction, not one commit per file (the
        # first park on a node of 1,000 manifests made 1,000 commits)
        batch = (self.core.store.transaction() if have_store and self.core.lock_held and not self.core.store.readonly
                 else contextlib.nullcontext())
        with batch:
            for shown, path, tracked, sig in self.live_others(besides):
                row = cached.get(shown) if tracked else None
                if row is not None and row[1] and sig is not None and sig == row[0]:
                    if (row[2], row[3]) == ident:  # (None, None), not a Pod, never is
                        out.append(shown)
                    continue
                digest = known_digest(self.core, shown, sig) if tracked and have_store else None
                if digest is not None:  # bytes known by digest: what is cached of them may do
                    known = self.core.store.identity(digest)
                    if known is not None:
                        if known == ident:
                            out.append(shown)
                        continue
                    if surely_not_named(self.core, digest, ident[1]):
                        continue  # a big file already found not to name it: not even read
                data = self.live_bytes(path, tracked)
                if data is None:
                    continue
                if len(data) > _DECODE_FOR_IDENTITY and not may_name(data, ident[1]):
                    # surely another pod's (or none): a big file is not decoded (seconds and
                    # hundreds of MB for 10 MiB); a small one is, so its identity is cached by
                    # digest and later verbs need not read it at all. The answer is cached by
                    # digest: the next verb asking about this pod does not read the big file.
                    note_not_named(self.core, data, ident[1])
                    continue
                if self.pod_identity(data) == ident:
                    out.append(shown)
        return out

    def looked_rows(self) -> dict[str, tuple[str, bool, str | None, str | None, str | None]]:
        """In a look (:meth:`one_look`): each live file's ``(sig, identity known, namespace,
        name, fact)`` from the store, one query for all the checks of the look
        (:meth:`VersionStore.live_identities_and_facts`)."""
        if self._look_rows is None:
            kind = self._look_fact_kind() if self._look_fact_kind is not None else None
            if kind is None:
                self._look_rows = {k: (*v, None) for k, v in self.core.store.live_identities().items()}
            else:
                self._look_rows = self.core.store.live_identities_and_facts(kind)
        return self._look_rows

    @contextlib.contextmanager
    def one_look(self) -> Iterator[None]:
        """Within it, the checks of new bytes against the other live files (duplicates, host
        ports: :meth:`files_defining`, ``live_port_claims``) share one listing and one stat per
        file, taken by the first of them (each verb costs one stat per file, not one
        per check). Re-entrant; a new look lists and stats again."""
        if self._looking:
            yield
            return
        self._looking = True
        try:
            yield
        finally:
            self._looking, self._look, self._look_rows = False, None, None

    def live_others(self, besides: str) -> Iterator[tuple[str, str, bool, str | None]]:
        """``(shown, path, tracked, sig)`` for every file the kubelet reads in the manifest
        directory but ``besides``, in its (sorted) order, then the non-UTF-8 names
        (:attr:`untrackable`, ``shown`` with \\xNN escapes, ``tracked`` False: the store never
        keys them). Files and links to files, a file named like another file's component too
        (no component, untracked, but the kubelet runs it). ``sig``: a tracked file's stat
        signature as text (``_sig_text``; None: gone, or untracked), to compare with the one its
        cached facts were read with. docs/kubelet-contract.md "Which files are pods"."""
        entries = self._look if self._looking else None
        if entries is None:
            entries = self._live_entries()
            if self._looking:
                self._look = entries
        for entry in entries:
            if not (entry[2] and entry[0] == besides):
                yield entry

    def _live_entries(self) -> list[tuple[str, str, bool, str | None]]:
        base = os.path.join(self.core.layout.manifest_dir, "")
        out: list[tuple[str, str, bool, str | None]] = []
        for other in self.core.listed(self.core.layout.manifest_dir, files_only=True):
            sig = _stat_sig(base + other)
            out.append((other, base + other, True, _sig_text(sig) if sig is not None else None))
        mdir = str(self.core.layout.manifest_dir)
        for odd in sorted(self.core.untrackable):
            path = Path(odd)
            if str(path.parent) == mdir and path.is_file():
                out.append((printable_name(path.name), odd, False, None))
        return out

    def live_bytes(self, path: str, tracked: bool) -> bytes | None:
        """The bytes of a file :meth:`live_others` yields, None when it cannot be read (gone)."""
        if tracked:
            st = self.core.state_at("live", os.path.basename(path))
            return st.data if st is not None else None
        try:
            return Path(path).read_bytes()
        except OSError:
            return None

    def _is_untrackable_display(self, shown: str) -> bool:
        """Whether ``shown`` (as :meth:`files_defining` lists it) is a non-UTF-8 file name."""
        return any(printable_name(Path(u).name) == shown for u in self.core.untrackable)

    def why_not_parkable(self, shown: str) -> str | None:
        """Why staticpodctl cannot park the live file ``shown`` (as :meth:`files_defining` lists
        it): its name is not UTF-8, or it is another file's component (:meth:`name_owner`); None
        when it can."""
        if self._is_untrackable_display(shown):
            return "its name is not UTF-8"
        owner = self.core.name_owner(shown)
        return None if owner is None else f"its name is the component {shown} of {owner}"

    def check_no_duplicate(self, file_name: str, namespace: str, name: str) -> None:
        """Refuse a manifest whose pod another live file already defines (docs/kubelet-contract.md "Duplicate
        names across files": the lexically last file wins, the other never takes effect)."""
        others = self.files_defining((namespace, name), besides=file_name)
        if others:
            winner = sorted(others + [file_name])[-1]
            why = self.why_not_parkable(others[0])
            raise Conflict(
                f"{', '.join(others)} also define{'s' if len(others) == 1 else ''} pod {namespace}/{name}; "
                f"the kubelet runs only the lexically last file ({winner})",
                path=str(self.core.layout.manifest_dir / others[0]),
                hint=(f"move {others[0]} out of the directory ({why}, so staticpodctl cannot park it)" if why else
                      f"park the other file first: staticpodctl park {_q(others[0])}"
                      + ("" if component_of(others[0]) == others[0] else " --force")),
            )

    def current_identity(self, comp: str, cur: bytes | None) -> tuple[str, str] | None:
        """The pod ``comp`` stands for: its current file's, or when that does not parse (or is
        gone) its newest recorded version's that does. None for a component never recorded."""
        ident = self.pod_identity(cur) if cur is not None else None
        if ident is not None or not self.core.layout.db_path.exists():
            return ident
        seen: set[str] = set()
        for v in reversed(self.core.store.history(comp)):
            if v.digest in seen:
                continue
            seen.add(v.digest)
            ident = self.pod_identity(self.core.store.data(v.digest))
            if ident is not None:
                return ident
        return None

    def check_identity_kept(self, comp: str, fn: str, cur: bytes | None, namespace: str, name: str,
                             action: str) -> None:
        """Refuse bytes that turn ``comp`` into another pod (see :meth:`apply`)."""
        old = self.current_identity(comp, cur)
        if old is None or old == (namespace, name):
            return
        hint = "if that is what you mean, add --rename"
        if action == "apply" and name != comp:
            hint += f"; to add {name} as a pod of its own, apply it under its own name (--as {name})"
        raise Conflict(
            f"{comp} is pod {old[0]}/{old[1]}; the new manifest defines pod {namespace}/{name}: the kubelet "
            f"would stop {old[0]}/{old[1]} and start {namespace}/{name} in its place",
            path=str(self.core.layout.manifest_dir / fn),
            hint=hint,
        )

    def check_not_parked_elsewhere(self, comp: str, namespace: str, name: str, cur: bytes | None) -> None:
        """Refuse a live file whose pod is parked under another component (see :meth:`apply`).
        Not when ``cur`` (the component's current bytes) already runs that pod, nor for a parked
        leftover (``kube-scheduler.yaml.bak``, parked to remove a duplicate)."""
        if cur is not None and self.pod_identity(cur) == (namespace, name):
            return
        for other in self.core.parked_names():
            other_comp = self.core.component_for(other)
            if other_comp == comp or component_of(other) == other:
                continue
            st = self.core.state_at("parked", other)
            if st is not None and self.pod_identity(st.data) == (namespace, name):
                raise Conflict(
                    f"pod {namespace}/{name} is parked (component {other_comp}); a live file of component {comp} "
                    "defining it would start it again behind the park",
                    path=str(self.core.path("parked", other)),
                    hint=f"to change the parked pod: staticpodctl apply FILE --as {other_comp}; "
                    f"to start it: staticpodctl unpark {_q(other_comp)}",
                )
