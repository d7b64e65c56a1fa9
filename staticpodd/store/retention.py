"""Retention: which recorded versions may go, and pruning them (``staticpodctl prune``, the daemon's timer).

A :class:`Policy` keeps, per component, the newest ``keep_versions`` contents (the newest version
of each of the newest N distinct digests: a park and an unpark record the same bytes again and
must not push older contents out) and every version younger than ``keep_for`` seconds (the
union: a version either rule keeps stays). With neither set nothing is pruned. Whatever the
policy says, these are never pruned (:func:`plan`):

- the current version: the newest one, and the newest version holding the bytes live now;
- a parked copy's version: the newest version holding the parked bytes (the park record's
  digest and the parked copy on disk), so ``unpark`` can always restore it from history;
- the last valid version: the newest version whose bytes pass the gate (the one the daemon's
  ``on_invalid: restore`` would fall back to);
- the rollback target: the newest valid version whose bytes differ from the current ones (what a
  plain ``rollback`` reaches; :attr:`ComponentPlan.rollback_to` names it);
- every version of a component with an operation in progress (an intent not yet finished or
  undone, :meth:`staticpodd.engine.Engine.recover` may need any of its bytes).

A removed stray (a file the kubelet would have read that is not a manifest the operator meant,
e.g. ``kube-apiserver.yaml.bak``, now gone from the directory and not parked) leaves ``status``
and the metrics once ``keep_for`` has passed since it was last seen: all its versions, events
and observed state go with it (journal ``PRUNED``, kind ``stray-retired``).

Bytes (blobs) are deleted only when no remaining version of any component references their
digest; the digest's cached verdicts, facts and identity go with them. All deletions of one
prune are one transaction. Times are Unix epoch seconds; ``now`` is passed in, so tests control
the clock.
"""

from __future__ import annotations

from ..config import RetentionConfig
from ..layout import component_of
from ..record import Record
from .rows import DIGEST_HEX, digest_keys
from .tallies import carry_over, tally

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any


#: The rules a prune applies: the configuration's own ``retention:`` record (``keep_versions``:
#: newest N per component, None: no count limit; ``keep_for``: seconds, None: no age rule;
#: ``interval``: seconds between the daemon's prunes), one class for both.
Policy = RetentionConfig


def policy_for(config: Any, *, keep: int | None = None, keep_for: float | None = None) -> Policy:
    """The policy of ``config.retention`` (a :class:`staticpodd.config.Config` or None), with
    ``keep`` / ``keep_for`` (command-line flags) overriding its two rules."""
    r = getattr(config, "retention", None)
    return Policy(
        keep_versions=keep if keep is not None else getattr(r, "keep_versions", None),
        keep_for=keep_for if keep_for is not None else getattr(r, "keep_for", None),
        interval=float(getattr(r, "interval", None) or 3600),
    )


class ComponentPlan(Record):
    """What one component loses: ``seqs`` pruned (ascending), and whether it is ``retired``
    altogether (a removed stray past the window)."""

    component: str
    seqs: list[int]
    kept: int
    retired: bool
    protected: dict[int, str]  # seq -> why it must stay
    rollback_to: int | None  # the version a plain ``rollback`` reaches after the prune (None: none)

    def __init__(self, component: str, seqs: list[int] | None = None, kept: int = 0, retired: bool = False,
                 protected: dict[int, str] | None = None, rollback_to: int | None = None) -> None:
        self.component = component
        self.seqs = [] if seqs is None else seqs
        self.kept = kept
        self.retired = retired
        self.protected = {} if protected is None else protected
        self.rollback_to = rollback_to

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "pruned_versions": self.seqs, "kept_versions": self.kept,
                "retired": self.retired, "protected": {str(k): v for k, v in sorted(self.protected.items())},
                "rollback_to": self.rollback_to}


class PruneResult(Record):
    """The outcome of :func:`prune`: per component plans (only those that lose something),
    blobs (digests) deleted, bytes freed (uncompressed sizes) and whether it was a dry run."""

    components: list[ComponentPlan]
    blobs: int
    bytes: int
    dry_run: bool

    def __init__(self, components: list[ComponentPlan], blobs: int, bytes: int, dry_run: bool) -> None:
        self.components = components
        self.blobs = blobs
        self.bytes = bytes
        self.dry_run = dry_run

    @property
    def versions(self) -> int:
        return sum(len(c.seqs) for c in self.components)

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "pruned_versions": self.versions, "deleted_blobs": self.blobs,
                "freed_bytes": self.bytes, "components": [c.to_dict() for c in self.components]}


