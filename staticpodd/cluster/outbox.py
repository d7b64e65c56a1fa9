"""The cluster view's persisted queue: ``<state_dir>/cluster-outbox.sqlite``.

Every Event staticpodd means to create on its Node is first a row here (written by whichever
process logged it: ``staticpodctl`` or the daemon), then deleted once the API server took it.
Rows go out in ``seq`` order. The queue is bounded (``cluster.queue_limit``): over it the oldest
rows are deleted and counted in ``meta.dropped``, which becomes one ``EventsDropped`` Event at
the next flush (the journal keeps every entry). ``meta`` also holds what the annotations said
when last published and the last error, for ``status`` and ``doctor``.

The file is created 0600 in the state directory (0700, root's); one another user could have
written is refused (:mod:`staticpodd.node.trust`), as the version store is.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from pathlib import Path

from ..errors import StaticpodError
from ..node.trust import ensure_dir, problem_of, untrusted
from ..store.versions import iso

TYPE_CHECKING = False  # typing is for mypy: a changing verb that publishes imports this module
if TYPE_CHECKING:
    from typing import Any

FILE_NAME = "cluster-outbox.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  created REAL NOT NULL,
  entry TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class OutboxCorrupt(StaticpodError):
    """The outbox file is not a SQLite database SQLite can read (truncated, overwritten)."""

    code = "cluster-outbox-corrupt"


class _Db:
    """The connection, with SQLite's word for a damaged file (``file is not a database``,
    ``database disk image is malformed``: exactly ``sqlite3.DatabaseError``, not its subclasses
    such as a busy ``OperationalError``) raised as :class:`OutboxCorrupt` naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=5.0, isolation_level=None)

    def _corrupt(self, exc: sqlite3.DatabaseError) -> OutboxCorrupt:
        p = self.path
        return OutboxCorrupt(
            f"the cluster outbox cannot be read: {exc}", path=str(p),
            hint=f"move it aside (mv {p} {p}.bad; rm -f {p}-wal {p}-shm): the next Event starts a new queue; "
                 "the journal has every Event it held")

    def execute(self, sql: str, args: Any = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, args)
        except sqlite3.DatabaseError as exc:
            if type(exc) is sqlite3.DatabaseError:
                raise self._corrupt(exc) from None
            raise

    def executescript(self, sql: str) -> None:
        try:
            self._db.executescript(sql)
        except sqlite3.DatabaseError as exc:
            if type(exc) is sqlite3.DatabaseError:
                raise self._corrupt(exc) from None
            raise

    def close(self) -> None:
        self._db.close()


def outbox_path(state_dir: Path) -> Path:
    """``<state_dir>/cluster-outbox.sqlite``."""
    return Path(state_dir) / FILE_NAME


