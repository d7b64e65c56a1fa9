"""Policy: what the daemon says and does about what the engine and the validator observed.

Pure functions from observations (the engine's ``Change`` records, the validator's directory
``Finding`` records, expired ``ParkRecord`` records) and the :class:`~staticpodd.config.Config`
to a :class:`Plan`: journald reports to send and actions to ask the engine for. Nothing here
touches the filesystem, the store or the journal, so every decision is testable alone.

Policies (README "Configuration"; docs/kubelet-contract.md "What a broken file does to a running pod"):

- ``on_invalid: alert`` -- an external write the kubelet will refuse is an INVALID_LIVE error
  (the running pod dies at the kubelet's next 20 s relist); one that only staticpodd's own rules
  refuse (the kubelet runs it: :func:`kubelet_drops`) is an INVALID_LIVE warning. ``restore`` --
  also put back the newest version that passed the gate (the bad bytes stay in history), only
  for what the kubelet refuses (the two levels, not one).
- ``on_stray: alert`` -- a stray file the kubelet would run is a STRAY_FOUND warning.
  ``quarantine`` -- also move it into ``.staticpodd/quarantine/`` (recorded, restorable).
- An expired park is restored (PARK_EXPIRED, then unpark), whoever parked it and whenever.
- A parked component whose file was written back into the directory is PARK_BROKEN.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .journal import ERR, NOTICE, WARNING, Event
from .record import FrozenRecord, Record

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

#: What each engine ``Change.kind`` (``staticpodd.engine.Change``) means, as
#: ``kind -> (event, sentence)``; ``{f}`` is the file name. The kubelet's view: a removal or a
#: move out of the directory stops the pod at its next look (docs/kubelet-contract.md "When the kubelet looks").
CHANGE_KINDS: dict[str, tuple[Event, str]] = {
    "adopted": (Event.EXTERNAL_CHANGE, "{f} was adopted: first seen by staticpodd, on an empty version store"),
    "created": (Event.EXTERNAL_CHANGE, "{f} was created by someone else"),
    "modified": (Event.EXTERNAL_CHANGE, "{f} was modified by someone else"),
    "moved-in": (Event.EXTERNAL_CHANGE, "{f} was moved into the manifest directory by someone else"),
    "mode-changed": (Event.EXTERNAL_CHANGE, "mode or owner of {f} was changed by someone else"),
    "parked-copy-edited": (Event.EXTERNAL_CHANGE, "the parked copy of {f} was edited by hand"),
    "unparked-by-hand": (
        Event.EXTERNAL_CHANGE,
        "{f} was put back into the manifest directory by hand while parked; the park is over",
    ),
    "removed": (Event.EXTERNAL_REMOVAL, "{f} was removed by someone else; the kubelet stops its pod"),
    "moved-out": (
        Event.EXTERNAL_REMOVAL,
        "{f} was moved into .staticpodd/parked/ by hand; the kubelet stops its pod",
    ),
    "parked-copy-removed": (
        Event.EXTERNAL_REMOVAL,
        "the parked copy of {f} was removed by someone else; the park stands (the pod stays stopped): "
        "unpark puts its newest version back live, rollback puts it back as the parked copy",
    ),
    "park-broken": (
        Event.PARK_BROKEN,
        "{f} was written back into the manifest directory while it is parked: the kubelet runs it again",
    ),
}
#: Kinds that carry no report of their own. Adoption of a fresh store is reported like the others
#: (at notice: nobody changed anything), so the first file the daemon meets has its entry too.
QUIET_KINDS: frozenset[str] = frozenset()


class Report(FrozenRecord):
    """One journald entry to send: ``fields`` become upper-case journal fields."""

    event: Final[Event]
    priority: Final[int]
    message: Final[str]
    fields: Final[dict[str, Any]]

    def __init__(self, event: Event, priority: int, message: str, fields: dict[str, Any] | None = None) -> None:
        self.event = event
        self.priority = priority
        self.message = message
        self.fields = {} if fields is None else fields


class Action(FrozenRecord):
    """One engine call to make: ``verb`` is ``"restore"`` (restore_last_good), ``"quarantine"`` or
    ``"unpark"``; ``target`` is a component (restore, unpark) or a file name (quarantine)."""

    verb: Final[str]
    target: Final[str]
    reason: Final[str]
    file_name: Final[str | None]

    def __init__(self, verb: str, target: str, reason: str, file_name: str | None = None) -> None:
        self.verb = verb
        self.target = target
        self.reason = reason
        self.file_name = file_name


class Plan(Record):
    """Reports to log and actions to take, in order."""

    reports: list[Report]
    actions: list[Action]

    def __init__(self, reports: list[Report] | None = None, actions: list[Action] | None = None) -> None:
        self.reports = [] if reports is None else reports
        self.actions = [] if actions is None else actions

    def extend(self, other: Plan) -> Plan:
        """Append another plan's reports and actions; returns self."""
        self.reports.extend(other.reports)
        self.actions.extend(other.actions)
        return self


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _short(digest: Any) -> str | None:
    return str(digest)[:12] if digest else None