def _last_seen(db: Any, component: str) -> float:
    """Epoch of the newest version or event of ``component``."""
    (v,) = db.execute("SELECT COALESCE(MAX(created_at), 0) FROM versions WHERE component = ?", (component,)).fetchone()
    (e,) = db.execute("SELECT COALESCE(MAX(created_at), 0) FROM events WHERE component = ?", (component,)).fetchone()
    return max(float(v), float(e))


def plan(engine: Any, policy: Policy, now: float) -> list[ComponentPlan]:
    """Decide, without changing anything, which versions each component loses under ``policy``
    at epoch ``now``. Reads the directory (live and parked bytes), the park records, the
    observed state and the intents; validates (through the engine's gate) only until the newest
    valid version of each component is found. Caller holds the lock when it means to act."""
    store = engine.store
    db = store._db
    if not policy.active:
        return []
    parks = {p.component: p for p in store.parks()}
    busy = {i.component for i in store.intents()}
    observed: dict[str, list[tuple[str, str]]] = {}
    for o in store.observed().values():
        observed.setdefault(o.component, []).append((o.location, o.digest))
    live_comps = {engine.component_for(fn) for fn in engine.live_names()}
    parked_comps = {engine.component_for(fn) for fn in engine.parked_names()}
    out: list[ComponentPlan] = []
    for comp in store.components():
        rows = db.execute(f"SELECT seq, {DIGEST_HEX}, created_at, file_name FROM versions WHERE component = ? "
                          "ORDER BY seq DESC", (comp,)).fetchall()
        if not rows:
            continue
        cp = ComponentPlan(comp)
        if comp in busy:
            continue  # an operation in progress may need any of its versions
        head_fn = rows[0][3]
        removed = comp not in live_comps and comp not in parked_comps and comp not in parks
        if (removed and component_of(head_fn) == head_fn and policy.keep_for is not None
                and now - _last_seen(db, comp) > policy.keep_for):
            cp.seqs = sorted(r[0] for r in rows)
            cp.retired = True
            out.append(cp)
            continue
        keep: dict[int, str] = {}
        newest_of: dict[str, int] = {}
        for seq, digest, _created, _fn in rows:
            newest_of.setdefault(digest, seq)
        keep[rows[0][0]] = "current (newest)"
        for loc, digest in observed.get(comp, []):
            if digest in newest_of:
                keep.setdefault(newest_of[digest], "current (live)" if loc == "live" else "parked copy")
        if comp in parks and parks[comp].digest in newest_of:
            keep.setdefault(newest_of[parks[comp].digest], "parked copy")
        for seq, digest, _created, _fn in rows:
            if _valid(engine, digest, f"{comp}@{seq}", comp):
                keep.setdefault(seq, "last valid")
                break
        # what a plain ``rollback`` falls back to: the newest valid version whose bytes differ
        # from the current ones (the live file's, else the parked copy's, else the newest's)
        cur = _current_digest(observed.get(comp, []), rows[0][1])
        for seq, digest, _created, _fn in rows:
            if digest != cur and _valid(engine, digest, f"{comp}@{seq}", comp):
                keep.setdefault(seq, "rollback target")
                cp.rollback_to = seq
                break
        cp.protected = dict(keep)
        # keep_versions counts contents, not rows: a park and an unpark each record the same
        # bytes again, so N rows could all be one content and the earlier ones would be lost.
        # The newest version of each of the newest N distinct digests stays.
        contents: list[str] = []
        for _seq, digest, _created, _fn in rows:
            if digest not in contents:
                contents.append(digest)
        for seq, digest, created, _fn in rows:
            if seq in keep:
                continue
            if (policy.keep_versions is not None and newest_of[digest] == seq
                    and contents.index(digest) < policy.keep_versions):
                continue
            if policy.keep_for is not None and now - created <= policy.keep_for:
                continue
            if policy.keep_versions is None and policy.keep_for is None:
                continue
            cp.seqs.append(seq)
        cp.seqs.sort()
        cp.kept = len(rows) - len(cp.seqs)
        if cp.seqs:
            out.append(cp)
    return out


