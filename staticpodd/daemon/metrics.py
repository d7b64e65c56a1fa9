"""Prometheus metrics as a node_exporter textfile (``staticpodd.prom``).

The daemon builds a :class:`MetricsSnapshot` with :func:`snapshot_from_status` on each loop,
turns it into exposition text with :func:`render` (pure) and writes it with
:func:`write_textfile` into node_exporter's ``--collector.textfile.directory`` (configurable;
Debian's prometheus-node-exporter uses ``/var/lib/prometheus/node-exporter``). node_exporter
reads only ``*.prom`` files, so the temp file (a dot-name ending in ``.tmp``) is never scraped
half-written; the rename makes the new file appear whole. node_exporter itself exports
``node_textfile_mtime_seconds{file="…/staticpodd.prom"}``: alert when it stops moving.

Families (gauges unless named ``_total``; every family has HELP and TYPE; one sample per
component where labelled). Components whose file is gone for good (``removed``) have no
per-component series: a removed component's series would otherwise stay forever.

==========================================================  =====================================
``staticpodd_build_info{version}``                          1
``staticpodd_start_time_seconds``                           daemon start, unix time
``staticpodd_components{state}``                            count per state (live, parked, missing)
``staticpodd_component_state{component,file_name,state}``   1 for the current state, 0 for others
``staticpodd_component_version{component}``                 recorded version seq in force
``staticpodd_component_info{component,file_name,digest}``   1; digest = 12 hex chars
``staticpodd_component_drift{component}``                   1 when live bytes differ from the store
``staticpodd_component_parked_since_timestamp_seconds``     when it was parked, unix time
``staticpodd_component_park_age_seconds``                   now - parked since
``staticpodd_component_park_deadline_timestamp_seconds``    park ``until``, unix time (if any)
``staticpodd_component_last_validation_failure_timestamp_seconds``  last time its file failed
``staticpodd_component_validation_errors{component}``       error findings on it now
``staticpodd_strays``                                       stray files now (distinct names)
``staticpodd_duplicates``                                   duplicate-pod findings now
``staticpodd_findings{severity}``                           findings now, per severity
``staticpodd_external_changes_total``                        counter: writes/removals by others
``staticpodd_restores_total``                                counter: on_invalid restores
``staticpodd_quarantines_total``                             counter: strays moved to quarantine
``staticpodd_refused_applies_total``                         counter: manifests the gate refused
``staticpodd_failed_unparks_total``                          counter: deadline unparks that failed
``staticpodd_last_external_change_timestamp_seconds``        unix time of the last external change
``staticpodd_last_restore_timestamp_seconds``                unix time of the last restore
==========================================================  =====================================

The counters and the two timestamps are read from the version store (:func:`store_counters`),
so they survive a daemon restart and count what staticpodctl did as well (a refused apply).

Example alerts: ``time() > staticpodd_component_park_deadline_timestamp_seconds + 300`` (a park
that should have ended), ``staticpodd_strays > 0``, ``staticpodd_component_drift == 1``.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..errors import FsError
from ..record import FrozenRecord
from ..store.tallies import store_tally
from ..termsafe import printable_name

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

TEXTFILE_NAME = "staticpodd.prom"
STATES = ("live", "parked", "missing")
#: counter family suffix -> HELP text; values from :func:`store_counters`
COUNTERS: dict[str, str] = {
    "external_changes": "Changes to the manifest directory made by someone else (writes, removals, moves, "
    "mode changes; not the adoption of a fresh store), recorded in the version store.",
    "restores": "Invalid live manifests the daemon replaced with the last valid version (on_invalid: restore).",
    "quarantines": "Stray files moved out of the kubelet's sight into .staticpodd/quarantine/.",
    "refused_applies": "Manifests the validation gate refused (apply, edit, rollback, restore): nothing was written.",
    "failed_unparks": "Park deadlines at which the daemon's unpark failed (the component stays parked).",
}


class ComponentMetrics(FrozenRecord):
    """One component's numbers. Timestamps are unix seconds (float); None = not applicable."""

    component: Final[str]
    file_name: Final[str]
    state: Final[str]  # live | parked | missing
    version: Final[int | None]
    digest: Final[str | None]
    drift: Final[bool]
    parked_since: Final[float | None]
    parked_until: Final[float | None]
    last_validation_failure: Final[float | None]
    validation_errors: Final[int]

    def __init__(self, component: str, file_name: str, state: str, version: int | None = None,
                 digest: str | None = None, drift: bool = False, parked_since: float | None = None,
                 parked_until: float | None = None, last_validation_failure: float | None = None,
                 validation_errors: int = 0) -> None:
        self.component = component
        self.file_name = file_name
        self.state = state
        self.version = version
        self.digest = digest
        self.drift = drift
        self.parked_since = parked_since
        self.parked_until = parked_until
        self.last_validation_failure = last_validation_failure
        self.validation_errors = validation_errors


