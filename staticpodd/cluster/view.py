"""The cluster view's shapes (pure: no client, no I/O).

On the Node (``metadata.annotations``), kept true by the node's staticpodd:

- ``staticpodd.io/parked``: the parked components, comma-separated and sorted
  (``kube-scheduler``; a broken park reads ``kube-scheduler(broken)``), for
  ``kubectl get nodes -o custom-columns``; absent when nothing is parked;
- ``staticpodd.io/parked-detail``: JSON, one object per park: ``component``, ``by``, ``reason``,
  ``since``, ``until`` (ISO 8601 UTC or null) and ``broken`` (the file was written back while
  parked: the kubelet runs it again);
- ``staticpodd.io/pinned``: the pods placed by hand on this node (``staticpodctl pin``),
  ``NAMESPACE/NAME`` comma-separated; ``staticpodd.io/pinned-detail``: JSON with ``namespace``,
  ``name``, ``uid``, ``node`` (where it was pinned to), ``by``, ``since`` and ``bare`` (no owner:
  nothing recreates it, and ``kubectl drain`` refuses it without ``--force``).

Events (core/v1, namespace ``default``, ``involvedObject`` the Node, as the kubelet's own node
events are), one per journal event in :data:`EVENT_REASONS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

TYPE_CHECKING = False  # typing is for mypy: a changing verb that publishes imports this module
if TYPE_CHECKING:
    from typing import Any

ANNOTATION_PARKED = "staticpodd.io/parked"
ANNOTATION_PARKED_DETAIL = "staticpodd.io/parked-detail"
ANNOTATION_PINNED = "staticpodd.io/pinned"
ANNOTATION_PINNED_DETAIL = "staticpodd.io/pinned-detail"
ANNOTATIONS = (ANNOTATION_PARKED, ANNOTATION_PARKED_DETAIL, ANNOTATION_PINNED, ANNOTATION_PINNED_DETAIL)

#: The Event ``source.component`` and ``reportingComponent``.
REPORTING_COMPONENT = "staticpodd"
#: The namespace of node Events (the kubelet's own go to ``default`` too).
EVENT_NAMESPACE = "default"

#: Journal event name -> (Event reason, Event type). ``UNPARKED`` with ``ACTION=discard`` is
#: ``ParkDiscarded``. Everything else the journal says stays on the node.
EVENT_REASONS: dict[str, tuple[str, str]] = {
    "PARKED": ("ComponentParked", "Warning"),
    "UNPARKED": ("ComponentUnparked", "Normal"),
    "PARK_EXPIRED": ("ParkExpired", "Normal"),
    "PARK_BROKEN": ("ParkBroken", "Warning"),
    "RESTORED_LAST_GOOD": ("RestoredLastGood", "Warning"),
    "STRAY_QUARANTINED": ("StrayQuarantined", "Warning"),
    "PINNED": ("PodPinned", "Normal"),
}
#: Journal events that change what the annotations say without an Event of their own (a park
#: ended by a hand ``mv``, a parked copy edited or removed).
STATE_EVENTS = frozenset({"EXTERNAL_CHANGE", "EXTERNAL_REMOVAL", "PARKED_COPY_UPDATED"})
#: The longest Event message the API server is sent (it refuses over 1 KiB in events.k8s.io).
MAX_MESSAGE = 1000
#: The reason of the Event that says queued Events were dropped.
REASON_DROPPED = "EventsDropped"


def entry_for(event_name: str, message: str, fields: Mapping[str, Any], *, at: str) -> dict[str, Any] | None:
    """The queue entry for one journal event, or None when the cluster is not told about it.

    ``event_name`` is :class:`staticpodd.journal.Event`'s name, ``fields`` its lower-case journal
    fields, ``at`` the ISO 8601 UTC time. The entry: ``reason``, ``type``, ``message`` (the
    journal's sentence, who and why added), ``component``, ``actor``, ``at``."""
    rule = EVENT_REASONS.get(event_name)
    if rule is None:
        return None
    reason, kind = rule
    if event_name == "UNPARKED" and fields.get("action") == "discard":
        reason = "ParkDiscarded"
    from ..termsafe import one_line, printable_name

    actor = str(fields.get("actor") or "")
    text = message
    if actor and actor not in text:
        text += f" (by {actor})"
    # one line of valid UTF-8, as the journal's MESSAGE: a file name in it (a stray's) must not
    # forge lines or move the cursor in `kubectl describe node`, nor be refused by the API server
    text = one_line(printable_name(text))
    return {"reason": reason, "type": kind, "message": text[:MAX_MESSAGE],
            "component": fields.get("component"), "actor": actor or None, "at": at}


def desired_annotations(parks: Iterable[Mapping[str, Any]], broken: Iterable[str],
                        pins: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
    """What the four annotations should say now (None: remove it).

    ``parks``: :meth:`ParkRecord.to_dict` mappings; ``broken``: components whose live file was
    written back while parked; ``pins``: :func:`staticpodd.pin.local.list_local_pins` records."""
    broken = set(broken)
    detail = []
    for p in sorted(parks, key=lambda p: str(p.get("component"))):
        detail.append({"component": p.get("component"), "by": p.get("actor"), "reason": p.get("reason"),
                       "since": p.get("since"), "until": p.get("until"),
                       "broken": p.get("component") in broken})
    pinned = []
    for e in sorted(pins, key=lambda e: (str(e.get("namespace")), str(e.get("name")))):
        pinned.append({"namespace": e.get("namespace"), "name": e.get("name"), "uid": e.get("uid"),
                       "node": e.get("node"), "by": e.get("actor"), "since": e.get("pinned_at"),
                       "bare": bool(e.get("bare"))})
    out: dict[str, str | None] = dict.fromkeys(ANNOTATIONS)
    if detail:
        out[ANNOTATION_PARKED] = ",".join(f"{d['component']}(broken)" if d["broken"] else str(d["component"])
                                          for d in detail)
        out[ANNOTATION_PARKED_DETAIL] = json.dumps(detail, sort_keys=True, separators=(",", ":"))
    if pinned:
        out[ANNOTATION_PINNED] = ",".join(f"{p['namespace']}/{p['name']}" for p in pinned)
        out[ANNOTATION_PINNED_DETAIL] = json.dumps(pinned, sort_keys=True, separators=(",", ":"))
    return out


def event_object(entry: Mapping[str, Any], node: str, node_uid: str | None, *, seq: int | str) -> dict[str, Any]:
    """The core/v1 Event for one queue ``entry`` on Node ``node`` (``node_uid``: the Node's
    ``metadata.uid``; ``seq``: the entry's queue number, part of the name so a retry after a
    lost answer cannot create the same Event twice: the API server answers 409; ``dNNN`` for
    the EventsDropped Event whose last dropped entry was ``NNN``)."""
    stamp = str(entry.get("at") or "")
    name = f"{node}.staticpodd.{stamp.replace(':', '').replace('-', '').lower()}.{seq}"[:253]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid or node},
        "reason": entry.get("reason"),
        "message": entry.get("message"),
        "type": entry.get("type") or "Normal",
        "source": {"component": REPORTING_COMPONENT, "host": node},
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": node,
        "firstTimestamp": stamp or None,
        "lastTimestamp": stamp or None,
        "count": 1,
    }