def prune(engine: Any, policy: Policy, now: float, *, dry_run: bool = False) -> PruneResult:
    """Prune what :func:`plan` decides, in one transaction (nothing at all with ``dry_run``).

    Deletes the planned version rows; a retired stray's events, observed rows and its
    ``components`` row too; then every blob no remaining version references (with its cached
    verdicts, facts and identity). Journals one ``PRUNED`` entry per component. Caller holds the
    lock (``with engine.locked()``). Raises StoreError when the store cannot be written.
    """
    store = engine.store
    db = store._db
    if store.readonly:
        plans = plan(engine, policy, now)
    else:
        with store.transaction():  # the verdicts plan caches: one commit, not one per component
            plans = plan(engine, policy, now)
    doomed: set[str] = set()
    for cp in plans:
        for seq in cp.seqs:
            (d,) = db.execute(f"SELECT {DIGEST_HEX} FROM versions WHERE component = ? AND seq = ?",
                              (cp.component, seq)).fetchone()
            doomed.add(d)
    if dry_run:
        orphans = _orphans(db, doomed, plans)
        freed = sum(_size(db, d) for d in orphans)
        return PruneResult(plans, len(orphans), freed, True)
    with store.transaction():
        for cp in plans:
            # the alerting counters count these rows: carry their tally over so no counter goes down
            marks = ",".join("?" * len(cp.seqs)) or "NULL"
            carry_over(db, *tally(db, versions=(f"component = ? AND seq IN ({marks})", (cp.component, *cp.seqs)),
                                  events=("component = ?", (cp.component,)) if cp.retired else ("0", ())))
            db.executemany("DELETE FROM versions WHERE component = ? AND seq = ?",
                           [(cp.component, s) for s in cp.seqs])
            if cp.retired:
                db.execute("DELETE FROM events WHERE component = ?", (cp.component,))
                db.execute("DELETE FROM observed WHERE component = ?", (cp.component,))
                db.execute("DELETE FROM components WHERE component = ?", (cp.component,))
        orphans = [d for d in sorted(doomed) if db.execute(
            "SELECT 1 FROM versions WHERE digest IN (?, ?) LIMIT 1", digest_keys(d)).fetchone() is None]
        freed = sum(_size(db, d) for d in orphans)
        # blobs are keyed by the digest's raw bytes (schema 4), the caches by its hex
        db.executemany("DELETE FROM blobs WHERE digest IN (?, ?)", [digest_keys(d) for d in orphans])
        for table in ("verdicts", "facts", "identities"):
            db.executemany(f"DELETE FROM {table} WHERE digest = ?", [(d,) for d in orphans])
    from ..journal import INFO, Event

    for cp in plans:
        what = ("removed stray retired: its versions and events are gone" if cp.retired else
                f"pruned {len(cp.seqs)} version(s), kept {cp.kept}")
        engine.log(Event.PRUNED, f"{cp.component}: {what}", priority=INFO, component=cp.component,
                    kind="stray-retired" if cp.retired else "versions-pruned",
                    versions=",".join(map(str, cp.seqs)), count=len(cp.seqs))
    return PruneResult(plans, len(orphans), freed, False)


def _current_digest(observed: list[tuple[str, str]], newest: str) -> str:
    """The digest of a component's current bytes: the live file's (as last observed), else the
    parked copy's, else the newest version's (hex)."""
    by_loc = dict(observed)
    return by_loc.get("live") or by_loc.get("parked") or newest


def _valid(engine: Any, digest: str, shown: str, comp: str) -> bool:
    """Whether the bytes of ``digest`` pass the gate: the store's verdict cache (keyed by digest
    and validator id) first, else validated once and cached."""
    from ..resources import validator_id

    store = engine.store
    vid = validator_id()
    cached = store.verdict(digest, vid)
    if cached is not None:
        return cached
    try:
        ok = bool(engine.verdict(store.data(digest), shown, comp)[0])
    except Exception:  # unreadable bytes are never the last valid version
        return False
    store.set_verdict(digest, vid, ok)
    return ok


def _size(db: Any, digest: str) -> int:
    row = db.execute("SELECT size FROM blobs WHERE digest IN (?, ?)", digest_keys(digest)).fetchone()
    return int(row[0]) if row else 0


def _orphans(db: Any, doomed: set[str], plans: list[ComponentPlan]) -> list[str]:
    """Digests (hex) in ``doomed`` that no version outside the plans references (dry run)."""
    gone = {(cp.component, s) for cp in plans for s in cp.seqs}
    out = []
    for d in sorted(doomed):
        refs = db.execute("SELECT component, seq FROM versions WHERE digest IN (?, ?)", digest_keys(d)).fetchall()
        if all((c, s) in gone for c, s in refs):
            out.append(d)
    return out