class MetricsSnapshot(FrozenRecord):
    """Everything :func:`render` needs; ``now`` and ``started_at`` are unix seconds."""

    now: Final[float]
    started_at: Final[float]
    build_version: Final[str]
    components: Final[tuple[ComponentMetrics, ...]]
    strays: Final[int]
    duplicates: Final[int]
    findings_by_severity: Final[Mapping[str, int]]
    #: ``{suffix in COUNTERS: count}``; empty when the store could not be read
    counters: Final[Mapping[str, int]]
    last_external_change: Final[float | None]
    last_restore: Final[float | None]

    def __init__(self, now: float, started_at: float, build_version: str = __version__,
                 components: tuple[ComponentMetrics, ...] = (), strays: int = 0, duplicates: int = 0,
                 findings_by_severity: Mapping[str, int] | None = None, counters: Mapping[str, int] | None = None,
                 last_external_change: float | None = None, last_restore: float | None = None) -> None:
        self.now = now
        self.started_at = started_at
        self.build_version = build_version
        self.components = components
        self.strays = strays
        self.duplicates = duplicates
        self.findings_by_severity = {} if findings_by_severity is None else findings_by_severity
        self.counters = {} if counters is None else counters
        self.last_external_change = last_external_change
        self.last_restore = last_restore

    def last_failures(self) -> dict[str, float]:
        """``{component: last validation failure time}`` to carry into the next snapshot."""
        return {
            c.component: c.last_validation_failure for c in self.components if c.last_validation_failure is not None
        }


def is_stray_finding(code: str) -> bool:
    """True for a validator finding code that reports a stray file (``stray``, ``stray-backup`` …).

    Matching by substring keeps this module independent of the validator's exact code list.
    """
    return "stray" in code


def is_duplicate_finding(code: str) -> bool:
    """True for a finding code that reports two files defining one namespace/name."""
    return "duplicate" in code


def _finding_get(finding: Any, key: str) -> Any:
    if isinstance(finding, Mapping):
        return finding.get(key)
    return getattr(finding, key, None)