class Outbox:
    """One connection to the queue. ``limit``: most rows kept. Raises Untrusted when the file or
    the state directory could have been written by another user, OutboxCorrupt when SQLite cannot
    read it (every method may raise it too), OSError or sqlite3.Error when it cannot be opened.
    Use as a context manager or call :meth:`close`."""

    def __init__(self, state_dir: Path, *, limit: int = 1000, create: bool = True) -> None:
        self.path = outbox_path(state_dir)
        self.limit = max(1, int(limit))
        if create:
            ensure_dir(Path(state_dir), 0o700, "state directory")
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                st = os.fstat(fd)
                if st.st_size == 0 and stat.S_IMODE(st.st_mode) != 0o600:
                    os.fchmod(fd, 0o600)  # whatever the umask
                    st = os.fstat(fd)
            finally:
                os.close(fd)
        else:
            st = os.lstat(self.path)  # FileNotFoundError: nothing was ever queued
        reason = problem_of(st) if stat.S_ISREG(st.st_mode) else "not a regular file"
        if reason:
            raise untrusted(self.path, "cluster outbox", reason)
        for side in (self.path.with_name(self.path.name + "-wal"), self.path.with_name(self.path.name + "-shm")):
            try:  # SQLite opens these by name: the same rule, said with the file's name
                sst = os.lstat(side)
            except FileNotFoundError:
                continue
            reason = problem_of(sst) if stat.S_ISREG(sst.st_mode) else "not a regular file (a symlink?)"
            if reason:
                raise untrusted(side, "cluster outbox's " + side.name.rsplit("-", 1)[1] + " file", reason)
        self._db = _Db(self.path)
        # WAL: one fsync per queued row instead of the rollback journal's two (a verb pays it);
        # synchronous stays FULL, so a queued row survives a power cut too
        if create and self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def put(self, entry: dict[str, Any]) -> int:
        """Queue one entry (a JSON-able mapping); returns its ``seq``. When more than ``limit``
        rows wait, the oldest are deleted and counted in ``meta.dropped``."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            cur = db.execute("INSERT INTO outbox (created, entry) VALUES (?, ?)",
                             (time.time(), json.dumps(entry, sort_keys=True)))
            seq = int(cur.lastrowid or 0)
            (count,) = db.execute("SELECT COUNT(*) FROM outbox").fetchone()
            over = int(count) - self.limit
            if over > 0:
                (through,) = db.execute("SELECT MAX(seq) FROM (SELECT seq FROM outbox ORDER BY seq LIMIT ?)",
                                        (over,)).fetchone()
                db.execute("DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox ORDER BY seq LIMIT ?)", (over,))
                dropped = int(self._meta(db, "dropped") or 0) + over
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dropped', ?)", (str(dropped),))
                # what names the EventsDropped Event: the same at every retry of it, another for
                # the next drops (see take_dropped)
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dropped_through', ?)", (str(through),))
                if self._meta(db, "dropped_at") is None:
                    db.execute("INSERT INTO meta (key, value) VALUES ('dropped_at', ?)",
                               (iso(time.time()),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return seq

    def pending(self, limit: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """The waiting entries, oldest first, as ``(seq, entry)``; a row that does not parse is
        deleted (it could only come from a bug or a hand edit, and would block the queue)."""
        rows = self._db.execute("SELECT seq, entry FROM outbox ORDER BY seq"
                                + (" LIMIT ?" if limit else ""), (limit,) if limit else ()).fetchall()
        out = []
        for seq, text in rows:
            try:
                entry = json.loads(text)
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                out.append((int(seq), entry))
            else:
                self.done(int(seq))
        return out

    def waiting(self, seqs: list[int] | None = None) -> int:
        """How many entries wait (of ``seqs`` only, when given)."""
        if seqs is None:
            return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])
        if not seqs:
            return 0
        marks = ",".join("?" * len(seqs))
        return int(self._db.execute(f"SELECT COUNT(*) FROM outbox WHERE seq IN ({marks})", seqs).fetchone()[0])

    def last_seq(self) -> int:
        """The highest ``seq`` ever queued (0: none)."""
        row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()
        return int(row[0]) if row else 0

    def done(self, seq: int) -> None:
        """Delete a published entry."""
        self._db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))

    def refused(self, seq: int, why: str) -> None:
        """Delete an entry the API server refused for good (400, 413, 422), keeping ``why`` for
        the verb that queued it (:meth:`refusals`; the last 100 are kept)."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            try:
                kept = json.loads(self._meta(db, "refused") or "{}")
            except ValueError:
                kept = {}
            if not isinstance(kept, dict):
                kept = {}
            kept[str(seq)] = why
            kept = dict(sorted(kept.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0)[-100:])
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('refused', ?)", (json.dumps(kept),))
            db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def refusals(self, seqs: list[int]) -> list[str]:
        """Why the API server refused those of ``seqs`` it refused for good (see :meth:`refused`)."""
        try:
            kept = json.loads(self.get("refused") or "{}")
        except ValueError:
            return []
        return [str(kept[str(s)]) for s in seqs if isinstance(kept, dict) and str(s) in kept]

    def request_state(self) -> int:
        """Ask the next flush to publish the Node's annotations as the store has them now: a
        change that queues no Event (an edit of a parked copy, a removal seen) has no row whose
        ``seq`` a verb could wait for. Returns this request's number; a flush that began after
        it sets ``state_served`` to at least that number (see :meth:`served`)."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            n = int(self._meta(db, "state_requested") or 0) + 1
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('state_requested', ?)", (str(n),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return n

    def requested(self) -> int:
        """The newest :meth:`request_state` number (0: none)."""
        return int(self.get("state_requested") or 0)

    def served(self) -> int:
        """The newest request number a finished flush had seen when it began (0: none)."""
        return int(self.get("state_served") or 0)

    def attempted(self, seq: int) -> None:
        """Count one failed attempt at an entry."""
        self._db.execute("UPDATE outbox SET attempts = attempts + 1 WHERE seq = ?", (seq,))

    @staticmethod
    def _meta(db: _Db, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def get(self, key: str) -> str | None:
        """One ``meta`` value (``dropped``, ``annotations``, ``error``, ``published_at``), or None."""
        return self._meta(self._db, key)

    def set(self, key: str, value: str | None) -> None:
        """Set (or, with None, delete) one ``meta`` value."""
        if value is None:
            self._db.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def dropped(self) -> tuple[int, str | None, int]:
        """``(count, at, through)``: how many entries were dropped since the last EventsDropped
        Event, when the first of them was (ISO 8601 UTC, None when unknown) and the highest
        dropped ``seq``. ``at`` and ``through`` name that Event, so a retry after a lost answer
        meets it (409) and later drops make another."""
        return (int(self.get("dropped") or 0), self.get("dropped_at"), int(self.get("dropped_through") or 0))

    def take_dropped(self, n: int) -> None:
        """``n`` dropped entries were said (an EventsDropped Event was created): count them off.
        Entries dropped meanwhile stay counted, for another Event."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            left = int(self._meta(db, "dropped") or 0) - n
            if left > 0:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dropped', ?)", (str(left),))
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('dropped_at', ?)",
                           (iso(time.time()),))
            else:
                db.execute("DELETE FROM meta WHERE key IN ('dropped', 'dropped_at', 'dropped_through')")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