def dropped_entry(count: int, *, at: str) -> dict[str, Any]:
    """The entry that says ``count`` queued Events were dropped (the queue was full)."""
    return {"reason": REASON_DROPPED, "type": "Warning", "component": None, "actor": None, "at": at,
            "message": (f"{count} staticpodd Event(s) were dropped while the API server could not be reached "
                        "(cluster.queue_limit); the node's journal has them all")}


#: The fields ``status --cluster`` reads from each item of a detail annotation (anything else
#: in an item is ignored), and which of them are booleans.
PARKED_FIELDS = ("component", "by", "reason", "since", "until")
PINNED_FIELDS = ("namespace", "name", "uid", "node", "by", "since")
#: The longest text kept from one field of an annotation (a Node's annotations may hold 256 KiB).
MAX_FIELD = 256
#: The most items read from one annotation: a node has a few parks and pins, and each pinned
#: pod read back costs ``status --cluster`` a call to the API server (256 KiB of ``a/b,`` would
#: be 60000 calls and lines).
MAX_ITEMS = 200


def _field(value: Any) -> tuple[str | None, bool]:
    """One annotation field as text: ``(text or None, ok)``. A string is kept (made valid UTF-8,
    cut at :data:`MAX_FIELD`), a number said as text; a list, a mapping or anything else is not
    text (``ok`` False)."""
    from ..termsafe import printable_name

    if value is None:
        return None, True
    if isinstance(value, bool):
        return str(value).lower(), True
    if isinstance(value, (str, int, float)):
        return printable_name(str(value))[:MAX_FIELD], True
    return None, False


