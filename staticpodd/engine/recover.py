"""Interrupted operations: the intents recorded before a rename, and finishing or undoing them.

Every changing verb commits an intent to the store before its first rename; :class:`Recovery`
holds ``recover`` (run on the engine's first lock acquisition, by the daemon's start and by
``staticpodctl recover``), which finishes an operation whose rename happened and undoes one
whose rename did not, and the recording helpers both the verbs and ``recover`` use, each
inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError
from ..journal import NOTICE, Event
from ..node import fsops
from ..store.versions import Observed, ParkRecord, Version, digest_of
from .model import EXTERNAL

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

    from .core import EngineCore

#: The hint of a change that reached the kubelet but could not be recorded (see
#: :meth:`Recovery.after_rename`): the committed intent records it later.
RECORD_LATER_HINT = ("nothing is lost: once the store can be written again, run: "
                     "staticpodctl recover (the next staticpodctl or staticpodd start does it "
                     "too); it records this change from the interrupted operation")


class Recovery:
    """``recover`` and the intent and recording helpers.

    ``core``: the directory, store and journal. Runs under the caller's lock (the
    :class:`~staticpodd.engine.core.Guard` runs :meth:`recover` on its first acquisition).
    """

    def __init__(self, core: EngineCore) -> None:
        self.core = core
        #: What the last :meth:`recover` did (one dict per interrupted operation).
        self.last_recovery: list[dict[str, Any]] = []

    # -- recovery -------------------------------------------------------------------------------

    def recover(self) -> list[dict[str, Any]]:
        """Finish or undo operations interrupted by a crash, then sweep stale staging files.

        Runs under the lock (``locked()`` calls it). For each recorded intent: when the rename
        happened, the result is recorded (finished); otherwise its staging file is removed and the
        directory is left as it was (undone). Returns one dict per intent:
        ``{"op", "component", "file_name", "outcome": "finished"|"undone"}``.
        """
        if not self.core.layout.db_path.exists():
            fsops.sweep_staging(self.core.layout, keep=set())
            return []
        out: list[dict[str, Any]] = []
        for intent in self.core.store.intents():
            p = intent.payload
            fn = p["file_name"]
            outcome = "undone"
            if intent.op == "swap":
                dst_loc = p["location"]
                cur = self.core.state_at(dst_loc, fn)
                if cur is not None and digest_of(cur.data) == p["new_digest"]:
                    with self.core.store.transaction():
                        if p.get("external"):  # the bytes it replaced, recorded first, as they came
                            self.record_external(intent.component, fn, dst_loc, p["external"])
                        self.record_swap(intent.component, fn, dst_loc, cur.data, cur, p)
                        self.core.store.end_intent(intent.id)
                    outcome = "finished"
                else:
                    fsops.remove(Path(p["staged"]))
                    with self.core.store.transaction():
                        if p.get("external"):  # they were on disk: history has them, as a scan would
                            self.record_external(intent.component, fn, dst_loc, p["external"])
                        self.core.store.end_intent(intent.id)
            elif intent.op in ("park", "unpark"):
                src_loc, dst_loc = ("live", "parked") if intent.op == "park" else ("parked", "live")
                src = self.core.state_at(src_loc, fn)
                dst = self.core.state_at(dst_loc, fn)
                if src is not None and dst is not None and src.ino == dst.ino:
                    # link() done, unlink() not: for park undo (drop the parked link), for unpark
                    # finish (the kubelet may already run the live file).
                    if intent.op == "park":
                        fsops.remove(self.core.path(dst_loc, fn))
                        dst = None
                    else:
                        fsops.remove(self.core.path(src_loc, fn))
                        src = None
                if dst is not None and src is None and digest_of(dst.data) == p["digest"]:
                    with self.core.store.transaction():
                        if intent.op == "park":
                            self.record_park(intent.component, fn, dst, p)
                        else:
                            self.record_unpark(intent.component, fn, dst, p)
                        self.core.store.end_intent(intent.id)
                    outcome = "finished"
                else:
                    self.core.store.end_intent(intent.id)
            else:
                self.core.store.end_intent(intent.id)
            out.append({"op": intent.op, "component": intent.component, "file_name": fn, "outcome": outcome})
            self.core.log(
                Event.RECOVERED,
                f"interrupted {intent.op} of {fn} (pid {intent.pid}) {outcome}",
                priority=NOTICE, component=intent.component, file_name=fn, op=intent.op, outcome=outcome,
            )
        swept = fsops.sweep_staging(self.core.layout, keep=set()) if self.core.layout.staging_dir.is_dir() else []
        if swept:
            self.core.log(
                Event.STAGING_SWEPT, f"removed {len(swept)} stale staging file(s)", priority=NOTICE,
                count=len(swept),
            )
        self.last_recovery = out
        return out

    # -- recording helpers (each runs inside the caller's transaction) ----------------------------

    def record_swap(self, comp: str, fn: str, loc: str, data: bytes, st: Any, p: dict[str, Any]) -> Version:
        v = self.core.store.record(
            comp, fn, data, action=p["action"], actor=p["actor"], actor_via=p.get("actor_via"),
            reason=p.get("reason"), mode=st.mode, uid=st.uid, gid=st.gid, location=loc,
        )
        self.core.set_observed(comp, fn, loc, v.digest, st)
        reopen = p.get("reopen_park")
        if reopen and loc == "parked" and self.core.store.park_of(comp) is None:
            # the parked copy had gone missing; the copy is back, so is the park (its deadline too)
            self.core.store.set_park(ParkRecord(comp, fn, v.digest, reopen["parked_at"], reopen.get("until"),
                                                reopen["actor"], reopen.get("actor_via"), reopen.get("reason")))
        elif loc == "parked":
            # an apply (edit, rollback) to a parked component wrote the parked copy: the park now
            # holds these bytes, so an unpark whose parked copy was lost puts them back, not the
            # bytes that were parked before the apply
            rec = self.core.store.park_of(comp)
            if rec is not None and rec.digest != v.digest:
                self.core.store.set_park(ParkRecord(rec.component, rec.file_name, v.digest, rec.parked_at, rec.until,
                                                    rec.actor, rec.actor_via, rec.reason))
        return v

    def record_external(self, comp: str, fn: str, loc: str, ext: dict[str, Any]) -> Version | None:
        """Record bytes someone else wrote at ``loc``/``fn`` that an operation read, judged and
        replaced before recording them (the daemon's restore on a writer's close,
        :meth:`staticpodd.engine.swap.Swapper.restore_last_good` with ``unrecorded``), as the
        drift scan would have: a version by ``external`` (an event when they are the newest
        version already) and what was observed there. ``ext``: the intent's ``external``
        (``digest``, ``mode``, ``uid``, ``gid``, ``reason``); the bytes were stored with the intent
        (:meth:`VersionStore.keep_bytes`). Returns the version, None when only an event was."""
        digest = ext["digest"]
        head = self.core.store.head(comp)
        version = None
        if head is None or head.digest != digest:
            version = self.core.store.record(comp, fn, self.core.store.data(digest), action="external", actor=EXTERNAL,
                                             reason=ext.get("reason"), mode=ext.get("mode"), uid=ext.get("uid"),
                                             gid=ext.get("gid"), location=loc)
        else:
            self.core.store.record_event("modified", component=comp, file_name=fn, actor=EXTERNAL,
                                         details={"location": loc, "digest": digest})
        self.core.store.set_observed(Observed(comp, fn, loc, digest, ext.get("mode"), ext.get("uid"), ext.get("gid")))
        return version

    def record_park(self, comp: str, fn: str, st: Any, p: dict[str, Any]) -> tuple[Version, ParkRecord]:
        v = self.core.store.record(
            comp, fn, st.data, action="park", actor=p["actor"], actor_via=p.get("actor_via"),
            reason=p.get("reason"), mode=st.mode, uid=st.uid, gid=st.gid, location="parked",
        )
        rec = ParkRecord(comp, fn, v.digest, v.created_at, p.get("until"), p["actor"], p.get("actor_via"),
                         p.get("reason"))
        self.core.store.set_park(rec)
        self.core.store.clear_observed(f"live/{fn}")
        self.core.set_observed(comp, fn, "parked", v.digest, st)
        return v, rec

    def record_unpark(self, comp: str, fn: str, st: Any, p: dict[str, Any]) -> Version:
        v = self.core.store.record(
            comp, fn, st.data, action="unpark", actor=p["actor"], actor_via=p.get("actor_via"),
            reason=p.get("reason"), mode=st.mode, uid=st.uid, gid=st.gid, location="live",
        )
        self.core.store.clear_park(comp)
        self.core.store.clear_observed(f"parked/{fn}")
        self.core.set_observed(comp, fn, "live", v.digest, st)
        return v

    @contextmanager
    def after_rename(self, done: str, *, then: str | None = None) -> Iterator[None]:
        """Recording after the rename: a store failure here (a full disk at COMMIT) must say that
        the change already reached the kubelet, and that it will be recorded: the intent was
        committed before the rename, so :meth:`recover` (run by ``staticpodctl recover`` and by
        every changing verb and the daemon's start) records it. Raises StoreError with
        ``details["reached_kubelet"] = True``."""
        try:
            yield
        except StoreError as exc:
            raise StoreError(
                f"{done}, but recording it failed: {exc.message}",
                path=exc.path, hint=(then or RECORD_LATER_HINT),
                details={"reached_kubelet": True, "recorded": False},
            ) from exc

    def intent_base(self, fn: str, reason: str | None) -> dict[str, Any]:
        return {"file_name": fn, "actor": self.core.actor.name, "actor_via": self.core.actor.via, "reason": reason}
