"""The drift scan and adoption: recording what someone else wrote, before anything changes.

:class:`Scanner` compares the directory (live files and parked copies) with what was last
observed and records every difference as the work of ``external``: new bytes become versions,
removals, moves and mode changes become events; a fresh store adopts what is there. A file
whose stat signature is unchanged since its bytes were read is not read again. Also here:
reading a file "settled" (its bytes recorded) before a verb judges it, the refusal for a write
that landed between judging and renaming, and ``quarantine`` (moving a stray out of sight).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from ..errors import ChangedMeanwhile, FsError, StaticpodError, UnknownComponent
from ..journal import INFO, WARNING, Event
from ..node import fsops
from ..store.versions import Observed, digest_of
from ..termsafe import printable_name
from .fsfacts import _RACY_NS, _sig_text, _stat_sig, refused_link, wanted_all
from .known import remember_read
from .model import EXTERNAL, Change, _mode_dict, _q

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from .core import EngineCore, Guard
    from .gate import Gatekeeper


class Scanner:
    """``scan`` (drift and adoption), ``quarantine``, and the settled read and changed-meanwhile
    refusal the changing verbs use.

    ``core``: the directory, store and journal; ``gatekeeper``: the verdict a validating scan
    gives each change; ``guard``: the flock ``quarantine`` takes (``scan`` runs under its
    caller's).
    """

    def __init__(self, core: EngineCore, gatekeeper: Gatekeeper, guard: Guard) -> None:
        self.core = core
        self.gatekeeper = gatekeeper
        self.guard = guard

    # -- drift / scan ---------------------------------------------------------------------------

    def scan(self, names: Iterable[str] | None = None, *, validate: bool = False, log: bool = True,
             synced: bool = True) -> list[Change]:
        """Compare the directory (live files and parked copies) with the last observed state and
        record every difference as the work of someone else (actor ``external``).

        ``names``: file names to look at (default: everything). New bytes become versions
        (action ``external``); removals, moves and mode changes become events. With ``validate``,
        new live bytes are run through the gate and the verdict is returned in each Change.
        ``log=False``: do not journal DRIFT_RECORDED (the daemon logs its own EXTERNAL_* entries).
        Caller must hold the lock (``with engine.locked()``). Returns the changes, in file order.
        Everything one scan records is one transaction (one commit, however many files changed:
        adopting a node's directory is linear), and the directory is listed once per scan.
        ``synced=False``: that commit has no fsync of its own (:meth:`VersionStore.relaxed`), for
        the daemon's restore on a writer's close: what it records is still on disk, and the
        restore's intent, committed synced before its rename, makes the record durable first.
        """
        self.core.listing = None
        try:
            if self.core.store.readonly:
                return self._scan(names, validate=validate, log=log)
            with self.core.store.transaction() if synced else self.core.store.relaxed():
                return self._scan(names, validate=validate, log=log)
        finally:
            self.core.listing = None

    def _scan(self, names: Iterable[str] | None, *, validate: bool, log: bool) -> list[Change]:
        store = self.core.store
        observed = store.observed()
        live = self.core.live_names()
        parked = self.core.parked_names()
        self.core.listing = live + parked  # component_for's siblings, for the rest of this scan
        for odd in sorted(self.core.untrackable - self.core.untrackable_logged):
            self.core.untrackable_logged.add(odd)
            self.core.log(Event.DIRECTORY_PROBLEM, f"{printable_name(odd)}: file name is not valid UTF-8; the kubelet "
                           "reads it but its versions cannot be recorded (rename it)", priority=WARNING,
                           file_name=printable_name(Path(odd).name), kind="name-not-utf8")
        self._log_names_taken()
        wanted = None if names is None else set(names)
        keys: dict[str, tuple[str, str]] = {}
        # stat signatures of the files whose bytes were read and recorded (a full scan reads no
        # unchanged file: _stat_sig); the ones this scan reads are stored at its end
        sigs = store.sigs() if wanted_all(names) else {}
        read_sigs: list[tuple[str, str, str]] = []
        for loc, pool in (("live", live), ("parked", parked)):
            for fn in pool:
                keys[f"{loc}/{fn}"] = (loc, fn)
        for key, seen in observed.items():
            if (seen.location, seen.file_name) not in self.core.names_taken:  # no component: never read
                keys.setdefault(key, (seen.location, seen.file_name))
        # A fresh store adopts what is there: recorded like any other change, logged at info.
        adopting = not observed and not store.components()
        changes: list[Change] = []
        actual: dict[str, fsops.FileState | None] = {}
        read_digests: dict[str, tuple[str, str]] = {}  # key -> (stat signature before the read, digest)
        # stat by plain string paths: a Path object per file costs more than the stat itself
        base = {"live": os.path.join(self.core.layout.manifest_dir, ""),
                "parked": os.path.join(self.core.layout.parked_dir, "")}
        for key, (loc, fn) in sorted(keys.items(), key=lambda kv: (kv[1][1], kv[1][0])):
            if wanted is not None and fn not in wanted:
                continue
            sig = _stat_sig(base[loc] + fn) if key in observed else None  # taken before any read
            if wanted is None and sig is not None and sigs.get(key) == _sig_text(sig):
                if loc == "live":  # the checks across files need not read it either
                    remember_read(self.core, fn, sigs[key], observed[key].digest)
                continue  # same stat as when its bytes were last read and recorded: unchanged
            if self._too_large(key, loc, fn, observed, changes):
                continue
            if sig is None:
                sig = _stat_sig(base[loc] + fn)
            try:
                actual[key] = self.core.state_at(loc, fn)
            except FsError:
                actual[key] = None
            st_read = actual[key]
            if loc == "live" and st_read is not None and self._link_not_recorded(fn, st_read):
                del actual[key]
                continue
            if sig is not None and st_read is not None:
                read_digests[key] = (_sig_text(sig), digest_of(st_read.data))  # one hash of each file read
                if time.time_ns() - sig[-1] > _RACY_NS:
                    read_sigs.append((read_digests[key][0], key, read_digests[key][1]))
        for key, st in actual.items():
            loc, fn = keys[key]
            if st is not None:
                sig_digest = read_digests.get(key)
                if loc == "live" and sig_digest is not None:
                    remember_read(self.core, fn, *sig_digest)
                found = self._record_present(key, loc, fn, st, observed, actual, adopting=adopting,
                                             validate=validate, log=log,
                                             digest=sig_digest[1] if sig_digest is not None else None)
            else:
                found = self._record_gone(key, loc, fn, observed, actual, log=log)
            if found is not None:
                changes.append(found)
        self._store_sigs(read_sigs)
        return changes

    def _record_present(self, key: str, loc: str, fn: str, st: fsops.FileState, observed: dict[str, Observed],
                        actual: dict[str, fsops.FileState | None], *, adopting: bool, validate: bool,
                        log: bool, digest: str | None = None) -> Change | None:
        """Record what a scan found at ``key`` (``loc``/``fn``: its bytes ``st``, read now) that
        differs from what was observed there: new bytes as a version by ``external`` (an event
        when they are the newest version already), a mode change as an event; a move between
        live and parked (``actual``: everything this scan read), a park broken or ended by hand.
        ``digest``: of ``st.data`` when the scan hashed it already. Returns the change, None when
        nothing changed."""
        store = self.core.store
        obs = observed.get(key)
        # a path seen before keeps the component it was recorded under (no store queries)
        comp = obs.component if obs is not None else self.core.component_for(fn)
        other_key = f"{'parked' if loc == 'live' else 'live'}/{fn}"
        digest = digest if digest is not None else digest_of(st.data)
        if obs is not None and obs.digest == digest:
            if (obs.mode, obs.uid, obs.gid) == (st.mode, st.uid, st.gid):
                return None
            store.record_event(
                "mode-changed", component=comp, file_name=fn, actor=EXTERNAL,
                details={"location": loc, "before": _mode_dict(obs), "after": _mode_dict(st)},
            )
            self.core.set_observed(comp, fn, loc, digest, st)
            return Change(comp, fn, loc, "mode-changed", digest)
        head = store.head(comp)
        moved_from = observed.get(other_key)
        if obs is None and moved_from is not None and moved_from.digest == digest and actual.get(
            other_key, "absent"
        ) is None:
            kind = "moved-in" if loc == "live" else "moved-out"
        elif obs is None:
            kind = "created"
        else:
            kind = "modified" if loc == "live" else "parked-copy-edited"
        park = store.park_of(comp)
        if loc == "live" and park is not None:
            parked_st = actual.get(other_key) if other_key in actual else self.core.state_at("parked", fn)
            if parked_st is not None:
                kind = "park-broken"
            else:
                kind = "unparked-by-hand"
                store.clear_park(comp)
        if adopting:
            kind = "adopted"
        version = None
        if head is None or head.digest != digest:
            version = store.record(
                comp, fn, st.data, action="external", actor=EXTERNAL,
                reason="first seen (adopted)" if kind == "adopted" else f"found {kind}",
                mode=st.mode, uid=st.uid, gid=st.gid, location=loc,
            ).seq
        else:
            store.record_event(kind, component=comp, file_name=fn, actor=EXTERNAL,
                               details={"location": loc, "digest": digest})
        self.core.set_observed(comp, fn, loc, digest, st)
        ch = Change(comp, fn, loc, kind, digest, version)
        if validate and loc == "live":
            ch.valid, ch.findings = self.gatekeeper.verdict(st.data, str(self.core.layout.manifest_dir / fn), comp)
        if not log:
            pass
        elif adopting:
            self.core.log(Event.DRIFT_RECORDED, f"{fn}: adopted as version {version}", priority=INFO,
                          component=comp, file_name=fn, version=version, digest=digest, kind=kind,
                          location=loc, actor=EXTERNAL)
        else:
            self.core.log(
                Event.DRIFT_RECORDED,
                f"{fn}: {kind} by someone else" + (f", recorded as version {version}" if version else ""),
                priority=WARNING, component=comp, file_name=fn, version=version, digest=digest,
                kind=kind, location=loc, actor=EXTERNAL,
            )
        return ch

    def _record_gone(self, key: str, loc: str, fn: str, observed: dict[str, Observed],
                     actual: dict[str, fsops.FileState | None], *, log: bool) -> Change | None:
        """Record that the file observed at ``key`` (``loc``/``fn``) is gone: removed (a parked
        copy removed by hand keeps its park), unless it moved to the other location with the same
        bytes (reported there). Returns the change, None when there is none to report."""
        store = self.core.store
        obs = observed.get(key)
        if obs is None:
            return None
        comp = obs.component
        moved = actual.get(f"{'parked' if loc == 'live' else 'live'}/{fn}")
        if moved is not None and digest_of(moved.data) == obs.digest:
            store.clear_observed(key)
            return None  # reported as moved-in/moved-out at the other location
        # A parked copy removed by hand keeps its park (and deadline): the pod stays stopped,
        # `unpark` puts the newest version back live, `rollback` as the parked copy.
        kind = "removed" if loc == "live" else "parked-copy-removed"
        store.record_event(kind, component=comp, file_name=fn, actor=EXTERNAL,
                           details={"location": loc, "digest": obs.digest})
        store.clear_observed(key)
        if loc == "parked" and store.park_of(comp) is None:
            return None  # no park to stand: e.g. it just ended by a hand write-back (reported above)
        if log:
            self.core.log(
                Event.DRIFT_RECORDED, f"{fn}: {kind} by someone else", priority=WARNING,
                component=comp, file_name=fn, digest=obs.digest, kind=kind, location=loc, actor=EXTERNAL,
            )
        return Change(comp, fn, loc, kind, obs.digest)

    def _log_names_taken(self) -> None:
        """Journal each file :attr:`names_taken` holds once while it stays so (DIRECTORY_PROBLEM,
        kind ``name-taken``): its name is another file's component, so it is not tracked. Said
        again if it comes back after the name was free (a collision is a state)."""
        now = {(loc, fn, owner) for (loc, fn), owner in self.core.names_taken.items()}
        for loc, fn, owner in sorted(now - self.core.taken_logged):
            reason, fix = self.core.taken_reason(fn, owner)
            where = "the kubelet reads it but" if loc == "live" else "a file in the parked directory:"
            self.core.log(Event.DIRECTORY_PROBLEM, f"{fn}: {reason}; {where} staticpodd does not track it ({fix})",
                           priority=WARNING, file_name=fn, location=loc, owner=owner, kind="name-taken")
        self.core.taken_logged = now

    def _link_not_recorded(self, fn: str, st: fsops.FileState) -> bool:
        """True (and journaled once, DIRECTORY_PROBLEM kind ``symlink-not-recorded``) when live
        ``fn`` is a symlink whose bytes the kubelet refuses to decode as a pod: its target is not a
        manifest (``/etc/shadow``, a kubeconfig with its private key), so its bytes are never copied
        into the version store. The kubelet follows the link, fails to decode the file and runs
        nothing from it (docs/kubelet-contract.md "Which files are pods"); ``status`` and
        ``doctor`` name it. A link to a real manifest is recorded."""
        why = refused_link(st)
        if why is None:
            return False
        if fn not in self.core.links_not_recorded:
            self.core.log(Event.DIRECTORY_PROBLEM, f"{printable_name(fn)}: a symlink to a file that is not a pod "
                           f"manifest ({why}); the kubelet follows it and refuses it at every relist, so nothing runs "
                           "from it; its bytes are not recorded (remove the link)",
                           priority=WARNING, file_name=printable_name(fn), kind="symlink-not-recorded")
        self.core.links_not_recorded[fn] = why
        return True

    def _store_sigs(self, read_sigs: list[tuple[str, str, str]]) -> None:
        if read_sigs and not self.core.store.readonly:
            self.core.store.set_sigs(read_sigs)

    def scan_before_change(self, file_name: str) -> list[Change]:
        """Record drift before a change, of the whole directory (live files and parked copies):
        without the daemon this is the only moment a hand edit to any manifest gets recorded, so
        nothing anyone wrote is lost. Only records: a file caught half-written by another writer
        becomes a version of its own, and its finished bytes the next one. ``file_name`` is the
        file being changed (kept for the callers' symmetry; it is scanned with the rest)."""
        del file_name
        return self.scan(None)

    def _too_large(self, key: str, loc: str, fn: str, observed: dict[str, Observed], changes: list[Change]) -> bool:
        """A file over the kubelet's 10 MB cap (docs/kubelet-contract.md "Which files are pods") is never read
        into the store: it is recorded once as a ``too-large`` event (size only). Returns True
        when the file was handled so."""
        try:
            size = os.stat(self.core.path(loc, fn)).st_size
        except OSError:
            return False
        if size <= fsops.KUBELET_MAX_BYTES:
            return False
        marker = f"too-large:{size}"
        obs = observed.get(key)
        if obs is None or obs.digest != marker:
            comp = self.core.component_for(fn)
            self.core.store.record_event("too-large", component=comp, file_name=fn, actor=EXTERNAL,
                                         details={"location": loc, "size": size})
            self.core.store.set_observed(Observed(comp, fn, loc, marker, None, None, None))
            changes.append(Change(comp, fn, loc, "too-large", None))
            self.core.log(Event.DRIFT_RECORDED, f"{fn}: {size} bytes, over the kubelet's 10 MB limit; not recorded",
                           priority=WARNING, component=comp, file_name=fn, kind="too-large", size=size, actor=EXTERNAL)
        return True

    # -- a file that may change under us ----------------------------------------------------------

    def settled_state(self, comp: str, loc: str, fn: str, action: str) -> fsops.FileState | None:
        """The file at ``loc``/``fn`` as it is now, with its bytes recorded: the drift scan ran just
        before, and a write between that scan and this read is scanned (recorded) again, so the
        digest a changing verb judges, and compares right before its rename, is always one that
        is in history. Raises ChangedMeanwhile when the file will not hold still (five reads)."""
        key = f"{loc}/{fn}"
        for _ in range(5):
            st = self.core.state_at(loc, fn)
            obs = self.core.store.observed().get(key)
            if st is None:
                if obs is None:
                    return None
            elif obs is not None and (obs.digest == digest_of(st.data) or obs.digest.startswith("too-large:")):
                return st
            elif obs is None and self.core.store.knows_digest(comp, digest_of(st.data)):
                return st
            self.scan([fn])
        raise ChangedMeanwhile(
            f"{fn} keeps changing while {action} tries to read it (another writer is at work); nothing was changed",
            path=str(self.core.path(loc, fn)), hint=f"wait for the other writer, then run the {action} again")

    def changed_meanwhile(self, comp: str, fn: str, loc: str, action: str, judged: str | None, refused: str,
                           now: fsops.FileState | None) -> ChangedMeanwhile:
        """Record the write that landed between judging and renaming (as drift, actor external)
        and build the refusal naming both versions."""
        judged_seq = next((v.seq for v in reversed(self.core.store.history(comp)) if v.digest == judged), None)
        self.scan([fn])
        after = self.core.store.head(comp)
        path = str(self.core.path(loc, fn))
        moving = action in ("park", "unpark")
        what = action if moving else f"{action} of {refused[:12]}"
        tail = "nothing was moved" if moving else "your manifest was not put in place"
        if now is None:
            msg = (f"{fn} was removed by someone else while the {what} was running (after it was judged, "
                   f"before the rename); {'nothing was moved' if moving else 'nothing was put in place'}")
            hint = f"see: staticpodctl history {_q(comp)}; run the {action} again to put it back"
            rec = None
        else:
            rec = after.seq if after is not None and after.digest != judged else None
            shown = after.digest if after is not None and rec is not None else digest_of(now.data)
            msg = (f"{fn} changed while the {what} was running (someone else wrote it after it was judged as "
                   f"version {judged_seq if judged_seq is not None else '-'}, before the rename): that write is "
                   f"recorded as version {rec if rec is not None else '?'} ({shown[:12]}); "
                   f"{tail}")
            hint = (f"see what changed: staticpodctl diff {_q(comp)} {judged_seq} {rec}; then run the {action} "
                    "again to replace it" if judged_seq is not None and rec is not None else
                    f"see: staticpodctl history {_q(comp)}; then run the {action} again")
        self.core.log(Event.DRIFT_RECORDED, f"{comp}: {action} refused: {fn} changed after it was judged",
                       priority=WARNING, component=comp, file_name=fn, version=rec, digest=refused,
                       previous_digest=judged, kind="changed-meanwhile", action=action)
        return ChangedMeanwhile(msg, path=path, hint=hint,
                                details={"judged_version": judged_seq, "recorded_version": rec,
                                         "refused_digest": refused, "judged_digest": judged})

    # -- quarantine ------------------------------------------------------------------------------

    def quarantine(self, file_name: str, *, reason: str) -> Path:
        """Move a stray live file out of the kubelet's sight into ``.staticpodd/quarantine/``
        (same mount: one rename), recorded first so its bytes are in history (not a file whose
        name is another file's component: it is no component). Returns the new path.
        Raises UnknownComponent when the file is not there, FsError."""
        result = self.quarantine_many([file_name], reason=reason)[file_name]
        if isinstance(result, Exception):
            raise result
        return result

    def quarantine_many(self, file_names: list[str], *, reason: str,
                        reasons: dict[str, str] | None = None) -> dict[str, Path | StaticpodError]:
        """:meth:`quarantine` for many strays at once: one lock, one scan of all of them, one
        transaction for their events, one fsync of each directory at the end (``reasons``: a
        file's own reason, else ``reason``). A scan per file listed the whole directory and
        stat'ed every suffix-less name's siblings, so N strays cost N² stats (1,000 took over a
        minute). Returns ``file name -> new path``, or the error that file met (UnknownComponent
        when it is gone, FsError); an error that stops them all (the lock, the private
        directories) is raised."""
        out: dict[str, Path | StaticpodError] = {}
        with self.core.nothing_changed_on_error(), self.guard.locked():
            fsops.ensure_private_dirs(self.core.layout)
            present = [fn for fn in file_names if self.core.path("live", fn).is_file()]
            for fn in file_names:
                if fn not in present:
                    out[fn] = UnknownComponent(f"no file {fn!r} in {self.core.layout.manifest_dir}")
            if present:
                self.scan(present)
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            moved = False
            try:
                # one transaction for all the events (a commit each, synchronous=FULL, was most
                # of what was left); the bytes were recorded by the scan above, committed already
                with self.core.store.transaction():
                    for fn in present:
                        try:
                            out[fn] = self._quarantine_one(fn, (reasons or {}).get(fn, reason), stamp)
                            moved = True
                        except (FsError, UnknownComponent) as exc:
                            out[fn] = exc
            finally:
                if moved:
                    fsops.fsync_dir(self.core.layout.quarantine_dir)
                    fsops.fsync_dir(self.core.layout.manifest_dir)
        return out

    def _quarantine_one(self, file_name: str, reason: str, stamp: str) -> Path:
        """Move one scanned stray into the quarantine directory (no fsync: the caller's), then
        record and journal it. Raises UnknownComponent, FsError."""
        st = self.core.state_at("live", file_name)
        if st is None:
            raise UnknownComponent(f"no file {file_name!r} in {self.core.layout.manifest_dir}")
        # a file named like another file's component is none: not recorded (it has no history
        # to go in), its event names no component; its bytes are in the quarantine directory
        comp = None if self.core.name_owner(file_name) is not None else self.core.component_for(file_name)
        src = self.core.path("live", file_name)
        dst = self.core.layout.quarantine_dir / f"{file_name}.{stamp}"
        n = 1
        while dst.exists():
            n += 1
            dst = self.core.layout.quarantine_dir / f"{file_name}.{stamp}.{n}"
        fsops.move_noreplace(src, dst, sync=False)
        self.core.store.clear_observed(f"live/{file_name}")
        self.core.store.record_event("quarantined", component=comp, file_name=file_name, actor=self.core.actor.name,
                                     reason=reason, details={"digest": digest_of(st.data), "to": str(dst)})
        self.core.log(Event.STRAY_QUARANTINED, f"moved stray {file_name} to {dst}", priority=WARNING,
                       component=comp, file_name=file_name, digest=digest_of(st.data), reason=reason,
                       quarantine_path=str(dst))
        return dst
