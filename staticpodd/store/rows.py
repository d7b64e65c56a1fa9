"""The version store's tables and rows: the SQL that creates them and the records it returns.

``_SCHEMA`` (the DDL :class:`staticpodd.store.versions.VersionStore` runs on a new or migrated store; the
tables are described in :mod:`staticpodd.store.versions`), :class:`Version`, :class:`ParkRecord`,
:class:`Intent`, :class:`Observed`, and :func:`digest_of`/:func:`iso`. Split out of store.py
; ``staticpodd.store.versions`` re-exports every name, which is where callers import them from.

Digests in the two tables that grow with every version, ``blobs`` and ``versions``, are the 32
raw sha256 bytes (a ``BLOB``, schema 4), not the 64-character hex text: stored once in each row
(and once more in each index entry), the hex was a third of a small manifest's row. Every other
table, every row returned and every API above the store keep the hex text (:func:`digest_key`
turns one into the other, :func:`digest_keys` gives both for lookups that must also find rows an
older writer keyed by hex; :data:`DIGEST_HEX` reads one back as hex in SQL).
"""

from __future__ import annotations

import time

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (
    digest BLOB PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    codec TEXT NOT NULL DEFAULT 'raw'
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS versions (
    id INTEGER PRIMARY KEY,
    component TEXT NOT NULL,
    seq INTEGER NOT NULL,
    file_name TEXT NOT NULL,
    digest BLOB NOT NULL REFERENCES blobs(digest),
    size INTEGER NOT NULL,
    mode INTEGER,
    uid INTEGER,
    gid INTEGER,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    actor_via TEXT,
    reason TEXT,
    location TEXT NOT NULL DEFAULT 'live',
    created_at REAL NOT NULL,
    UNIQUE (component, seq)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    component TEXT,
    file_name TEXT,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT,
    details TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS parks (
    component TEXT PRIMARY KEY,
    file_name TEXT NOT NULL,
    digest TEXT NOT NULL,
    parked_at REAL NOT NULL,
    until REAL,
    actor TEXT NOT NULL,
    actor_via TEXT,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS intents (
    id INTEGER PRIMARY KEY,
    op TEXT NOT NULL,
    component TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS verdicts (
    digest TEXT NOT NULL,
    validator TEXT NOT NULL,
    ok INTEGER NOT NULL,
    PRIMARY KEY (digest, validator)
);
CREATE TABLE IF NOT EXISTS observed (
    key TEXT PRIMARY KEY,
    component TEXT NOT NULL,
    file_name TEXT NOT NULL,
    location TEXT NOT NULL,
    digest TEXT NOT NULL,
    mode INTEGER,
    uid INTEGER,
    gid INTEGER,
    updated_at REAL NOT NULL,
    sig TEXT
);
CREATE TABLE IF NOT EXISTS identities (
    digest TEXT PRIMARY KEY,
    namespace TEXT,
    name TEXT
);
CREATE TABLE IF NOT EXISTS facts (
    digest TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (digest, kind)
);
CREATE INDEX IF NOT EXISTS events_by_component ON events (component, id);
"""

#: The daemon's directory findings (:meth:`staticpodd.store.versions.VersionStore.set_dir_findings`): not in
#: ``_SCHEMA`` but created on first use, within schema 4. A cache that code from before it never
#: reads, so it needs no schema bump, and an older staticpodd still opens a store that has it.
_DIRFINDINGS = """
CREATE TABLE IF NOT EXISTS dirfindings (
    directory TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    findings BLOB NOT NULL,
    saved_at REAL NOT NULL
)
"""


#: SQL reading the ``digest`` column of ``blobs``/``versions`` as lower-case hex text, whatever the
#: schema: a BLOB (schema 4) is hexed; text (schema <= 3, or a digest the upgrade could not read
#: as hex and kept as it was) is returned as it is.
DIGEST_HEX = "(CASE typeof(digest) WHEN 'blob' THEN lower(hex(digest)) ELSE digest END)"


def digest_key(digest: str) -> bytes | str:
    """The value a hex ``digest`` is stored as in ``blobs``/``versions`` (schema 4): its 32 raw
    bytes. Anything that is not canonical lower-case sha256 hex (64 characters) is returned as
    the text it is, which matches no BLOB (so looking it up finds nothing, as before) and is
    exactly how the upgrade keeps such a value (:func:`staticpodd.store.migrations.to_v4`)."""
    if len(digest) == 64:
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            return digest
        if raw.hex() == digest:
            return raw
    return digest


def digest_keys(digest: str) -> tuple[bytes | str, str]:
    """Both values a hex ``digest`` may be stored as in ``blobs``/``versions``, for ``digest IN
    (?, ?)``: its raw bytes (schema 4) and its hex text (a schema-2/3 store opened read-only, or
    a row the previous release's daemon wrote after the upgrade, before it was restarted)."""
    return digest_key(digest), digest


def digest_of(data: bytes) -> str:
    """sha256 hex digest of ``data``: the content digest every verb, the store and the journal use
    (show 12 characters to humans).

    hashlib is imported here, on the first digest, not with the module: loading OpenSSL costs a
    read verb whose files all match their stat signatures a third of its start-up."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


class Version(FrozenRecord):
    """One recorded version of a component. ``created_at`` is epoch seconds (UTC)."""

    component: Final[str]
    seq: Final[int]
    file_name: Final[str]
    digest: Final[str]
    size: Final[int]
    mode: Final[int | None]
    uid: Final[int | None]
    gid: Final[int | None]
    action: Final[str]
    actor: Final[str]
    actor_via: Final[str | None]
    reason: Final[str | None]
    location: Final[str]
    created_at: Final[float]

    def __init__(self, component: str, seq: int, file_name: str, digest: str, size: int, mode: int | None,
                 uid: int | None, gid: int | None, action: str, actor: str, actor_via: str | None, reason: str | None,
                 location: str, created_at: float) -> None:
        self.component = component
        self.seq = seq
        self.file_name = file_name
        self.digest = digest
        self.size = size
        self.mode = mode
        self.uid = uid
        self.gid = gid
        self.action = action
        self.actor = actor
        self.actor_via = actor_via
        self.reason = reason
        self.location = location
        self.created_at = created_at

    def to_dict(self) -> dict[str, Any]:
        """JSON shape used by ``--json`` (mode as an octal string, e.g. ``"0600"``)."""
        d = {f: getattr(self, f) for f in _VERSION_FIELDS}  # not asdict(): no deep copy per row
        d["mode"] = f"{self.mode:04o}" if self.mode is not None else None
        d["created_at"] = iso(self.created_at)
        d["version"] = self.seq  # the name every other verb's --json uses; "seq" stays for compatibility
        return d


class ParkRecord(FrozenRecord):
    """A component parked now. ``until`` is the epoch deadline, or None (until unparked)."""

    component: Final[str]
    file_name: Final[str]
    digest: Final[str]
    parked_at: Final[float]
    until: Final[float | None]
    actor: Final[str]
    actor_via: Final[str | None]
    reason: Final[str | None]

    def __init__(self, component: str, file_name: str, digest: str, parked_at: float, until: float | None, actor: str,
                 actor_via: str | None, reason: str | None) -> None:
        self.component = component
        self.file_name = file_name
        self.digest = digest
        self.parked_at = parked_at
        self.until = until
        self.actor = actor
        self.actor_via = actor_via
        self.reason = reason

    def to_dict(self) -> dict[str, Any]:
        """JSON shape used by ``--json`` and the daemon's heartbeat (ISO 8601 UTC times)."""
        return {
            "component": self.component,
            "file_name": self.file_name,
            "digest": self.digest,
            "since": iso(self.parked_at),
            "until": iso(self.until) if self.until is not None else None,
            "actor": self.actor,
            "actor_via": self.actor_via,
            "reason": self.reason,
        }


class Intent(FrozenRecord):
    """An operation in progress (see :meth:`staticpodd.engine.Engine.recover`)."""

    id: Final[int]
    op: Final[str]
    component: Final[str]
    payload: Final[dict[str, Any]]
    created_at: Final[float]
    pid: Final[int]

    def __init__(self, id: int, op: str, component: str, payload: dict[str, Any], created_at: float, pid: int) -> None:
        self.id = id
        self.op = op
        self.component = component
        self.payload = payload
        self.created_at = created_at
        self.pid = pid


def iso(ts: float) -> str:
    """Epoch seconds -> ``2026-11-29T18:30:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


_VERSION_FIELDS = ("component", "seq", "file_name", "digest", "size", "mode", "uid", "gid", "action", "actor",
                   "actor_via", "reason", "location", "created_at")
_VERSION_COLS = (
    "component, seq, file_name, digest, size, mode, uid, gid, action, actor, actor_via, reason, "
    "location, created_at"
)
#: what ``SELECT`` reads for a :class:`Version` (the digest as hex, :data:`DIGEST_HEX`)
_VERSION_SELECT = _VERSION_COLS.replace(" digest,", f" {DIGEST_HEX},")


class Observed(FrozenRecord):
    """The state last seen at one path: ``location`` is ``live`` or ``parked``."""

    component: Final[str]
    file_name: Final[str]
    location: Final[str]
    digest: Final[str]
    mode: Final[int | None]
    uid: Final[int | None]
    gid: Final[int | None]

    def __init__(self, component: str, file_name: str, location: str, digest: str, mode: int | None, uid: int | None,
                 gid: int | None) -> None:
        self.component = component
        self.file_name = file_name
        self.location = location
        self.digest = digest
        self.mode = mode
        self.uid = uid
        self.gid = gid

    @property
    def key(self) -> str:
        return f"{self.location}/{self.file_name}"
