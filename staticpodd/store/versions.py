"""The version store: every version of every component, in SQLite (WAL) under /var/lib/staticpodd.

Tables (schema version :data:`SCHEMA_VERSION`):

``blobs``     digest -> bytes. Identical bytes are stored once, whatever component they belong to,
              compressed (``codec``, :mod:`staticpodd.store.blobcodec`; schema 3, :mod:`staticpodd.store.migrations`).
              Here and in ``versions`` the digest is its 32 raw bytes (schema 4,
              :func:`staticpodd.store.rows.digest_key`); everywhere else, and in every row returned,
              it is the hex text.
``components`` every component with at least one version (no ``SELECT DISTINCT`` over versions).
``versions``  one row per recorded version: component, seq (1, 2, 3 … per component), file name,
              digest, size, mode/uid/gid, action, actor, reason, time, and where the bytes were
              (``live`` or ``parked``). Rows are never updated or deleted by normal operation.
``events``    things that are not new bytes: a live file removed by someone else, a mode change,
              a quarantined stray, an expired or broken park.
``parks``     the components parked now, with who/when/why/until (deadlines live here, so the
              daemon honours a park made by the CLI while it was down).
``intents``   operations in progress; an intent is written (committed) before the first rename and
              removed in the same transaction that records the result, so a crash at any point is
              finished or undone by :meth:`staticpodd.engine.Engine.recover`.
``observed``  the last state seen (or written) at each path, keyed ``live/<file>`` or
              ``parked/<file>``: what :meth:`staticpodd.engine.Engine.scan` compares the directory
              with to tell created, modified, removed, moved and chmodded files apart.
``identities`` the pod (namespace, name) each digest defines, or NULLs when the bytes are not a
              readable Pod: the duplicate-pod check need not parse every live file every time.
``facts``     other values derived from a digest's bytes (e.g. why parking it would cut the
              kubelet off from its apiserver), memoised by (digest, kind).
``verdicts``  validation verdicts cached by (digest, validator id), so ``unpark`` of a parked copy
              that already passed the gate need not load the schema validator.
``dirfindings`` the daemon's directory findings, kept under a key of everything they depend on
              (:mod:`staticpodd.daemon.findings`), so a restart on an unchanged directory validates
              nothing. Created on first use (a cache older code ignores: no schema bump).

Times are Unix epoch seconds (float, UTC). All writes happen in ``BEGIN IMMEDIATE`` transactions;
callers also hold the staticpodd flock, so the store never sees two writers at once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import LockTimeout, StoreError, UnknownVersion
from . import blobcodec
from .rows import (
    _SCHEMA,
    _VERSION_COLS,
    _VERSION_SELECT,
    Intent,
    Observed,
    ParkRecord,
    Version,
    digest_key,
    digest_keys,
    digest_of,
    iso,
)

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ACTIONS",
    "SCHEMA_VERSION",
    "Intent",
    "Observed",
    "ParkRecord",
    "Version",
    "VersionStore",
    "digest_of",
    "iso",
]

#: 3: compressed blobs, a components table; 4: digests of blobs/versions as raw bytes (staticpodd.store.migrations)
SCHEMA_VERSION = 4
_INT64_MAX = (1 << 63) - 1  # SQLite's INTEGER range

#: Actions a version can record. ``restore`` and ``quarantine`` are the daemon's.
ACTIONS = ("apply", "edit", "rollback", "park", "unpark", "external", "restore", "discard")


class StoreLocked(StoreError):
    """Another SQLite connection (a ``sqlite3`` shell, a backup) held the version store past the
    lock timeout: the same code and exit status as the flock's LockTimeout."""

    code = LockTimeout.code
    exit_status = LockTimeout.exit_status


