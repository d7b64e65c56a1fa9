"""The values the verbs take and return, and the small text helpers they share.

:class:`Actor` (who acts), :class:`Target` (a resolved component), :class:`Change` (one external
change a scan found), :class:`Result` (what a changing verb did, the ``--json`` body) and
:class:`OpWarning` (what an operation did not stop for); plus reading durations and
``COMPONENT@N`` specs and writing diffs and hints. Pure: no store, no directory, no lock.
"""

from __future__ import annotations

import os
import pwd
import re

from ..errors import UsageError
from ..record import FrozenRecord, Record
from ..store.versions import ParkRecord, Version
from ..termsafe import shell_word

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

EXTERNAL = "external"


class Actor(FrozenRecord):
    """Who acts: the invoking user (``SUDO_USER`` through sudo), the daemon, or ``external``."""

    name: Final[str]
    uid: Final[int]
    via: Final[str | None]

    def __init__(self, name: str, uid: int, via: str | None = None) -> None:
        self.name = name
        self.uid = uid
        self.via = via

    @classmethod
    def current(cls) -> Actor:
        """The user running this process; through sudo, the user who ran sudo (``via="sudo"``)."""
        uid = os.getuid()
        try:
            me = pwd.getpwuid(uid).pw_name
        except KeyError:
            me = str(uid)
        sudo_user = os.environ.get("SUDO_USER")
        if uid == 0 and sudo_user and sudo_user != "root":
            return cls(sudo_user, uid, "sudo")
        return cls(me, uid, None)

    @classmethod
    def daemon(cls) -> Actor:
        """The staticpodd daemon acting on its own (restores, expired parks, quarantine)."""
        return cls("staticpodd", os.getuid(), None)

    def __str__(self) -> str:
        return f"{self.name} (via {self.via})" if self.via else self.name


class Target(FrozenRecord):
    """A resolved component: its file name and where its file is now."""

    component: Final[str]
    file_name: Final[str]
    live: Final[bool]
    parked: Final[bool]

    def __init__(self, component: str, file_name: str, live: bool, parked: bool) -> None:
        self.component = component
        self.file_name = file_name
        self.live = live
        self.parked = parked

    @property
    def location(self) -> str | None:
        """``live``, ``parked`` or None (recorded only)."""
        return "live" if self.live else "parked" if self.parked else None


class OpWarning(Record):
    """Something an operation did not stop for but the operator must see (a post-hook that
    failed, a rollback across a pod rename): shaped like a validator finding for ``warnings``."""

    path: str
    message: str
    code: str
    severity: str

    def __init__(self, path: str, message: str, code: str = "hook-failed", severity: str = "warning") -> None:
        self.path = path
        self.message = message
        self.code = code
        self.severity = severity

    @classmethod
    def of(cls, r: Any, phase: str, verb: str) -> OpWarning:
        """From a :class:`staticpodd.engine.hooks.HookResult`."""
        detail = {"failed": f"exited with status {r.returncode}", "signaled": f"was killed by signal {r.signal}",
                  "timeout": "timed out and was killed", "refused": f"was not run: {r.reason}"}[r.status]
        tail = f": {r.stderr_tail[-1]}" if getattr(r, "stderr_tail", None) else ""
        return cls(str(r.path), f"{phase}-{verb} hook {r.name} {detail}{tail} (the {verb} itself is done)")

    def format(self) -> str:
        """One line for a terminal."""
        return f"{self.path}: warning[{self.code}]: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape (``code``, ``severity``, ``path``, ``message``)."""
        return {"code": self.code, "severity": self.severity, "path": self.path, "message": self.message}


class Change(Record):
    """One external change found by :meth:`Engine.scan`.

    ``kind``: created, modified, removed, moved-in, moved-out, mode-changed, parked-copy-edited,
    parked-copy-removed, park-broken, unparked-by-hand. ``version`` is the recorded seq when new
    bytes were recorded. ``valid`` / ``findings`` are set for live bytes when scanning with
    ``validate=True``.
    """

    component: str
    file_name: str
    location: str
    kind: str
    digest: str | None
    version: int | None
    valid: bool | None
    findings: list[Any]

    def __init__(self, component: str, file_name: str, location: str, kind: str, digest: str | None = None,
                 version: int | None = None, valid: bool | None = None, findings: list[Any] | None = None) -> None:
        self.component = component
        self.file_name = file_name
        self.location = location
        self.kind = kind
        self.digest = digest
        self.version = version
        self.valid = valid
        self.findings = [] if findings is None else findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "file_name": self.file_name,
            "location": self.location,
            "kind": self.kind,
            "digest": self.digest,
            "version": self.version,
            "valid": self.valid,
            "findings": [f.to_dict() for f in self.findings],
        }


