"""Upgrades of an existing version store to the current schema, step by step.

Schema 3 (from 2, the first release):

- ``blobs`` gains ``codec`` (:mod:`staticpodd.store.blobcodec`) and every raw blob is rewritten
  compressed. Each one is decoded again and checked against its digest before the row is
  replaced, so an upgrade can never change a byte anyone recorded; a blob that already does not
  match its digest (a damaged store) is left raw, untouched.
- ``blobs`` becomes a ``WITHOUT ROWID`` table keyed by the digest (the rowid table kept a second
  index holding every digest again).
- ``versions_by_component`` is dropped: it indexed ``(component, seq)``, exactly the key of the
  ``UNIQUE (component, seq)`` constraint, whose own index serves every query it served.
- ``observed`` gains ``sig``: the stat signature the observed bytes were read with, so a full
  scan reads no file whose stat is unchanged (:meth:`staticpodd.engine.Engine.scan`).
- ``components`` lists every component that has versions (kept by ``record`` and ``prune``), so
  ``park``/``status`` need not ``SELECT DISTINCT`` over every version.

Schema 4 (from 3):

- the ``digest`` of ``blobs`` and of ``versions`` is the 32 raw sha256 bytes (a ``BLOB``), not
  64 characters of hex: with a small manifest compressed to ~80 bytes, the digest written twice
  as hex (blob key, version row) was most of what each version cost on disk (10,000
  versions of one manifest took 1.37x their per-blob gzip size; 1.07x after). Both tables are
  rebuilt (ids, seqs, every column kept); a value that is not canonical lower-case sha256 hex
  (a damaged or hand-edited store) is kept as the text it is
  (:func:`staticpodd.store.rows.digest_key`), never dropped. Nothing else changes: other tables
  keep hex digests, and every row the store returns carries the hex.

All of it happens in the caller's one ``BEGIN IMMEDIATE`` transaction (:func:`upgrade`, step by
step from whatever schema the store has): a crash mid-upgrade leaves the old store exactly as
it was, and the old code (or this one, again) opens it as before. The freed pages are given
back by one ``VACUUM`` afterwards (:func:`vacuum_after`), outside the transaction.
"""

from __future__ import annotations

import hashlib
import sqlite3

from . import blobcodec
from .rows import digest_key


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    """Column names of ``table`` (empty when it does not exist)."""
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def to_v3(db: sqlite3.Connection, *, rebuild_blobs: bool = True) -> int:
    """Bring a schema-1/2 store to schema 3 inside the open transaction. Returns how many blobs
    were rewritten compressed. ``rebuild_blobs=False`` leaves ``blobs`` a rowid table, for a
    :func:`to_v4` that rebuilds it anyway right after (one copy of every blob, not two). Raises
    ValueError when a compressed blob would not decode to its digest (a codec bug: nothing is
    changed, the caller rolls the transaction back)."""
    if "codec" not in columns(db, "blobs"):
        db.execute("ALTER TABLE blobs ADD COLUMN codec TEXT NOT NULL DEFAULT 'raw'")
    rewritten = 0
    last = ""
    while True:
        rows = db.execute(
            "SELECT digest, data FROM blobs WHERE codec = 'raw' AND digest > ? ORDER BY digest LIMIT 256", (last,)
        ).fetchall()
        if not rows:
            break
        for digest, data in rows:
            last = digest
            raw = bytes(data)
            if hashlib.sha256(raw).hexdigest() != digest:
                continue  # already damaged: left exactly as it is, for a human to look at
            codec, packed = blobcodec.encode(raw)
            if codec == blobcodec.RAW:
                continue
            if hashlib.sha256(blobcodec.decode(codec, packed)).hexdigest() != digest:
                raise ValueError(f"blob {digest[:12]} does not round-trip through {codec}")
            db.execute("UPDATE blobs SET codec = ?, data = ? WHERE digest = ?", (codec, packed, digest))
            rewritten += 1
    sql = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'blobs'").fetchone()[0]
    if rebuild_blobs and "WITHOUT ROWID" not in sql.upper():
        # keyed by the digest alone: the rowid table's extra index repeated every digest
        db.execute("CREATE TABLE blobs_v3 (digest TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL, "
                   "codec TEXT NOT NULL DEFAULT 'raw') WITHOUT ROWID")
        db.execute("INSERT INTO blobs_v3(digest, size, data, codec) SELECT digest, size, data, codec FROM blobs")
        (n_old,) = db.execute("SELECT COUNT(*) FROM blobs").fetchone()
        (n_new,) = db.execute("SELECT COUNT(*) FROM blobs_v3").fetchone()
        if n_old != n_new:
            raise ValueError(f"copying the blobs kept {n_new} of {n_old}")
        db.execute("DROP TABLE blobs")
        db.execute("ALTER TABLE blobs_v3 RENAME TO blobs")
    if "sig" not in columns(db, "observed"):
        db.execute("ALTER TABLE observed ADD COLUMN sig TEXT")
    db.execute("DROP INDEX IF EXISTS versions_by_component")
    db.execute("CREATE TABLE IF NOT EXISTS components (component TEXT PRIMARY KEY) WITHOUT ROWID")
    db.execute("INSERT OR IGNORE INTO components(component) SELECT DISTINCT component FROM versions")
    return rewritten