def finding_summary(findings: Iterable[Any], limit: int = 3) -> str:
    """``code:line`` of the first error findings (``name-missing:3, +2 more``), for a one-line journal MESSAGE."""
    out = []
    for f in findings:
        if _get(f, "severity") == "error":
            loc = f":{_get(f, 'line')}" if _get(f, "line") else ""
            out.append(f"{_get(f, 'code')}{loc}")
    if len(out) > limit:
        out = out[:limit] + [f"+{len(out) - limit} more"]
    return ", ".join(out)


def over_our_limit_only(findings: Iterable[Any], size: int | None) -> int | None:
    """``size`` when the only error among ``findings`` is ``too-large`` and ``size`` (bytes, the
    file's real size) is at most the kubelet's own limit: the file is refused only by
    staticpodd's ``max_manifest_bytes`` and the kubelet still reads it (pkg/kubelet/config/file.go
    maxConfigLength, 10 MiB; docs/kubelet-contract.md "Which files are pods"). None otherwise."""
    from .manifest.decoded import KUBELET_MAX_BYTES

    codes = {str(_get(f, "code")) for f in findings if _get(f, "severity") == "error"}
    if codes != {"too-large"} or size is None or size > KUBELET_MAX_BYTES:
        return None
    return size


def kubelet_drops(findings: Iterable[Any], size: int | None = None) -> bool:
    """True when the kubelet itself refuses the file these findings are about (it drops the pod),
    False when only staticpodd's own strictness refuses it (duplicate keys, a second document, a
    size over ``max_manifest_bytes`` but within 10 MiB ...: the kubelet runs it).

    The gate of ``on_invalid: restore`` and of every message saying "the kubelet drops its pod"
    (the two levels, not one). ``findings``: Finding objects or dicts with ``kubelet``
    (staticpodd.validate.verdict); ``size``: the file's real size, for findings made without a
    ``kubelet`` level. docs/kubelet-contract.md "What the kubelet refuses", "How a file is decoded".
    """
    from .validate.verdict import kubelet_refuses

    items = list(findings)
    if over_our_limit_only(items, size) is not None:
        return False
    return kubelet_refuses(items)


def relist_words(relist: float | None) -> str:
    """How soon the kubelet's next relist comes, in words: its ``fileCheckFrequency`` in seconds
    (:func:`staticpodd.proof.kubeletconfig.file_check_frequency`), or "about 20 s" (its default)
    when not known. docs/kubelet-contract.md "When the kubelet looks"."""
    return f"within {relist:g} s, its fileCheckFrequency" if relist else "about 20 s"


def invalid_sentence(
    file_name: str, summary: str, *, ours_only: int | None, limit: int | None, refused: bool = True,
    relist: float | None = None,
) -> tuple[str, int]:
    """``(MESSAGE start, priority)`` of an INVALID_LIVE report, without the policy note.

    A file the kubelet refuses (``refused``, see :func:`kubelet_drops`): ERR, "the kubelet drops
    its pod at the next relist". A file over only staticpodd's ``max_manifest_bytes``
    (``ours_only`` is its size, see :func:`over_our_limit_only`), or refused only by staticpodd's
    other rules (``refused`` False): WARNING, and the message says the kubelet still runs it.
    """
    if ours_only is None and not refused:
        return (
            f"{file_name} fails staticpodd's own rules ({summary or 'see staticpodctl validate'}); the kubelet "
            "runs it as written, so its pod keeps running",
            WARNING,
        )
    if ours_only is not None:
        return (
            f"{file_name} is {ours_only} bytes, over staticpodd's limit max_manifest_bytes="
            f"{limit if limit is not None else 'default'}; the kubelet reads files under 10 MiB and still runs "
            "it if it is otherwise valid (staticpodd does not look further)",
            WARNING,
        )
    return (
        f"{file_name} fails validation ({summary or 'see staticpodctl validate'}); the kubelet drops "
        f"its pod at the next relist ({relist_words(relist)})",
        ERR,
    )