def snapshot_from_status(
    status: Mapping[str, Any],
    findings: Iterable[Any],
    *,
    started_at: float,
    now: float,
    previous: MetricsSnapshot | None = None,
    build_version: str = __version__,
    history: Mapping[str, Any] | None = None,
) -> MetricsSnapshot:
    """Adapt the engine's status dict and the validator's findings to a :class:`MetricsSnapshot`.

    ``status``: ``{"components": [{"component", "file_name", "state": "live"|"parked"|"missing",
    "version": int|None, "digest": str|None, "drift": bool, "parked": {"since", "until",
    "actor", "reason"} | None}]}`` (other keys are ignored); ``since``/``until`` are epoch
    seconds or ISO 8601 UTC strings as ``Engine.status()`` gives them (``until`` may be None).
    ``findings``: ``staticpodd.validate.Finding`` objects (or their ``to_dict()`` form); used:
    ``code``, ``severity``, ``path``. An ``error`` finding on a component's file (by file name) is
    a validation failure of that component; stray and duplicate-pod findings are only counted in
    ``strays``/``duplicates`` (the validator puts duplicate-pod on the file that *loses*).
    ``strays`` counts distinct file names from stray findings and status rows with
    ``"stray": true``. ``previous``: the last snapshot, whose last-failure times carry over while
    a component validates clean. ``history``: :func:`store_counters`'s result (counters and
    last-change times). Components in state ``removed`` are left out. Pure; raises
    KeyError/TypeError/ValueError on a malformed status dict.
    """
    last = previous.last_failures() if previous is not None else {}
    errors_by_file: dict[str, int] = {}
    by_severity: dict[str, int] = {}
    stray_files: set[str] = {
        str(c.get("file_name")) for c in status.get("components", [])
        if c.get("stray") and c.get("file_name") and c.get("state") != "removed"  # a removed stray is gone
    }
    duplicates = 0
    for f in findings:
        code = str(_finding_get(f, "code") or "")
        severity = str(_finding_get(f, "severity") or "error")
        by_severity[severity] = by_severity.get(severity, 0) + 1
        if is_stray_finding(code):
            stray_files.add(os.path.basename(str(_finding_get(f, "path") or code)))
            continue
        if is_duplicate_finding(code):
            duplicates += 1
            continue
        path = _finding_get(f, "path")
        if severity == "error" and path:
            name = os.path.basename(str(path))
            errors_by_file[name] = errors_by_file.get(name, 0) + 1

    comps: list[ComponentMetrics] = []
    for c in status.get("components", []):
        if c.get("state") == "removed":
            continue
        component = str(c["component"])
        file_name = str(c.get("file_name") or component)
        errors = errors_by_file.get(file_name, 0)
        failed_at = now if errors else last.get(component)
        parked = c.get("parked") or None
        version = c.get("version")
        comps.append(
            ComponentMetrics(
                component=component,
                file_name=file_name,
                state=str(c.get("state", "live")),
                version=int(version) if version is not None else None,
                digest=c.get("digest") or None,
                drift=bool(c.get("drift", False)),
                parked_since=_num(parked.get("since")) if parked else None,
                parked_until=_num(parked.get("until")) if parked else None,
                last_validation_failure=failed_at,
                validation_errors=errors,
            )
        )
    comps.sort(key=lambda m: m.component)
    return MetricsSnapshot(
        now=now,
        started_at=started_at,
        build_version=build_version,
        components=tuple(comps),
        strays=len(stray_files),
        duplicates=duplicates,
        findings_by_severity=by_severity,
        counters=dict((history or {}).get("counters") or {}),
        last_external_change=(history or {}).get("last_external_change"),
        last_restore=(history or {}).get("last_restore"),
    )


def store_counters(db_path: Path | str) -> dict[str, Any]:
    """Counters and last-change times from the version store (SQLite, opened read-only).

    Returns ``{"counters": {suffix: int for suffix in COUNTERS}, "last_external_change":
    float | None, "last_restore": float | None}`` (unix seconds). What counts: versions with
    action ``external`` except adoption (reason ``first seen (adopted)``) plus events with actor
    ``external`` except ``adopted`` (external changes); versions with action ``restore``
    (restores); events ``quarantined``, ``refused-invalid``, ``unpark-failed``
    (:mod:`staticpodd.store.tallies`). Rows that retention pruned are carried over in the store, so
    the counters only go up. No store yet: all zero. Raises FsError when the store cannot be read.
    """
    import sqlite3

    if not Path(db_path).exists():  # nothing recorded yet (an empty directory before kubeadm)
        return {"counters": dict.fromkeys(COUNTERS, 0), "last_external_change": None, "last_restore": None}
    uri = f"file:{Path(db_path).as_posix()}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=5.0)
    except sqlite3.Error as exc:
        raise FsError(f"cannot open the version store for metrics: {exc}", path=str(db_path)) from exc
    try:
        counts, newest = store_tally(db)
    except sqlite3.Error as exc:
        raise FsError(f"cannot read the version store for metrics: {exc}", path=str(db_path)) from exc
    finally:
        db.close()
    return {"counters": counts, **newest}


