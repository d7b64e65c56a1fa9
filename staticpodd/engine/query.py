"""The read-only verbs: ``history``, ``show``, ``diff`` and ``status``.

:class:`Query` reads the store and the directory and changes nothing: no lock, no
writes (``status`` runs even with a broken or busy daemon, and on a node with no store yet).
"""

from __future__ import annotations

import stat

from ..errors import FsError, UnknownComponent
from ..layout import component_of
from ..store.versions import Version, digest_of
from ..termsafe import printable_name
from .fsfacts import _is_tool_tempfile, _sig_text, _stat_sig, pid_alive, refused_link
from .model import split_at, unified_diff

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

    from .core import EngineCore


class Query:
    """``history``, ``show``, ``diff`` and ``status``, over ``core`` (the directory and the store)."""

    def __init__(self, core: EngineCore) -> None:
        self.core = core

    # -- read-only verbs ---------------------------------------------------------------------------

    def history(self, name: str, *, limit: int | None = None) -> tuple[str, list[Version]]:
        """``(component, versions oldest first)``. Raises UnknownComponent."""
        target = self.core.resolve(name)
        versions = self.core.store.history(target.component, limit=limit) if self.core.layout.db_path.exists() else []
        return target.component, versions

    def show(self, spec: str) -> tuple[Version | None, bytes, str]:
        """Bytes of ``component@seq`` (or the current file for a bare name): ``(version, bytes, label)``.

        Raises UnknownComponent, UnknownVersion, UsageError.
        """
        comp_name, seq = split_at(spec)
        if seq is None:
            target, data, loc = self.core.current_bytes(comp_name, for_display=True)
            head = self.core.store.head(target.component) if self.core.layout.db_path.exists() else None
            v = head if head is not None and head.digest == digest_of(data) else None
            return v, data, f"{target.file_name} ({loc})"
        target = self.core.resolve(comp_name)
        v = self.core.store.get(target.component, seq)
        return v, self.core.store.data(v.digest), f"{target.component}@{seq}"

    def diff(self, name: str, a: int | None = None, b: int | None = None) -> str:
        """Unified diff between versions ``a`` and ``b`` (``b`` None: the current file; both None:
        the newest version against the current file, which shows drift). Raises UnknownVersion."""
        target = self.core.resolve(name)
        comp = target.component
        if a is None:
            head = self.core.store.head(comp)
            if head is None:
                raise UnknownComponent(f"{comp} has no recorded version", hint="nothing to compare with yet")
            a = head.seq
        va = self.core.store.get(comp, a)
        da = self.core.store.data(va.digest)
        if b is None:
            try:
                _, db, loc = self.core.current_bytes(comp, for_display=True)
                label_b = f"{target.file_name} ({loc})"
            except UnknownComponent:
                db, label_b = None, "(no file)"
        else:
            vb = self.core.store.get(comp, b)
            db = self.core.store.data(vb.digest)
            label_b = f"{comp}@{b}"
        return unified_diff(da, db, f"{comp}@{a}", label_b)

    def recorded_digest(self, loc: str, file_name: str, known: dict[str, tuple[str, str]]) -> tuple[str, int] | None:
        """``(digest, permission bits)`` of the file at ``loc`` (``live``/``parked``) without reading
        it, when ``known`` (:meth:`VersionStore.sig_digests`) has the stat signature its recorded
        bytes were read with and the file's stat is still that signature (a scan trusts the same
        fact: git's racy rule is kept when the signature is stored, fsfacts._RACY_NS). None: read it."""
        hit = known.get(f"{loc}/{file_name}")
        if hit is None:
            return None
        sig = _stat_sig(self.core.path(loc, file_name))
        if sig is None or _sig_text(sig) != hit[0]:
            return None
        return hit[1], stat.S_IMODE(sig[4])

    def current_digest(self, name: str) -> tuple[str, str]:
        """``(digest, location)`` of a component's file as it is now (live, else parked), from its
        stat signature when that is unchanged (:meth:`recorded_digest`), else from its bytes.
        Raises UnknownComponent when it has no file."""
        target = self.core.resolve(name)
        if self.core.layout.db_path.exists():
            keys = [f"{loc}/{target.file_name}" for loc, there in (("live", target.live), ("parked", target.parked))
                    if there]
            known = self.core.store.sig_digests(keys) if keys else {}
            for loc in ("live", "parked"):
                if f"{loc}/{target.file_name}" in keys and (hit := self.recorded_digest(loc, target.file_name, known)):
                    return hit[0], loc
        _, data, loc = self.core.current_bytes(name)
        return digest_of(data), loc

    def _names_taken_rows(self) -> list[dict[str, Any]]:
        """:attr:`names_taken` as of the last listing, for ``status``: live ones first."""
        rows = []
        for (loc, fn), owner in sorted(self.core.names_taken.items(), key=lambda kv: (kv[0][0] != "live", kv[0][1])):
            reason, fix = self.core.taken_reason(fn, owner)
            rows.append({"file_name": fn, "location": loc, "component": fn, "owner": owner, "reason": reason,
                         "hint": fix})
        return rows

    def status(self) -> dict[str, Any]:
        """Every component with its state (``live``, ``parked``, ``missing`` = parked copy gone,
        ``removed`` = recorded but no longer in the directory), newest version, digest
        of its current bytes, drift, park record, plus interrupted operations and the files that
        are no component (``untrackable``, ``names_taken``, ``links_not_recorded``). Read-only: takes
        no lock and writes nothing. Shape: ``{"manifest_dir", "components": [...], "interrupted": n}``.
        """
        self.core.check_manifest_dir()
        have_store = self.core.layout.db_path.exists()
        store = self.core.store if have_store else None
        live = self.core.live_names()
        parked = self.core.parked_names()
        rows: dict[str, dict[str, Any]] = {}
        parks = {p.component: p for p in store.parks()} if store else {}
        known = store.sig_digests() if store else {}  # files whose stat says they hold recorded bytes
        for loc, pool in (("live", live), ("parked", parked)):
            for fn in pool:
                comp = self.core.component_for(fn)
                if comp in rows and rows[comp]["state"] == "live":
                    continue
                head = store.head(comp) if store else None
                fast = self.recorded_digest(loc, fn, known) if head is not None else None
                digest: str | None
                mode: int | None
                if fast is not None:
                    digest, mode = fast
                else:
                    try:
                        st = self.core.state_at(loc, fn)
                    except FsError:
                        st = None
                    if loc == "live" and st is not None and head is None and (why := refused_link(st)) is not None:
                        # a link to a secret or other non-manifest: named, not a row
                        self.core.links_not_recorded[fn] = why
                        continue
                    digest = digest_of(st.data) if st else None
                    mode = st.mode if st else None
                rows[comp] = {
                    "component": comp,
                    "file_name": fn,
                    "state": loc,
                    "version": head.seq if head else None,
                    "digest": digest,
                    "drift": head is None or head.digest != digest,
                    "mode": f"{mode:04o}" if mode is not None else None,
                    "stray": component_of(fn) == fn,
                    "parked": parks[comp].to_dict() if comp in parks else None,
                }
                if loc == "live" and comp in parks:
                    if fn in parked:  # both copies: someone wrote it back while parked
                        rows[comp]["park_broken"] = True
                    else:  # the parked copy was moved back by hand: effectively unparked
                        rows[comp]["unparked_by_hand"] = True
        if store is not None:
            for comp in store.components():
                if comp in rows or comp in parks:
                    continue
                last = store.events(comp, limit=1)
                if last and last[-1]["kind"] == "quarantined":
                    continue  # a stray the daemon moved out on purpose
                head = store.head(comp)
                assert head is not None
                if _is_tool_tempfile(head.file_name):
                    continue  # a sed/salt/puppet temp file that was renamed into place: not a component
                rows[comp] = {"component": comp, "file_name": head.file_name, "state": "removed",
                              "version": head.seq, "digest": None, "drift": False, "mode": None,
                              "stray": component_of(head.file_name) == head.file_name, "parked": None}
        for comp, p in parks.items():
            if comp not in rows:
                head = store.head(comp) if store else None
                rows[comp] = {"component": comp, "file_name": p.file_name, "state": "missing",
                              "version": head.seq if head else None, "digest": None, "drift": True,
                              "mode": None, "stray": False, "parked": p.to_dict()}
        stopped = [i for i in store.intents() if not pid_alive(i.pid)] if store else []
        for i in stopped:  # its drift is the operation's half-done work, not someone else's edit
            if i.component in rows:
                rows[i.component]["interrupted"] = i.op
        return {
            "manifest_dir": str(self.core.layout.manifest_dir),
            "components": [rows[k] for k in sorted(rows)],
            # files the kubelet reads but staticpodd cannot track (names not valid UTF-8)
            "untrackable": sorted(printable_name(n) for n in self.core.untrackable),
            # files named like another file's component (kube-scheduler beside kube-scheduler.yaml):
            # no component, not tracked; the kubelet reads a live one
            "names_taken": self._names_taken_rows(),
            # live symlinks to files that are not pod manifests: the kubelet refuses them; not recorded
            "links_not_recorded": [{"file_name": printable_name(n), "reason": why}
                                   for n, why in sorted(self.core.links_not_recorded.items())],
            # intents whose process is gone: a live pid is an operation still under way
            "interrupted": len(stopped),
        }