def restore_note(ours_only: int | None) -> str:
    """The policy note of an INVALID_LIVE report whose file is being restored."""
    if ours_only is not None:
        return (
            "; restoring the last good version anyway: on_invalid=restore enforces staticpodd's own size "
            "limit (raise max_manifest_bytes to keep such a file; the new bytes stay in history)"
        )
    return "; restoring the last good version"


def plan_changes(changes: Iterable[Any], config: Any, *, sizes: dict[str, int] | None = None,
                 relist: float | None = None) -> Plan:
    """Reports and actions for the engine's ``Change`` records from one scan.

    ``Change`` shape (``staticpodd.engine.Change``): ``component, file_name, location
    ("live"|"parked"), kind, digest, version (int | None), valid (bool | None), findings``.
    Every change is reported with actor ``external`` (see :data:`CHANGE_KINDS`). Invalid live
    bytes are INVALID_LIVE at error priority and, under ``on_invalid: restore``, a ``restore``
    action -- except for a broken park (restoring would un-park it) and for adoption of a fresh
    store (there is no earlier version to go back to); the MESSAGE then says why it is not
    restored (a parked component's live path: restoring would end the park). ``sizes``
    (file name -> bytes, from the daemon's stat) lets a file refused only by staticpodd's own
    ``max_manifest_bytes`` be told apart from one the kubelet refuses (:func:`invalid_sentence`).
    Finding *messages* are not copied into the journal (they can quote manifest values); only
    codes and lines are. Fields: ``POLICY`` is the configured ``on_invalid``, ``POLICY_ACTION``
    ``restore`` or ``none``.
    """
    plan = Plan()
    for ch in changes:
        component = _get(ch, "component")
        file_name = _get(ch, "file_name")
        kind = str(_get(ch, "kind") or "modified")
        location = _get(ch, "location") or ("parked" if kind.startswith("parked") else "live")
        version = _get(ch, "version")
        valid = _get(ch, "valid")
        findings = list(_get(ch, "findings") or [])
        fields = {
            "component": component,
            "file_name": file_name,
            "change": kind,
            "location": location,
            "version": version,
            "digest": _get(ch, "digest"),
            "actor": "external",
        }
        if kind not in QUIET_KINDS:
            plan.reports.append(_change_report(kind, file_name, version, fields))
        if valid is not False or location != "live":
            continue
        summary = finding_summary(findings)
        policy = getattr(config, "on_invalid", "alert")
        skip = _why_not_restored(policy, kind, component, file_name)
        size = (sizes or {}).get(str(file_name))
        refused = kubelet_drops(findings, size)
        if skip is None and not refused:
            skip = (
                "not restored: the kubelet runs this file (on_invalid=restore acts only on files the kubelet "
                "refuses)"
            )
        restore = skip is None
        ours_only = over_our_limit_only(findings, size)
        text, prio = invalid_sentence(
            str(file_name), summary, ours_only=ours_only, limit=getattr(config, "max_manifest_bytes", None),
            refused=refused, relist=relist,
        )
        plan.reports.append(
            Report(
                Event.INVALID_LIVE,
                prio,
                text + (restore_note(ours_only) if restore else f"; {skip}"),
                {
                    **fields,
                    "findings": summary or None,
                    "policy": policy,
                    "policy_action": "restore" if restore else "none",
                    "size": ours_only,
                    "kubelet": "refuses" if refused else "accepts",
                },
            )
        )
        if restore:
            plan.actions.append(
                Action(
                    "restore",
                    component,
                    f"on_invalid=restore: invalid external write of {file_name}",
                    file_name=file_name,
                )
            )
    return plan