def _store_error(exc: BaseException, path: Path, doing: str, busy_timeout: float | None = None) -> StoreError:
    """A clear StoreError for a failed SQLite (or OS) call: full disk, read-only, locked, corrupt.
    A store another connection kept locked past ``busy_timeout`` seconds is a StoreLocked."""
    import errno

    text = str(exc)
    low = text.lower()
    err = getattr(exc, "errno", None)
    if "database is locked" in low or "database is busy" in low or "database table is locked" in low:
        waited = f"gave up after {busy_timeout:g} s" if busy_timeout is not None else "gave up"
        return StoreLocked(
            f"another connection holds the version store while {doing} (a sqlite3 shell or a backup?); {waited}",
            path=str(path), hint="wait for it to finish, or raise --lock-timeout; never delete the store")
    if "full" in low or err in (errno.ENOSPC, errno.EDQUOT) or ("i/o" in low and _no_space(path)):
        what = "the disk holding the version store is full"
        hint = "free space on that filesystem, then run: staticpodctl recover"
    elif "readonly" in low or "read-only" in low or err == errno.EROFS:
        what = "the version store is read-only"
        hint = ("remount it read-write to change anything; the read verbs (status, history, show, diff, "
                "validate) keep working")
    elif err == errno.EACCES or "permission" in low:
        what = "the version store cannot be written (permission denied)"
        hint = "run staticpodctl as root"
    else:
        what = "the version store failed"
        hint = "check the disk and the file; a copy can be inspected with sqlite3; never delete it blindly"
    return StoreError(f"{what} while {doing}: {getattr(exc, 'strerror', None) or text}", path=str(path), hint=hint)