def upgrade(db: sqlite3.Connection, from_version: int) -> bool:
    """Every step from schema ``from_version`` (0: no ``schema_version`` recorded, a new or a
    schema-1 store) to the newest, in order, inside the caller's open transaction (the caller
    records the new ``schema_version`` in it). Returns whether rows were rewritten (then a
    :func:`vacuum_after` is worth it). Raises ValueError when a step would change recorded bytes
    (nothing is changed: the caller rolls back)."""
    changed = False
    if from_version < 3:
        changed |= to_v3(db, rebuild_blobs=False) > 0  # to_v4 rebuilds blobs next
    if from_version < 4:
        changed |= to_v4(db)
    return changed


def _declared(db: sqlite3.Connection, table: str, column: str) -> str:
    """The declared type of ``table.column`` (upper case; empty when there is none)."""
    return next((str(r[2]).upper() for r in db.execute(f"PRAGMA table_info({table})") if r[1] == column), "")


def _key(value: str | bytes | int | float | None) -> str | bytes | int | float | None:
    """SQL function ``spd_digest_key``: a hex text digest as its raw bytes (anything else as it is)."""
    return digest_key(value) if isinstance(value, str) else value


def to_v4(db: sqlite3.Connection) -> bool:
    """Bring a schema-3 store to schema 4 inside the open transaction: ``blobs`` and
    ``versions`` rebuilt with raw-byte digests, every row and column kept (``versions.id``
    too). Returns whether anything was rebuilt (False: the tables already have that shape, as
    a new store's do). Raises ValueError when a rebuilt table does not hold as many rows as the
    old one (nothing is changed: the caller rolls back)."""
    if _declared(db, "blobs", "digest") == "BLOB" and _declared(db, "versions", "digest") == "BLOB":
        return False
    db.create_function("spd_digest_key", 1, _key, deterministic=True)
    from .rows import _SCHEMA

    ddl = {name: _create(_SCHEMA, name) for name in ("blobs", "versions")}
    # blobs first: versions_v4 refers to blobs(digest) by name, so that name must be the new table
    for table in ("blobs", "versions"):
        old = columns(db, table)
        db.execute(ddl[table].replace(f"CREATE TABLE IF NOT EXISTS {table} (", f"CREATE TABLE {table}_v4 (", 1))
        keep = [c for c in _ordered(db, f"{table}_v4") if c in old]
        picked = ", ".join("spd_digest_key(digest)" if c == "digest" else c for c in keep)
        order = " ORDER BY id" if "id" in old else ""  # versions: rows in the order they were recorded
        db.execute(f"INSERT INTO {table}_v4({', '.join(keep)}) SELECT {picked} FROM {table}{order}")
        (n_old,) = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        (n_new,) = db.execute(f"SELECT COUNT(*) FROM {table}_v4").fetchone()
        if n_old != n_new:
            raise ValueError(f"copying {table} kept {n_new} of {n_old} rows")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_v4 RENAME TO {table}")
    return True


def _ordered(db: sqlite3.Connection, table: str) -> list[str]:
    """Column names of ``table`` in their declared order."""
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def _create(schema: str, table: str) -> str:
    """The ``CREATE TABLE IF NOT EXISTS <table> (...)`` statement of ``table`` in ``schema``."""
    head = f"CREATE TABLE IF NOT EXISTS {table} ("
    start = schema.index(head)
    return schema[start:schema.index(";", start)]


def vacuum_after(db: sqlite3.Connection) -> None:
    """Give the pages freed by an upgrade back to the filesystem (``VACUUM``, outside any
    transaction; best effort: a full disk leaves the store correct, only larger)."""
    try:
        db.execute("VACUUM")
    except sqlite3.Error:
        pass