def _change_report(kind: str, file_name: Any, version: Any, fields: dict[str, Any]) -> Report:
    """The journal report for one change someone else made (``kind`` not in QUIET_KINDS)."""
    event, sentence = CHANGE_KINDS.get(kind, (Event.EXTERNAL_CHANGE, "{f}: " + kind + " by someone else"))
    text = sentence.format(f=file_name)
    if kind == "removed" and _tool_tempfile(file_name):
        text = (f"{file_name}, a {_tool_tempfile(file_name)} temp file, is gone (renamed into place or "
                "removed by its tool)")
    if version is not None:
        text += f" (recorded as version {version})"
    prio = ERR if event is Event.PARK_BROKEN else NOTICE if kind == "adopted" else WARNING
    return Report(event, prio, text, fields)


def _why_not_restored(policy: str, kind: str, component: Any, file_name: Any) -> str | None:
    """Why on_invalid=restore does not put back this invalid live file, before asking whether
    the kubelet refuses it; None when nothing stands in the way."""
    if policy != "restore":
        return "policy on_invalid=alert"
    if kind == "park-broken":
        return (
            f"not restored: {component} is parked, and on_invalid=restore does not apply to a parked "
            "component's live path (putting a version back would end the park; see PARK_BROKEN)"
        )
    if kind == "adopted":
        return "not restored: the store was just adopted, there is no earlier version"
    if not component:
        return "not restored: it is no component's manifest"
    if stray_by_name(str(file_name or "")):
        return "not restored: a leftover is never put back (on_stray decides)"
    return None


#: Validator finding codes about the directory as a whole rather than one file's contents
#: (staticpodd.validate.directory): these are the daemon's "directory findings".
DIRECTORY_CODES = frozenset(
    {
        "stray",
        "duplicate-pod",
        "subdirectory-ignored",
        "symlink",
        "dangling-symlink",
        "loose-permissions",
        "not-regular-file",
        "unreadable",
        "host-port-conflict",
        "host-port-bind-conflict",
    }
)


def is_directory_finding(finding: Any) -> bool:
    """True for a directory-level finding (stray, duplicate, subdirectory, symlink, mode/owner,
    port conflict, node fit); False for a finding about one file's contents."""
    code = str(_get(finding, "code") or "")
    return code in DIRECTORY_CODES or code.startswith(("node-", "out-of")) or "capacity" in code


def finding_event(finding: Any) -> Event:
    """Which journal event reports a directory finding (by its code)."""
    code = str(_get(finding, "code") or "")
    if "stray" in code:
        return Event.STRAY_FOUND
    if "duplicate" in code:
        return Event.DUPLICATE_POD
    return Event.DIRECTORY_PROBLEM


def finding_key(finding: Any) -> tuple[str, str, str]:
    """Identity of a finding across rescans (so one problem is logged once, not every 20 s)."""
    return (str(_get(finding, "code")), str(_get(finding, "path")), str(_get(finding, "message")))


def is_stray(finding: Any) -> bool:
    """True for a finding about a stray file (one that ``on_stray: quarantine`` moves out)."""
    return finding_event(finding) is Event.STRAY_FOUND


def _tool_tempfile(file_name: str | None) -> str | None:
    """The tool (``sed``, ``salt`` …) whose temp-file name shape ``file_name`` has, or None."""
    if not file_name:
        return None
    from .manifest.cmpatterns import identify

    left = identify(file_name)
    return left.pattern.tool if left is not None and left.pattern.kind == "tempfile" else None


def stray_by_name(file_name: str) -> str | None:
    """Why ``file_name`` looks like a leftover (``x.yaml.bak``, ``x~``, ``4913``, ``notes.txt``)
    by its name alone, per the validator's directory rules
    (``staticpodd.validate.directory.stray_reason``); None for a manifest-like name or when the
    validator is not installed."""
    try:
        from .validate.directory import stray_reason
    except ImportError:
        return None
    return stray_reason(file_name) if file_name else None