class VersionStore:
    """SQLite version store at ``path`` (created 0600 in a 0700 directory when missing).

    When the store cannot be written (a read-only filesystem, a read-only bind mount) it is
    opened read-only (``mode=ro``, else ``immutable=1`` when not even the WAL index can be
    opened) and :attr:`readonly` is True: reads work, every write raises StoreError. Every
    SQLite or OS failure is raised as StoreError saying what happened (a full disk, read-only,
    corrupt), never as a raw ``sqlite3`` exception.
    Raises StoreError when the file is not a store, or was written by a newer staticpodd.

    About 490 lines (the module about 650), over the ~400 (~600) a module should stay under, on purpose: it is one
    SQLite connection and its transaction discipline (``BEGIN IMMEDIATE``, intents, the read-only fallback, every error
    turned into StoreError by ``_guard``), and each method is one short query; split by table the
    methods would share that connection through a base class for no gain in reading. The rows it
    returns and its DDL are in :mod:`staticpodd.store.rows`.
    """

    def __init__(self, path: Path, *, readonly: bool | None = None, busy_timeout: float = 30.0) -> None:
        self.path = path
        #: seconds SQLite waits for another connection's lock (the lock timeout: --lock-timeout)
        self.busy_timeout = busy_timeout
        self.readonly = bool(readonly)
        self._old_schema = False  # a read-only schema-2 store: raw blobs, no components table
        #: why it could not be opened read-write (None: asked for read-only, or it was not)
        self._rw_error: BaseException | None = None
        _check_store_files(path, tighten=not readonly)
        try:
            if not readonly:
                try:
                    self._open_rw(path)
                except (OSError, sqlite3.OperationalError) as exc:
                    if readonly is False or not path.exists() or not _is_readonly_error(exc, path):
                        raise
                    self.readonly = True
                    self._rw_error = exc
            if self.readonly:
                self._open_ro(path)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"cannot open the version store: {exc}",
                path=str(path),
                hint="check the file; a copy can be inspected with sqlite3; never delete it blindly",
            ) from exc
        except OSError as exc:
            raise _store_error(exc, path, "opening it", self.busy_timeout) from exc

    def _open_rw(self, path: Path) -> None:
        from ..node.trust import ensure_dir

        ensure_dir(path.parent, 0o700, "state directory")
        fresh = not path.exists()
        if fresh:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        self._db = sqlite3.connect(str(path), timeout=self.busy_timeout, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _open_ro(self, path: Path) -> None:
        """Open for reading only: ``mode=ro`` (needs the WAL index, ``-shm``, to be usable), else
        ``immutable=1`` (no locking at all: right for a read-only filesystem, where no one can
        be writing)."""
        from urllib.parse import quote

        last: Exception | None = None
        for flags in ("mode=ro", "immutable=1"):
            db = sqlite3.connect(f"file:{quote(str(path))}?{flags}", uri=True, timeout=self.busy_timeout,
                                 isolation_level=None)
            try:
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            except sqlite3.DatabaseError as exc:
                db.close()
                last = exc
                continue
            self._db = db
            self._old_schema = row is None or int(row[0]) < 3  # read as it is: no upgrade without writing
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise StoreError(
                    f"the version store has schema {row[0]}, newer than this staticpodd understands "
                    f"({SCHEMA_VERSION})", path=str(self.path), hint="upgrade staticpodd")
            return
        assert last is not None
        raise last

    def _migrate(self) -> None:
        row = None
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(
                f"the version store has schema {row[0]}, newer than this staticpodd understands ({SCHEMA_VERSION})",
                path=str(self.path),
                hint="upgrade staticpodd; do not downgrade over a newer store",
            )
        if row is None or int(row[0]) < SCHEMA_VERSION:
            from . import migrations

            # the upgrade rebuilds blobs and versions: foreign keys are checked again after it,
            # and the PRAGMA is a no-op inside a transaction
            self._db.execute("PRAGMA foreign_keys=OFF")
            with self.transaction():
                for stmt in _SCHEMA.split(";"):
                    if stmt.strip():
                        self._db.execute(stmt)
                try:
                    changed = migrations.upgrade(self._db, 0 if row is None else int(row[0]))
                except ValueError as exc:
                    raise StoreError(f"cannot upgrade the version store: {exc}", path=str(self.path),
                                     hint="nothing was changed; check the file with sqlite3") from exc
                self._db.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            self._db.execute("PRAGMA foreign_keys=ON")
            if changed:
                migrations.vacuum_after(self._db)

    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite)."""
        self._db.close()

    @contextmanager
    def after_intent(self) -> Iterator[sqlite3.Connection]:
        """A transaction that records the result of an operation whose intent is already durable
        (committed with ``synchronous=FULL`` before its rename): committed with
        ``synchronous=NORMAL``, so it costs no fdatasync of its own; the WAL is synced at the next
        FULL commit or checkpoint (the one on close follows at once). Should power fail first,
        the intent is still there and :meth:`staticpodd.engine.Engine.recover` records the result
        from it, as after any crash between rename and commit."""
        with self.relaxed() as db:
            yield db

    @contextmanager
    def relaxed(self) -> Iterator[sqlite3.Connection]:
        """A transaction committed with ``synchronous=NORMAL``: no fdatasync of its own. A crash
        of the process loses nothing (the WAL is written at COMMIT); a power loss may lose it
        until the next ``synchronous=FULL`` commit or checkpoint syncs the WAL, and everything
        before that commit with it (the WAL is one file, appended in order). So it fits what may
        be lost to a power cut, or is made durable by a FULL commit before it matters: a cache
        row, the record of bytes still on disk that an intent commits before they are replaced
        (docs/kubelet-contract.md consequence 2 keeps the file's own fsync). Nested calls join the outer
        transaction (with its synchronous setting)."""
        if self._db.in_transaction or self.readonly:
            with self.transaction() as db:
                yield db
            return
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            with self.transaction() as db:
                yield db
        finally:
            try:
                self._db.execute("PRAGMA synchronous=FULL")
            except sqlite3.Error:
                pass

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error). Nested calls join the outer one."""
        if self._db.in_transaction:
            yield self._db
            return
        if self.readonly and self._rw_error is not None:
            if _on_readonly_mount(self.path):
                raise StoreError("the version store is on a read-only filesystem, so nothing can be recorded",
                                 path=str(self.path),
                                 hint=f"remount {self.path.parent} read-write (mount -o remount,rw ...); status, "
                                 "history, show, diff and validate keep working")
            raise _store_error(self._rw_error, self.path, "opening it for writing (it is open read-only)")
        if self.readonly:
            raise StoreError("the version store is read-only (opened read-only: its filesystem cannot be written)",
                             path=str(self.path),
                             hint="remount it read-write to change anything; status, history, show, diff and "
                             "validate keep working")
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _store_error(exc, self.path, "starting a transaction", self.busy_timeout) from exc
        try:
            yield self._db
        except BaseException as exc:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite may have rolled back already (a full disk does)
            if isinstance(exc, sqlite3.Error):
                raise _store_error(exc, self.path, "writing", self.busy_timeout) from exc
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise _store_error(exc, self.path, "committing", self.busy_timeout) from exc

    # -- versions ---------------------------------------------------------------------------

    def record(
        self,
        component: str,
        file_name: str,
        data: bytes,
        *,
        action: str,
        actor: str,
        actor_via: str | None = None,
        reason: str | None = None,
        mode: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        location: str = "live",
        created_at: float | None = None,
    ) -> Version:
        """Record ``data`` as the next version of ``component`` and return it.

        The bytes are stored once per digest. ``action`` is one of :data:`ACTIONS`.
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        digest = digest_of(data)
        now = time.time() if created_at is None else created_at
        with self.transaction() as db:
            key = self._blob_key(db, digest, data)
            db.execute("INSERT OR IGNORE INTO components(component) VALUES (?)", (component,))
            (seq,) = db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM versions WHERE component = ?", (component,)
            ).fetchone()
            db.execute(
                f"INSERT INTO versions({_VERSION_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (component, seq, file_name, key, len(data), mode, uid, gid, action, actor, actor_via,
                 reason, location, now),
            )
        return Version(component, seq, file_name, digest, len(data), mode, uid, gid, action, actor, actor_via,
                       reason, location, now)

    def keep_bytes(self, data: bytes) -> str:
        """Store ``data`` (once per digest, as :meth:`record` does) without recording a version:
        for bytes an operation records only after its rename, committed with its intent so that
        :meth:`staticpodd.engine.Engine.recover` can record them after a crash. Returns the digest."""
        digest = digest_of(data)
        with self.transaction() as db:
            self._blob_key(db, digest, data)
        return digest

    @staticmethod
    def _blob_key(db: sqlite3.Connection, digest: str, data: bytes) -> Any:
        """The blobs row of ``data`` as it is keyed (hex text if an older writer made it), inserted
        when missing (inside the caller's transaction)."""
        row = db.execute("SELECT digest FROM blobs WHERE digest IN (?, ?)", digest_keys(digest)).fetchone()
        if row is not None:
            return row[0]
        key = digest_key(digest)
        codec, stored = blobcodec.encode(data)
        db.execute("INSERT INTO blobs(digest, size, data, codec) VALUES (?, ?, ?, ?)", (key, len(data), stored, codec))
        return key

    def head(self, component: str) -> Version | None:
        """The newest version of ``component``, or None when nothing is recorded."""
        row = self._db.execute(
            f"SELECT {_VERSION_SELECT} FROM versions WHERE component = ? ORDER BY seq DESC LIMIT 1", (component,)
        ).fetchone()
        return Version(*row) if row else None

    def head_file_names(self, components: Iterable[str]) -> dict[str, str]:
        """``component -> file name of its newest version`` for those of ``components`` that have
        a version: one query (per 500 names), however many are asked."""
        names = sorted(set(components))
        out: dict[str, str] = {}
        for i in range(0, len(names), 500):  # below SQLite's limit of host parameters
            chunk = names[i:i + 500]
            marks = ",".join("?" * len(chunk))
            # SQLite takes a bare column of an aggregate query from the row holding the MAX
            out.update((c, fn) for c, fn, _ in self._db.execute(
                f"SELECT component, file_name, MAX(seq) FROM versions WHERE component IN ({marks}) GROUP BY component",
                chunk))
        return out

    def get(self, component: str, seq: int) -> Version:
        """Version ``seq`` of ``component``. Raises UnknownVersion."""
        row = None if not 1 <= seq <= _INT64_MAX else self._db.execute(
            f"SELECT {_VERSION_SELECT} FROM versions WHERE component = ? AND seq = ?", (component, seq)
        ).fetchone()
        if row is None:
            # the versions that exist: retention may have pruned the oldest ones (or some between)
            n, low, high = self._db.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM versions WHERE component = ?",
                                            (component,)).fetchone()
            if not n:
                have = None
            elif n == high - low + 1:
                have = f"versions are {low}..{high}" + (" (older ones pruned)" if low > 1 else "")
            elif n <= 10:
                seqs = [r[0] for r in self._db.execute(
                    "SELECT seq FROM versions WHERE component = ? ORDER BY seq", (component,))]
                have = f"versions are {', '.join(map(str, seqs))} (others pruned)"
            else:
                have = f"{n} versions between {low} and {high} (others pruned)"
            raise UnknownVersion(
                f"{component} has no version {seq}",
                hint=f"{have}; see: staticpodctl history {component}" if have else None,
            )
        return Version(*row)

    def history(self, component: str, *, limit: int | None = None) -> list[Version]:
        """Versions of ``component``, oldest first (the newest ``limit`` when given)."""
        rows = self._db.execute(
            f"SELECT {_VERSION_SELECT} FROM versions WHERE component = ? ORDER BY seq DESC LIMIT ?",
            (component, -1 if limit is None or limit > _INT64_MAX else max(limit, 0)),
        ).fetchall()
        return [Version(*r) for r in reversed(rows)]

    def older(self, component: str, before: int | None = None, *, limit: int = 16) -> list[Version]:
        """Up to ``limit`` versions of ``component`` older than seq ``before`` (None: the newest
        ones), newest first: one page of a walk back through history that reads only as far as
        it goes (a restore finds its version within a page or two, however long the history)."""
        rows = self._db.execute(
            f"SELECT {_VERSION_SELECT} FROM versions WHERE component = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            (component, _INT64_MAX if before is None else before, max(limit, 1)),
        ).fetchall()
        return [Version(*r) for r in rows]

    def count(self, component: str) -> int:
        """How many versions of ``component`` are recorded."""
        return int(self._db.execute("SELECT COUNT(*) FROM versions WHERE component = ?", (component,)).fetchone()[0])

    def data(self, digest: str) -> bytes:
        """The bytes stored under ``digest``. Raises StoreError when missing (a corrupt store)."""
        row = self._db.execute("SELECT 'raw', data FROM blobs WHERE digest IN (?, ?)" if self._old_schema else
                               "SELECT codec, data FROM blobs WHERE digest IN (?, ?)", digest_keys(digest)).fetchone()
        if row is None:
            raise StoreError(f"the version store has no bytes for digest {digest[:12]}", path=str(self.path))
        try:
            data = blobcodec.decode(row[0], row[1])
        except (ValueError, zlib.error) as exc:
            raise StoreError(f"the bytes of digest {digest[:12]} cannot be decoded: {exc}", path=str(self.path),
                             hint="the store is damaged or was written by a newer staticpodd") from exc
        if row[0] != blobcodec.RAW and digest_of(data) != digest:
            raise StoreError(f"the bytes stored for digest {digest[:12]} do not match it", path=str(self.path),
                             hint="the store is damaged; check the file with sqlite3")
        return data

    def components(self) -> list[str]:
        """Every component that has at least one version, sorted (the ``components`` table: no
        scan of every version)."""
        if self._old_schema:
            return [r[0] for r in self._db.execute("SELECT DISTINCT component FROM versions ORDER BY component")]
        return [r[0] for r in self._db.execute("SELECT component FROM components ORDER BY component")]

    def knows_digest(self, component: str, digest: str) -> bool:
        """True when some version of ``component`` has these bytes."""
        return (
            self._db.execute(
                "SELECT 1 FROM versions WHERE component = ? AND digest IN (?, ?) LIMIT 1",
                (component, *digest_keys(digest))
            ).fetchone()
            is not None
        )

    # -- events -----------------------------------------------------------------------------

    def record_event(
        self,
        kind: str,
        *,
        component: str | None,
        file_name: str | None,
        actor: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> int:
        """Record an event that carries no new bytes (e.g. ``removed``, ``mode-changed``). Returns its id."""
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO events(component, file_name, kind, actor, reason, details, created_at) "
                "VALUES (?,?,?,?,?,?,?)",
                (component, file_name, kind, actor, reason, json.dumps(details or {}, sort_keys=True), time.time()),
            )
            return int(cur.lastrowid or 0)

    def events(self, component: str | None = None, *, limit: int = 100) -> list[dict[str, Any]]:
        """Newest events last; all components when ``component`` is None."""
        if component is None:
            rows = self._db.execute(
                "SELECT id, component, file_name, kind, actor, reason, details, created_at FROM events "
                "ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        else:
            rows = self._db.execute(
                "SELECT id, component, file_name, kind, actor, reason, details, created_at FROM events "
                "WHERE component = ? ORDER BY id DESC LIMIT ?", (component, limit)
            ).fetchall()
        return [
            {"id": r[0], "component": r[1], "file_name": r[2], "kind": r[3], "actor": r[4], "reason": r[5],
             "details": json.loads(r[6] or "{}"), "created_at": iso(r[7])}
            for r in reversed(rows)
        ]

    # -- parks ------------------------------------------------------------------------------

    def set_park(self, park: ParkRecord) -> None:
        """Record that ``park.component`` is parked now (replacing any earlier record)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO parks(component, file_name, digest, parked_at, until, actor, actor_via, "
                "reason) VALUES (?,?,?,?,?,?,?,?)",
                (park.component, park.file_name, park.digest, park.parked_at, park.until, park.actor,
                 park.actor_via, park.reason),
            )

    def clear_park(self, component: str) -> None:
        """Forget the park record of ``component`` (after unpark)."""
        with self.transaction() as db:
            db.execute("DELETE FROM parks WHERE component = ?", (component,))

    def park_of(self, component: str) -> ParkRecord | None:
        """The park record of ``component``, or None."""
        row = self._db.execute(
            "SELECT component, file_name, digest, parked_at, until, actor, actor_via, reason FROM parks "
            "WHERE component = ?", (component,)
        ).fetchone()
        return ParkRecord(*row) if row else None

    def parks(self) -> list[ParkRecord]:
        """All parked components, by name."""
        rows = self._db.execute(
            "SELECT component, file_name, digest, parked_at, until, actor, actor_via, reason FROM parks "
            "ORDER BY component"
        ).fetchall()
        return [ParkRecord(*r) for r in rows]

    def expired_parks(self, now: float) -> list[ParkRecord]:
        """Parks whose deadline (``until``) is at or before ``now`` (epoch seconds)."""
        return [p for p in self.parks() if p.until is not None and p.until <= now]

    # -- intents ----------------------------------------------------------------------------

    def begin_intent(self, op: str, component: str, payload: dict[str, Any]) -> int:
        """Durably record an operation about to start. Returns the intent id."""
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO intents(op, component, payload, created_at, pid) VALUES (?,?,?,?,?)",
                (op, component, json.dumps(payload, sort_keys=True), time.time(), os.getpid()),
            )
            return int(cur.lastrowid or 0)

    def end_intent(self, intent_id: int) -> None:
        """Remove a finished or undone intent (call inside the transaction that records the result)."""
        with self.transaction() as db:
            db.execute("DELETE FROM intents WHERE id = ?", (intent_id,))

    def intents(self) -> list[Intent]:
        """Operations recorded as started and not yet finished or undone, oldest first."""
        rows = self._db.execute(
            "SELECT id, op, component, payload, created_at, pid FROM intents ORDER BY id"
        ).fetchall()
        return [Intent(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5]) for r in rows]

    # -- pod identity cache -----------------------------------------------------------------------

    def identity(self, digest: str) -> tuple[str | None, str | None] | None:
        """Cached ``(namespace, name)`` for these bytes (``(None, None)``: not a Pod); None = unknown."""
        row = self._db.execute("SELECT namespace, name FROM identities WHERE digest = ?", (digest,)).fetchone()
        return None if row is None else (row[0], row[1])

    def set_identity(self, digest: str, ident: tuple[str, str] | None) -> None:
        """Cache the pod identity of these bytes (None: not a readable Pod). A cache: committed
        without an fsync of its own (:meth:`relaxed`)."""
        if self.readonly:
            return  # a cache: a read-only store just does without
        ns, name = ident if ident else (None, None)
        with self.relaxed() as db:
            db.execute("INSERT OR REPLACE INTO identities(digest, namespace, name) VALUES (?,?,?)", (digest, ns, name))

    # -- memoised facts ----------------------------------------------------------------------------

    def fact(self, digest: str, kind: str) -> tuple[bool, Any]:
        """``(found, value)`` of a memoised fact about these bytes."""
        row = self._db.execute("SELECT value FROM facts WHERE digest = ? AND kind = ?", (digest, kind)).fetchone()
        return (False, None) if row is None else (True, json.loads(row[0]))

    def set_fact(self, digest: str, kind: str, value: Any) -> None:
        """Memoise a JSON-serialisable fact about these bytes (idempotent). A cache: committed
        without an fsync of its own (:meth:`relaxed`)."""
        if self.readonly:
            return  # a cache: a read-only store just does without
        with self.relaxed() as db:
            db.execute("INSERT OR REPLACE INTO facts(digest, kind, value) VALUES (?,?,?)",
                       (digest, kind, json.dumps(value)))

    # -- validation verdict cache -------------------------------------------------------------

    def verdict(self, digest: str, validator: str) -> bool | None:
        """Cached gate verdict for these bytes under this validator id, or None when unknown."""
        row = self._db.execute(
            "SELECT ok FROM verdicts WHERE digest = ? AND validator = ?", (digest, validator)
        ).fetchone()
        return None if row is None else bool(row[0])

    def set_verdict(self, digest: str, validator: str, ok: bool) -> None:
        """Cache a gate verdict. A cache: committed without an fsync of its own (:meth:`relaxed`)."""
        if self.readonly:
            return  # a cache: a read-only store just does without
        with self.relaxed() as db:
            db.execute(
                "INSERT OR REPLACE INTO verdicts(digest, validator, ok) VALUES (?,?,?)", (digest, validator, int(ok))
            )

    # -- the daemon's directory findings ----------------------------------------------------------

    def dir_findings(self, directory: str, key: str) -> bytes | None:
        """The payload kept for the manifest directory ``directory`` under ``key`` by
        :meth:`set_dir_findings`; None when none is (another key, or no such table yet)."""
        try:
            row = self._db.execute("SELECT findings FROM dirfindings WHERE directory = ? AND key = ?",
                                   (directory, key)).fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        return None if row is None else bytes(row[0])

    def set_dir_findings(self, directory: str, key: str | None, payload: bytes = b"") -> None:
        """Keep ``payload`` (opaque bytes: the daemon's encoded directory findings) under ``key``
        for the manifest directory ``directory``, in place of whatever was kept before, for any
        directory (one row). ``key`` None forgets it. A cache: a read-only store does without,
        and it costs no fdatasync of its own (``synchronous=NORMAL``: a power loss may lose it,
        never anything else). Creates the table when missing (``storerows._DIRFINDINGS``)."""
        if self.readonly:
            return
        from .rows import _DIRFINDINGS

        nested = self._db.in_transaction
        if not nested:
            self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            with self.transaction() as db:
                db.execute(_DIRFINDINGS)
                db.execute("DELETE FROM dirfindings")
                if key is not None:
                    db.execute("INSERT INTO dirfindings(directory, key, findings, saved_at) VALUES (?, ?, ?, ?)",
                               (directory, key, payload, time.time()))
        finally:
            if not nested:
                try:
                    self._db.execute("PRAGMA synchronous=FULL")
                except sqlite3.Error:
                    pass

    # -- observed state -----------------------------------------------------------------------

    def observed(self) -> dict[str, Observed]:
        """Last seen state of every path, keyed ``live/<file_name>`` / ``parked/<file_name>``."""
        rows = self._db.execute(
            "SELECT key, component, file_name, location, digest, mode, uid, gid FROM observed"
        ).fetchall()
        return {r[0]: Observed(*r[1:]) for r in rows}

    def set_observed(self, obs: Observed) -> None:
        """Remember that ``obs`` is at its path now (after we wrote it, or saw it)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO observed(key, component, file_name, location, digest, mode, uid, gid, "
                "updated_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (obs.key, obs.component, obs.file_name, obs.location, obs.digest, obs.mode, obs.uid, obs.gid,
                 time.time()),
            )

    def sigs(self) -> dict[str, str]:
        """Stat signature (``staticpodd.engine.fsfacts._stat_sig`` as text) of each path whose observed
        bytes were read with that stat: a full scan need not read such a file again while its
        stat is unchanged. Writing a path's observed state (:meth:`set_observed`) clears it."""
        if self._old_schema:
            return {}
        return {r[0]: r[1] for r in self._db.execute("SELECT key, sig FROM observed WHERE sig IS NOT NULL")}

    def sig_digests(self, keys: list[str] | None = None) -> dict[str, tuple[str, str]]:
        """``key -> (stat signature text, digest)`` of each observed path (``live/<file>``,
        ``parked/<file>``; ``keys`` None: every one) whose bytes were read with that stat (see
        :meth:`sigs`): while the path's stat is still that signature it holds those bytes, so a
        read verb takes the digest instead of reading and hashing the file."""
        if self._old_schema:
            return {}
        sql = "SELECT key, sig, digest FROM observed WHERE sig IS NOT NULL"
        if keys is None:
            rows = self._db.execute(sql)
        else:
            rows = self._db.execute(f"{sql} AND key IN ({','.join('?' * len(keys))})", keys)
        return {r[0]: (r[1], r[2]) for r in rows}

    def set_sigs(self, items: list[tuple[str, str, str]]) -> None:
        """``(sig, key, digest)``: remember ``sig`` for ``key`` when its observed digest is still
        ``digest`` (the bytes read with that stat)."""
        with self.transaction() as db:
            db.executemany("UPDATE observed SET sig = ? WHERE key = ? AND digest = ?", items)

    def clear_observed(self, key: str) -> None:
        """Forget the path ``key`` (nothing is there any more)."""
        with self.transaction() as db:
            db.execute("DELETE FROM observed WHERE key = ?", (key,))

    def live_identities(self) -> dict[str, tuple[str, bool, str | None, str | None]]:
        """Each live file whose observed bytes were read with a known stat signature (see
        :meth:`sigs`): ``file_name -> (sig, identity known, namespace, name)``, the pod identity
        cached for those bytes (:meth:`identity`; ``None, None``: not a Pod). One query for the
        duplicate-pod checks, which stat each file and trust this only while its stat is the same."""
        if self._old_schema:
            return {}
        rows = self._db.execute(
            "SELECT o.file_name, o.sig, i.digest IS NOT NULL, i.namespace, i.name FROM observed o "
            "LEFT JOIN identities i ON i.digest = o.digest WHERE o.location = 'live' AND o.sig IS NOT NULL"
        )
        return {r[0]: (r[1], bool(r[2]), r[3], r[4]) for r in rows}

    def live_identities_and_facts(self, kind: str) -> dict[str, tuple[str, bool, str | None, str | None, str | None]]:
        """:meth:`live_identities` and the memoised fact ``kind`` (JSON text, :meth:`fact`; None:
        not memoised yet) of each live file's observed bytes, in one query: ``file_name ->
        (sig, identity known, namespace, name, fact)``. For a verb that runs both checks (the
        duplicate pod and the host-port refusals of new bytes, one look at the directory)."""
        if self._old_schema:
            return {}
        rows = self._db.execute(
            "SELECT o.file_name, o.sig, i.digest IS NOT NULL, i.namespace, i.name, f.value FROM observed o "
            "LEFT JOIN identities i ON i.digest = o.digest LEFT JOIN facts f ON f.digest = o.digest AND f.kind = ? "
            "WHERE o.location = 'live' AND o.sig IS NOT NULL", (kind,)
        )
        return {r[0]: (r[1], bool(r[2]), r[3], r[4], r[5]) for r in rows}


def _on_readonly_mount(path: Path) -> bool:
    """Whether the filesystem holding ``path``'s directory is mounted read-only (statvfs ST_RDONLY)."""
    try:
        return bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _guard(name: str, fn: Any) -> Any:
    import functools

    @functools.wraps(fn)
    def wrapper(self: VersionStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _store_error(exc, self.path, f"{'reading' if name in _READS else 'writing'} ({name})",
                               self.busy_timeout) from exc

    return wrapper


_READS = {"head", "get", "history", "older", "count", "sigs", "data", "components", "knows_digest", "events",
          "park_of", "parks", "expired_parks", "intents", "identity", "fact", "verdict", "observed", "live_identities",
          "live_identities_and_facts", "dir_findings"}
for _name in [n for n, v in vars(VersionStore).items() if callable(v) and not n.startswith("_")
              and n not in ("transaction", "after_intent", "relaxed", "close")]:
    setattr(VersionStore, _name, _guard(_name, vars(VersionStore)[_name]))


def _no_space(path: Path) -> bool:
    """Whether the filesystem holding ``path`` has no free block left (SQLite reports a full
    tmpfs while mapping its WAL index as a plain "disk I/O error")."""
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def _is_readonly_error(exc: BaseException, path: Path) -> bool:
    """Whether opening read-write failed because the store cannot be written now (a read-only
    filesystem, no permission, a full disk), not because it is corrupt: then it is opened
    read-only, so that the read verbs still work."""
    import errno

    if isinstance(exc, OSError):
        return exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT)
    low = str(exc).lower()
    if "readonly" in low or "read-only" in low or "unable to open" in low or "full" in low:
        return True
    if "i/o" in low and _no_space(path):
        return True
    return not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK)


def _check_store_files(path: Path, *, tighten: bool) -> None:
    """Refuse (Untrusted) a version store, or its ``-wal``/``-shm`` file, that another user owns
    or could write: its versions are what ``rollback`` and ``unpark`` put live. One of ours that
    is looser than 0600 (a world-readable store shows every manifest's secrets) is tightened when
    ``tighten``."""
    import stat as stat_

    from ..node.trust import owner_mode_problem, untrusted

    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        mode = stat_.S_IMODE(st.st_mode)
        bad = owner_mode_problem(st.st_uid, mode)
        if bad and (st.st_uid != os.geteuid() or not tighten):
            raise untrusted(p, "version store", bad)
        if tighten and st.st_uid == os.geteuid() and mode & 0o077 and stat_.S_ISREG(st.st_mode):
            os.chmod(p, mode & 0o600)
