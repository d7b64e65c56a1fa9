"""One flush of the cluster view: the Node's annotations, then the queued Events in order.

Run by the daemon (woken by a verb, or on its retry timer) and by ``staticpodctl`` itself when no
daemon runs. One flush at a time per node: an exclusive ``flock`` on the outbox file (SQLite's
own locks are fcntl locks, which flock does not meet); a flush that finds it held leaves the
work to the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from ..store.versions import iso
from .outbox import Outbox, OutboxCorrupt
from .view import desired_annotations, dropped_entry, event_object

TYPE_CHECKING = False  # typing is for mypy only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: HTTP statuses for which an Event is dropped rather than retried: the API server will never
#: take it as it is (a malformed or too large object). Refusals of the credentials (401, 403) and
#: every failure to answer keep it queued: fixing the RBAC publishes it.
DROP_STATUSES = frozenset({400, 413, 422})


#: Queued rows read at a time: a queue of ``cluster.queue_limit`` (up to 100000) rows is not
#: read whole at every retry while the API server is away (0.4 s of CPU, the GIL held).
BATCH = 100


def node_state(layout: Any) -> dict[str, str | None]:
    """The annotations the Node should carry now, from the version store's park records, the
    files in the manifest directory (a park whose file was written back is ``broken``) and the
    pin records (:func:`staticpodd.pin.local.list_local_pins`). Raises StoreError/OSError."""
    from ..pin.local import list_local_pins
    from ..store.versions import VersionStore

    parks: list[dict[str, Any]] = []
    broken: set[str] = set()
    if layout.db_path.exists():
        store = VersionStore(layout.db_path, readonly=True)
        try:
            for p in store.parks():
                parks.append(p.to_dict())
                if (layout.manifest_dir / p.file_name).exists() and (layout.parked_dir / p.file_name).exists():
                    broken.add(p.component)
        finally:
            store.close()
    return desired_annotations(parks, broken, list_local_pins(layout.state_dir))


class Publisher:
    """Publishes the queue in ``state_dir`` to Node ``node_name``.

    ``connect()`` returns a :class:`~staticpodd.cluster.client.Api` (called once, at the first
    flush that has work; raises ClusterError/StaticpodError); ``desired()`` returns what the
    annotations should say now (:func:`node_state`)."""

    def __init__(self, state_dir: Path, *, node_name: str, connect: Callable[[], Any],
                 desired: Callable[[], dict[str, str | None]], limit: int = 1000) -> None:
        self.state_dir = Path(state_dir)
        self.node_name = node_name
        self._connect = connect
        self._desired = desired
        self.limit = limit
        self._api: Any = None

    def api(self) -> Any:
        """The connection, made at first use."""
        if self._api is None:
            self._api = self._connect()
        return self._api

    def flush(self, *, resync: bool = False, deadline: float | None = None) -> dict[str, Any]:
        """Publish what differs and what waits. Returns ``{"published": n Events, "annotations":
        True when patched, "waiting": n still queued, "error": str | None, "busy": True when
        another process is flushing, "dropped": n Events the API server refused for good, "refused":
        why, one sentence for each}``.
        ``resync``: patch the annotations even when the last published ones match. ``deadline``
        (``time.monotonic()``): no API call goes on past it (a verb publishing itself waits at
        most ``cluster.timeout``). Never raises (an unusable outbox is the error)."""
        result: dict[str, Any] = {"published": 0, "annotations": False, "waiting": 0, "error": None,
                                  "busy": False, "dropped": 0, "refused": []}
        try:
            box = Outbox(self.state_dir, limit=self.limit)
        except Exception as exc:  # noqa: BLE001 - Untrusted, OSError, sqlite3.Error
            result["error"] = f"cannot open the cluster outbox: {exc}"
            return result
        with box:
            try:
                self._flush_locked(box, result, resync, deadline)
            except OutboxCorrupt as exc:  # a file SQLite opened but cannot read through (truncated)
                result["error"] = f"cannot read the cluster outbox: {exc}"
        return result

    def _flush_locked(self, box: Outbox, result: dict[str, Any], resync: bool, deadline: float | None) -> None:
        """:meth:`flush` under the outbox's flock (or, when another process holds it, ``busy``)."""
        lock = os.open(box.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                result["busy"] = True
                result["waiting"] = box.waiting()
                return
            through = box.last_seq()
            requested = box.requested()  # annotation-only changes asked for before this flush read the store
            if box.get("node") != self.node_name:
                box.set("node", self.node_name)
            self._flush(box, result, resync, deadline)
            result["waiting"] = box.waiting()
            box.set("error", result["error"])
            if result["error"] is None:
                box.set("published_at", iso(time.time()))
            # last: a verb that sees its rows attempted reads this flush's error, not the one before
            # (CI saw "queued" with no reason when this came first)
            box.set("state_served", str(requested))
            box.set("attempted_through", str(through))
        finally:
            os.close(lock)

    def _forget_gone_pins(self) -> list[str]:
        """Drop the records of pinned pods the API server no longer has (deleted, or a new pod
        of the same name: another uid), so the annotation lists only pods that exist; returns
        their ``NAMESPACE/NAME``. With the kubelet's credentials the node authorizer answers 403
        ("no relationship found") for a pod not bound to this node: gone too. Any other failure
        keeps the record. Never raises."""
        from ..pin.local import forget_pin, list_local_pins
        from .client import NODE_AUTHORIZER_NO_RELATIONSHIP, ClusterError

        pins = list_local_pins(self.state_dir)
        if not pins:
            return []
        gone = []
        try:
            api = self.api()
        except Exception:  # noqa: BLE001 - no connection now: try at the next resync
            return []
        for p in pins:
            ns, name = str(p.get("namespace")), str(p.get("name"))
            try:
                pod = api.pod(name, ns)
            except ClusterError as exc:
                if exc.status == 0:  # no answer: the next resync asks again
                    break
                if not (exc.status == 403 and NODE_AUTHORIZER_NO_RELATIONSHIP in str(exc)):
                    continue
                pod = None
            if pod is None or (p.get("uid") and (pod.get("metadata") or {}).get("uid") != p.get("uid")):
                if forget_pin(self.state_dir, ns, name):
                    gone.append(f"{ns}/{name}")
        return gone

    def _flush(self, box: Outbox, result: dict[str, Any], resync: bool, deadline: float | None) -> None:
        from ..errors import StaticpodError
        from .client import ClusterError

        if resync:
            self._forget_gone_pins()
        try:
            want = self._desired()
        except Exception as exc:  # noqa: BLE001 - a store that cannot be read: say so, try the Events
            want = None
            result["error"] = f"cannot read the parks and pins: {exc}"
        want_text = json.dumps(want, sort_keys=True) if want is not None else None
        dropped, dropped_at, dropped_through = box.dropped()
        pending = box.pending(limit=BATCH)  # the first rows only: a flush stops at the first refusal
        patch = want is not None and (resync or want_text != box.get("annotations"))
        if not patch and not pending and not dropped:
            return
        try:
            api = self.api()
        except StaticpodError as exc:
            result["error"] = str(exc)
            return
        api.deadline = deadline
        uid = box.get("node_uid")
        if patch:
            try:
                node = api.patch_node_annotations(self.node_name, want or {})
                uid = str((node.get("metadata") or {}).get("uid") or "") or uid
                box.set("node_uid", uid)
                box.set("annotations", want_text)
                result["annotations"] = True
            except ClusterError as exc:
                result["error"] = str(exc)
                if exc.status == 404:
                    result["error"] += f" (is {self.node_name} this node's name? set node_name)"
                if exc.status == 0:  # no answer at all: the Events would only wait as long again
                    return
        if dropped:  # older than everything still queued: said first
            try:
                api.create_event(event_object(dropped_entry(dropped, at=dropped_at or iso(time.time())),
                                              self.node_name, uid, seq=f"d{dropped_through}"))
            except ClusterError as exc:
                result["error"] = result["error"] or str(exc)
                return
            box.take_dropped(dropped)
        while pending:
            for seq, entry in pending:
                try:
                    api.create_event(event_object(entry, self.node_name, uid, seq=seq))
                except ClusterError as exc:
                    if exc.status in DROP_STATUSES:  # never taken as it is: dropped, and said
                        why = f"the API server refused Event {entry.get('reason')} for good: {exc}"
                        box.refused(seq, why)
                        result["dropped"] += 1
                        result["refused"].append(why)
                        continue
                    box.attempted(seq)
                    result["error"] = result["error"] or str(exc)
                    return  # in order: nothing after an Event that did not go out
                box.done(seq)
                result["published"] += 1
            pending = box.pending(limit=BATCH)