class Result(Record):
    """What a changing verb did (or, with ``check``, would do). ``to_dict`` is the --json body."""

    action: str
    component: str
    file_name: str
    changed: bool
    msg: str
    location: str | None
    version: Version | None
    previous_digest: str | None
    digest: str | None
    diff: str | None
    warnings: list[Any]
    park: ParkRecord | None
    check: bool
    extra: dict[str, Any]
    #: Ansible's diff form: before/after texts and their headers (``--json``'s ``diff``).
    diff_pair: dict[str, Any]

    def __init__(self, action: str, component: str, file_name: str, changed: bool, msg: str,
                 location: str | None = None, version: Version | None = None, previous_digest: str | None = None,
                 digest: str | None = None, diff: str | None = None, warnings: list[Any] | None = None,
                 park: ParkRecord | None = None, check: bool = False, extra: dict[str, Any] | None = None,
                 diff_pair: dict[str, Any] | None = None) -> None:
        self.action = action
        self.component = component
        self.file_name = file_name
        self.changed = changed
        self.msg = msg
        self.location = location
        self.version = version
        self.previous_digest = previous_digest
        self.digest = digest
        self.diff = diff
        self.warnings = [] if warnings is None else warnings
        self.park = park
        self.check = check
        self.extra = {} if extra is None else extra
        self.diff_pair = {} if diff_pair is None else diff_pair

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action,
            "component": self.component,
            "file_name": self.file_name,
            "changed": self.changed,
            "check": self.check,
            "msg": self.msg,
            "location": self.location,
            "version": self.version.seq if self.version else None,
            "digest": self.digest,
            "previous_digest": self.previous_digest,
            "diff": dict(self.diff_pair, text=self.diff) if self.diff is not None else None,
            "warnings": [w.to_dict() for w in self.warnings],
            "park": self.park.to_dict() if self.park else None,
        }
        out.update(self.extra)
        return out


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``1h30m``, ``1.5m``, ``500ms``, ``1d``, or bare seconds ``300`` -> seconds.

    Raises UsageError naming the text. (Zero is allowed here; callers that need more say so.)
    """
    t = str(text).strip().lower()
    # ASCII digits only ([0-9], not \d): Python's \d and float() also take other scripts' digits
    if re.fullmatch(r"[0-9]+(?:\.[0-9]*)?", t):
        return float(t)
    pos, value = 0, 0.0
    for m in re.finditer(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ms|s|m|h|d)", t):
        if m.start() != pos:
            break
        value += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not t or pos != len(t):
        raise UsageError(f"cannot read duration {text!r}", hint="use e.g. 90s, 30m, 2h, 1h30m or 1d")
    return value


def unified_diff(a: bytes | None, b: bytes | None, label_a: str, label_b: str) -> str:
    """Unified diff (difflib) of two manifests; non-UTF-8 bytes are shown with replacement chars."""
    import difflib

    la = (a or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lb = (b or b"").decode("utf-8", "replace").splitlines(keepends=True)
    lines = list(difflib.unified_diff(la, lb, fromfile=label_a, tofile=label_b))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def split_at(spec: str) -> tuple[str, int | None]:
    """``kube-apiserver@3`` -> ``("kube-apiserver", 3)``; ``kube-apiserver`` -> ``(…, None)``."""
    if "@" in spec:
        name, _, seq = spec.rpartition("@")
        if not seq.isdigit() or not name:
            raise UsageError(f"cannot read {spec!r}", hint="use COMPONENT@N, e.g. kube-apiserver@3")
        return name, int(seq)
    return spec, None


def _q(name: str) -> str:
    """``name`` as a shell word for a hint (:func:`staticpodd.termsafe.shell_word`)."""
    return shell_word(name)


def _mode_dict(x: Any) -> dict[str, Any]:
    return {"mode": f"{x.mode:04o}" if x.mode is not None else None, "uid": x.uid, "gid": x.gid}


def _human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