def plan_findings(
    findings: Iterable[Any],
    config: Any,
    already: set[tuple[str, str, str]],
    *,
    protect: Iterable[str] = (),
) -> Plan:
    """Reports for directory findings not reported before, and quarantine actions for strays.

    ``already`` holds :func:`finding_key` of findings reported earlier; the caller replaces it
    with the keys of ``findings`` afterwards (so a problem that goes away and comes back is
    reported again). Under ``on_stray: quarantine`` every stray is quarantined, also ones
    reported before (a previous attempt may have failed), except the file names in ``protect``
    (a component's manifest, a file restored in this very pass: never moved out of the kubelet's
    sight). Every report's MESSAGE starts with the file name (``etcd.yaml.bak: stray file …``).
    """
    import os

    protected = set(protect)
    plan = Plan()
    quarantine = getattr(config, "on_stray", "alert") == "quarantine"
    queued: set[str] = set()
    for f in findings:
        event = finding_event(f)
        path = str(_get(f, "path") or "")
        name = os.path.basename(path.rstrip("/"))
        if finding_key(f) not in already:
            severity = _get(f, "severity")
            prio = ERR if severity == "error" else WARNING if severity == "warning" else NOTICE
            message = str(_get(f, "message") or _get(f, "code"))
            if name and not message.startswith(name + ":"):
                message = f"{name}: {message}"
            if event is Event.STRAY_FOUND:
                if not quarantine:
                    message += "; policy on_stray=alert"
                elif name in protected:
                    message += "; not quarantined: it is a component's manifest"
                else:
                    message += "; quarantining it"
            plan.reports.append(
                Report(
                    event,
                    prio,
                    message,
                    {
                        "file_name": name or None,
                        "finding": _get(f, "code"),
                        "severity": severity,
                        "path": path or None,
                        "hint": _get(f, "hint"),
                    },
                )
            )
        if quarantine and event is Event.STRAY_FOUND and name and name not in queued and name not in protected:
            queued.add(name)
            plan.actions.append(Action("quarantine", name, f"on_stray=quarantine: {_get(f, 'code')}", file_name=name))
    return plan


def plan_expired_parks(parks: Iterable[Any], now: float) -> Plan:
    """PARK_EXPIRED reports and ``unpark`` actions for parks whose ``until`` is at or before ``now``.

    ``parks``: ParkRecord-like (``component, file_name, until, actor, reason``); ``now`` epoch s.
    """
    plan = Plan()
    for p in parks:
        until = _get(p, "until")
        if until is None or until > now:
            continue
        component = _get(p, "component")
        plan.reports.append(
            Report(
                Event.PARK_EXPIRED,
                NOTICE,
                f"park of {component} by {_get(p, 'actor')} expired {max(0, int(now - until))} s ago; unparking",
                {
                    "component": component,
                    "file_name": _get(p, "file_name"),
                    "actor": "staticpodd",
                    "parked_by": _get(p, "actor"),
                    "reason": _get(p, "reason"),
                    "until": int(until),
                },
            )
        )
        plan.actions.append(Action("unpark", component, "park deadline passed", file_name=_get(p, "file_name")))
    return plan


def status_line(summary: dict[str, Any], problems: Sequence[dict[str, Any]]) -> str:
    """One-line summary for sd_notify ``STATUS=`` and the heartbeat.

    ``summary``: ``{"live": n, "parked": n, "missing": n}``; ``problems``: dicts with ``code``
    and ``path``/``component``. E.g. ``4 live, 1 parked; 2 problems: stray kube-apiserver.yaml.bak, …``.
    """
    text = f"{summary.get('live', 0)} live, {summary.get('parked', 0)} parked"
    if summary.get("missing"):
        text += f", {summary['missing']} missing"
    if not problems:
        return text + "; no problems"
    first = problems[0]
    what = first.get("path") or first.get("component") or ""
    import os

    plural = "s" if len(problems) != 1 else ""
    text += f"; {len(problems)} problem{plural}: {first.get('code')} {os.path.basename(what)}"
    if len(problems) > 1:
        text += ", …"
    return text


__all__ = [
    "Action",
    "Plan",
    "Report",
    "finding_event",
    "invalid_sentence",
    "relist_words",
    "kubelet_drops",
    "is_directory_finding",
    "over_our_limit_only",
    "restore_note",
    "finding_key",
    "is_stray",
    "plan_changes",
    "plan_expired_parks",
    "plan_findings",
    "status_line",
    "stray_by_name",
]
