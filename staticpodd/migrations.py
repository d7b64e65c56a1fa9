"""Upgrades of an existing version store to the current schema (issue 14), step by step.

Schema 3 (from 2, the first release):

- ``blobs`` gains ``codec`` (:mod:`staticpodd.blobcodec`) and every raw blob is rewritten
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

All of it happens in the caller's one ``BEGIN IMMEDIATE`` transaction: a crash mid-upgrade
leaves the schema-2 store as it was. The freed pages are given back by one ``VACUUM``
afterwards (:func:`vacuum_after`), outside the transaction.
"""

from __future__ import annotations

import hashlib
import sqlite3

from . import blobcodec


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    """Column names of ``table`` (empty when it does not exist)."""
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def to_v3(db: sqlite3.Connection) -> int:
    """Bring a schema-1/2 store to schema 3 inside the open transaction. Returns how many blobs
    were rewritten compressed. Raises ValueError when a compressed blob would not decode to its
    digest (a codec bug: nothing is changed, the caller rolls the transaction back)."""
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
    if "WITHOUT ROWID" not in sql.upper():
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


def vacuum_after(db: sqlite3.Connection) -> None:
    """Give the pages freed by an upgrade back to the filesystem (``VACUUM``, outside any
    transaction; best effort: a full disk leaves the store correct, only larger)."""
    try:
        db.execute("VACUUM")
    except sqlite3.Error:
        pass