def _num(value: Any) -> float | None:
    """Epoch seconds from a number or an ISO 8601 UTC string (``2026-11-29T18:30:00Z``, as
    ``store.ParkRecord.to_dict`` writes it); None stays None. Raises ValueError otherwise."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


# ---- exposition text ---------------------------------------------------------------------------


def escape_label_value(value: str) -> str:
    r"""Escape a label value for the text format: ``\`` -> ``\\``, ``"`` -> ``\"``, newline -> ``\n``."""
    return printable_name(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    r"""Escape HELP text: ``\`` -> ``\\``, newline -> ``\n``."""
    return printable_name(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value: integers without a decimal point, floats by repr, ``NaN``/``+Inf``/``-Inf``."""
    v = float(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    return repr(v)


Sample = tuple[Mapping[str, str], float]


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, help_text: str, samples: Sequence[Sample], *, kind: str = "gauge") -> None:
        if not samples:
            return
        self.lines.append(f"# HELP {name} {escape_help(help_text)}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            if labels:
                inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
                self.lines.append(f"{name}{{{inner}}} {format_value(value)}")
            else:
                self.lines.append(f"{name} {format_value(value)}")


def render(snapshot: MetricsSnapshot) -> str:
    """The textfile for ``snapshot``: exposition format 0.0.4, ends with a newline. Pure.

    Families and labels: see the module docstring. Components appear in name order; families
    with no sample are left out (e.g. no park deadline when nothing is parked with one).

    Long because: it is the textfile itself, one family after another in the order they are
    written out; each block is a name, a help text and its samples, and splitting it would only
    scatter that order across functions a reader has to reassemble.
    """
    w = _Writer()
    comps = sorted(snapshot.components, key=lambda c: c.component)
    w.family(
        "staticpodd_build_info",
        "staticpodd build information; the value is always 1.",
        [({"version": snapshot.build_version}, 1)],
    )
    w.family(
        "staticpodd_start_time_seconds",
        "Unix time the staticpodd daemon started.",
        [({}, snapshot.started_at)],
    )
    counts = {s: 0 for s in STATES}
    for c in comps:
        counts[c.state] = counts.get(c.state, 0) + 1
    w.family(
        "staticpodd_components",
        "Number of components per state (live, parked, missing).",
        [({"state": s}, n) for s, n in counts.items()],
    )
    w.family(
        "staticpodd_component_state",
        "1 for the state the component is in (live, parked, missing), 0 for the others.",
        [
            ({"component": c.component, "file_name": c.file_name, "state": s}, 1 if c.state == s else 0)
            for c in comps
            for s in (STATES if c.state in STATES else (*STATES, c.state))
        ],
    )
    w.family(
        "staticpodd_component_version",
        "Recorded version number (seq) of the component's manifest in force (live or parked).",
        [({"component": c.component}, c.version) for c in comps if c.version is not None],
    )
    w.family(
        "staticpodd_component_info",
        "Component file name and manifest digest (sha256, 12 hex digits); the value is always 1.",
        [({"component": c.component, "file_name": c.file_name, "digest": (c.digest or "")[:12]}, 1) for c in comps],
    )
    w.family(
        "staticpodd_component_drift",
        "1 when the live manifest differs from the newest recorded version (written by someone else).",
        [({"component": c.component}, 1 if c.drift else 0) for c in comps],
    )
    parked = [c for c in comps if c.state == "parked" and c.parked_since is not None]
    w.family(
        "staticpodd_component_parked_since_timestamp_seconds",
        "Unix time the component was parked.",
        [({"component": c.component}, c.parked_since) for c in parked if c.parked_since is not None],
    )
    w.family(
        "staticpodd_component_park_age_seconds",
        "Seconds the component has been parked.",
        [
            ({"component": c.component}, max(0.0, snapshot.now - c.parked_since))
            for c in parked
            if c.parked_since is not None
        ],
    )
    w.family(
        "staticpodd_component_park_deadline_timestamp_seconds",
        "Unix time after which the daemon unparks the component (absent: parked without deadline).",
        [({"component": c.component}, c.parked_until) for c in parked if c.parked_until is not None],
    )
    w.family(
        "staticpodd_component_last_validation_failure_timestamp_seconds",
        "Unix time the component's manifest last failed validation (since the daemon started).",
        [
            ({"component": c.component}, c.last_validation_failure)
            for c in comps
            if c.last_validation_failure is not None
        ],
    )
    w.family(
        "staticpodd_component_validation_errors",
        "Validation findings of severity error on the component's manifest now.",
        [({"component": c.component}, c.validation_errors) for c in comps],
    )
    w.family(
        "staticpodd_strays",
        "Stray files in the manifest directory now (the kubelet runs them as pods).",
        [({}, snapshot.strays)],
    )
    w.family(
        "staticpodd_duplicates",
        "Findings of two files defining the same namespace/name now (the lexically last file wins).",
        [({}, snapshot.duplicates)],
    )
    w.family(
        "staticpodd_findings",
        "Validator findings on the manifest directory now, per severity.",
        [({"severity": s}, n) for s, n in sorted(snapshot.findings_by_severity.items())],
    )
    for suffix, help_text in COUNTERS.items():
        if suffix in snapshot.counters:
            w.family(f"staticpodd_{suffix}_total", help_text, [({}, snapshot.counters[suffix])], kind="counter")
    w.family(
        "staticpodd_last_external_change_timestamp_seconds",
        "Unix time of the last change made by someone else (from the version store; survives restarts).",
        [({}, snapshot.last_external_change)] if snapshot.last_external_change is not None else [],
    )
    w.family(
        "staticpodd_last_restore_timestamp_seconds",
        "Unix time of the last on_invalid restore (from the version store; survives restarts).",
        [({}, snapshot.last_restore)] if snapshot.last_restore is not None else [],
    )
    return "\n".join(w.lines) + "\n"


# ---- atomic write ------------------------------------------------------------------------------


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_textfile(directory: Path, text: str, *, name: str = TEXTFILE_NAME) -> Path:
    """Atomically replace ``<directory>/<name>`` with ``text``; returns the file's path.

    Writes a temp file ``.<name>.<random>.tmp`` in the same directory (a dot-name not ending in
    ``.prom``, so node_exporter never reads it), mode 0644, fsyncs it, renames it over ``name``
    and fsyncs the directory. A reader sees the old file or the new one, never a mix. On any
    failure the temp file is removed and the old file is left as it was.
    ``name`` must end in ``.prom`` and contain no ``/``. The directory is not created.
    Raises FsError (with the path) when the directory is missing or a write fails.
    """
    if "/" in name or not name.endswith(".prom") or name.startswith("."):
        raise ValueError(f"textfile name must be a plain *.prom name, not {name!r}")
    directory = Path(directory)
    target = directory / name
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise FsError(
            f"cannot create a temp file for the metrics textfile: {exc.strerror}",
            path=str(directory),
            hint="create the node_exporter textfile directory or point metrics.directory elsewhere",
        ) from exc
    try:
        try:
            os.fchmod(fd, 0o644)
            data = text.encode("utf-8")
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise FsError(f"cannot write the metrics textfile: {exc.strerror}", path=str(target)) from exc
    try:
        _fsync_dir(directory)
    except OSError:
        pass  # the rename happened; durability of the directory entry is best effort
    return target