def _items(parsed: list[Any], fields: tuple[str, ...], bools: tuple[str, ...], detail_key: str,
           problems: list[str]) -> list[dict[str, Any]]:
    items = []
    bad: set[str] = set()
    for raw in parsed:
        item: dict[str, Any] = {}
        for f in fields:
            item[f], ok = _field(raw.get(f))
            if not ok:
                bad.add(f)
        for f in bools:
            item[f] = raw.get(f) is True
        items.append(item)
    for f in sorted(bad):
        problems.append(f"annotation {detail_key}: field {f} is not text")
    return items


def node_view(node: Mapping[str, Any]) -> dict[str, Any]:
    """One Node as ``status --cluster`` shows it: ``{"node", "parked": [...], "pinned": [...],
    "problems": [...]}`` from its annotations. Annotations are read as untrusted text (anyone who
    may patch the Node could have written them): what does not parse is a problem, never an
    error; the summary annotation stands in for a detail that does not parse. Each item has
    exactly the fields of :data:`PARKED_FIELDS` (and ``broken``) or :data:`PINNED_FIELDS` (and
    ``bare``), as text (valid UTF-8, control characters kept: the caller escapes them for a
    terminal) or None."""
    meta_raw = node.get("metadata")
    meta: Mapping[str, Any] = meta_raw if isinstance(meta_raw, Mapping) else {}
    ann_raw = meta.get("annotations")
    ann: Mapping[str, Any] = ann_raw if isinstance(ann_raw, Mapping) else {}
    name, _ok = _field(meta.get("name"))
    problems: list[str] = []
    out: dict[str, Any] = {"node": name or "?", "parked": [], "pinned": [], "problems": problems}
    for summary_key, detail_key, key, fields, bools in (
            (ANNOTATION_PARKED, ANNOTATION_PARKED_DETAIL, "parked", PARKED_FIELDS, ("broken",)),
            (ANNOTATION_PINNED, ANNOTATION_PINNED_DETAIL, "pinned", PINNED_FIELDS, ("bare",))):
        detail = ann.get(detail_key)
        items: list[dict[str, Any]] = []
        if detail is not None:
            try:
                parsed = json.loads(detail) if isinstance(detail, str) else None
            except (ValueError, RecursionError):  # RecursionError: "[[[[…" nested deeper than Python recurses
                parsed = None
            if isinstance(parsed, list) and all(isinstance(i, dict) for i in parsed):
                items = _items(parsed, fields, bools, detail_key, problems)
            else:
                problems.append(f"annotation {detail_key} is not a JSON list of objects")
        summary = ann.get(summary_key)
        if summary is not None and not isinstance(summary, str):
            problems.append(f"annotation {summary_key} is not text")
        elif not items and summary and summary.strip():
            for raw_word in summary.split(","):
                word = _field(raw_word.strip())[0] or ""
                if key == "parked":
                    broken = word.endswith("(broken)")
                    items.append({**dict.fromkeys(fields), "component": word[:-8] if broken else word,
                                  "broken": broken})
                elif "/" in word:
                    ns, _, pod = word.partition("/")
                    items.append({**dict.fromkeys(fields), "namespace": ns, "name": pod, "bare": False})
        if len(items) > MAX_ITEMS:
            problems.append(f"annotation {detail_key if detail is not None else summary_key} lists "
                            f"{len(items)} items; only the first {MAX_ITEMS} are read")
            items = items[:MAX_ITEMS]
        out[key] = items
    return out
