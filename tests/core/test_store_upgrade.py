"""A store written by the first release (schema 2: raw blobs, a duplicate versions index) is
upgraded in place to schema 3 on first open: every byte, version, park, event and verdict is
kept; blobs end compressed; the store ends smaller. The fixture ``fixtures/store-v2.sqlite3`` was
written by the first release's own code (``fixtures/make_store_v2.py`` says how)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from staticpodd.store import blobcodec
from staticpodd.store.versions import SCHEMA_VERSION, VersionStore

FIXTURE = Path(__file__).parent / "fixtures/store-v2.sqlite3"


def _raw_rows(path: Path) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT v.component, v.seq, v.file_name, v.digest, v.action, v.actor, v.reason, v.created_at, b.data "
            "FROM versions v JOIN blobs b ON b.digest = v.digest ORDER BY v.id").fetchall()
    finally:
        db.close()
    return rows


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "state/versions.sqlite3"
    path.parent.mkdir(mode=0o700)
    shutil.copy(FIXTURE, path)
    return path


def test_the_fixture_is_a_first_release_store(old_store: Path) -> None:
    db = sqlite3.connect(old_store)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "2"
    assert "codec" not in {r[1] for r in db.execute("PRAGMA table_info(blobs)")}
    db.close()


def test_opening_a_schema_2_store_upgrades_it_keeping_every_byte_and_record(old_store: Path) -> None:
    before = _raw_rows(old_store)
    size_before = old_store.stat().st_size
    assert len(before) == 13
    store = VersionStore(old_store)
    try:
        for comp, seq, fn, digest, action, actor, reason, created, data in before:
            v = store.get(comp, seq)
            assert (v.file_name, v.digest, v.action, v.actor, v.reason, v.created_at) == (
                fn, digest, action, actor, reason, created)
            got = store.data(digest)
            assert got == bytes(data) and hashlib.sha256(got).hexdigest() == digest
        assert store.park_of("kube-scheduler") is not None
        assert [e["kind"] for e in store.events("copy")] == ["removed"]
        assert store.verdict(store.head("etcd").digest, "v-test") is True
        assert store.components() == ["copy", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        db = store._db
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        codecs = {r[0] for r in db.execute("SELECT codec FROM blobs")}
        assert codecs == {blobcodec.ZD1}
        # the duplicate index of (component, seq) is gone; the UNIQUE constraint's own one serves
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "versions_by_component" not in names and "sqlite_autoindex_blobs_1" not in names
        assert "WITHOUT ROWID" in db.execute("SELECT sql FROM sqlite_master WHERE name='blobs'").fetchone()[0]
        assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        plan = " ".join(r[3] for r in db.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM versions WHERE component='etcd' ORDER BY seq DESC LIMIT 1"))
        assert "sqlite_autoindex_versions" in plan
        # new versions go on from where the old store left them
        assert store.record("etcd", "etcd.yaml", b"new bytes\n", action="apply", actor="root").seq == 4
    finally:
        store.close()
    assert old_store.stat().st_size < size_before * 0.7
    # and opening it again changes nothing
    store = VersionStore(old_store)
    assert store.data(before[0][3]) == bytes(before[0][8])
    store.close()


def test_a_blob_already_damaged_is_left_exactly_as_it_was(old_store: Path) -> None:
    db = sqlite3.connect(old_store)
    digest = db.execute("SELECT digest FROM blobs ORDER BY digest LIMIT 1").fetchone()[0]
    db.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"not the bytes of that digest", digest))
    db.commit()
    db.close()
    store = VersionStore(old_store)
    try:
        row = store._db.execute("SELECT codec, data FROM blobs WHERE digest = ?", (bytes.fromhex(digest),)).fetchone()
        assert (row[0], bytes(row[1])) == ("raw", b"not the bytes of that digest")
        assert store._db.execute("SELECT COUNT(*) FROM blobs WHERE codec = 'zd1'").fetchone()[0] > 0
    finally:
        store.close()


def test_a_read_only_schema_2_store_is_read_as_it_is(old_store: Path) -> None:
    before = _raw_rows(old_store)
    store = VersionStore(old_store, readonly=True)
    try:
        assert store.data(before[0][3]) == bytes(before[0][8])
        assert "etcd" in store.components()
    finally:
        store.close()


def test_new_blobs_are_stored_compressed_and_read_back_exactly(tmp_path: Path) -> None:
    store = VersionStore(tmp_path / "v.sqlite3")
    data = (Path(__file__).parents[2].parent / "shared/corpus/manifests/01-zetaoss-kubeadm-kube-apiserver.yaml"
            ).read_bytes()
    v = store.record("kube-apiserver", "kube-apiserver.yaml", data, action="apply", actor="root")
    tiny = store.record("x", "x.yaml", b"a", action="apply", actor="root")
    codec, stored = store._db.execute("SELECT codec, data FROM blobs WHERE digest = ?",
                                      (bytes.fromhex(v.digest),)).fetchone()
    assert codec == blobcodec.ZD1 and len(stored) < len(data) / 3
    assert store._db.execute("SELECT codec FROM blobs WHERE digest = ?",
                             (bytes.fromhex(tiny.digest),)).fetchone()[0] == "raw"
    assert store.data(v.digest) == data and store.data(tiny.digest) == b"a"
    store.close()


def test_the_zd1_dictionary_is_frozen() -> None:
    """Stores on nodes decode with these exact bytes: editing ZDICT_1 would turn them to garbage."""
    assert hashlib.sha256(blobcodec.ZDICT_1).hexdigest() == (
        "5e5e88253fcb3a77d30bc5ad9a541b287327dc181583e5347e7cff4b9f64e782")


# -- schema 3 (before the store-size work) -> 4: digests of blobs and versions as raw bytes -----------

FIXTURE_V3 = Path(__file__).parent / "fixtures/store-v3.sqlite3"
BRANCH_POINT = "6ecb680"  # the last schema-3 code, which wrote FIXTURE_V3 (fixtures/make_store_v3.py)
REPO = Path(__file__).resolve().parents[2]


def _dump(path: Path) -> dict[str, list[tuple]]:
    """Every row of every table (digests as hex text whatever the schema), ``schema_version`` left out."""
    db = sqlite3.connect(path)
    try:
        out = {}
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            rows = db.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            out[table] = sorted(
                tuple(v.hex() if c == "digest" and isinstance(v, bytes) else v for c, v in zip(cols, r, strict=True))
                for r in rows if not (table == "meta" and r[0] == "schema_version"))
        return out
    finally:
        db.close()


@pytest.fixture
def v3_store(tmp_path: Path) -> Path:
    path = tmp_path / "state/versions.sqlite3"
    path.parent.mkdir(mode=0o700)
    shutil.copy(FIXTURE_V3, path)
    return path


def test_opening_a_schema_3_store_upgrades_it_keeping_every_row(v3_store: Path) -> None:
    db = sqlite3.connect(v3_store)  # the fixture is what the branch point writes
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "3"
    assert {r[0] for r in db.execute("SELECT typeof(digest) FROM versions UNION SELECT typeof(digest) FROM blobs")} \
        == {"text"}
    db.close()
    before = _dump(v3_store)
    size_before = v3_store.stat().st_size
    # read-only first: an old store that cannot be written is read as it is, hex digests and all
    ro = VersionStore(v3_store, readonly=True)
    try:
        head = ro.head("etcd")
        assert head is not None and ro.knows_digest("etcd", head.digest) and ro.data(head.digest)
    finally:
        ro.close()
    assert _dump(v3_store) == before
    store = VersionStore(v3_store)
    try:
        db = store._db
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION) \
            == "4"
        assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0  # VACUUMed: the old tables' pages given back
        # every row of every table, ids and all, is what it was; the digests only changed form
        assert _dump(v3_store) == before
        assert {r for r in db.execute(
            "SELECT typeof(digest), length(digest) FROM versions UNION SELECT typeof(digest), length(digest) FROM blobs"
        )} == {("blob", 32)}
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        plan = " ".join(r[3] for r in db.execute(
            "EXPLAIN QUERY PLAN SELECT seq FROM versions WHERE component='etcd' ORDER BY seq DESC LIMIT 1"))
        assert "sqlite_autoindex_versions" in plan
        for _id, comp, seq, _fn, digest, *_rest in before["versions"]:
            v = store.get(comp, seq)
            assert v.digest == digest and isinstance(v.digest, str)
            assert hashlib.sha256(store.data(digest)).hexdigest() == digest
            assert store.knows_digest(comp, digest)
        assert store.data(store.head("tiny").digest) == b"a"
        assert store.verdict(store.head("etcd").digest, "v-test") is True
        assert store.record("etcd", "etcd.yaml", b"new bytes\n", action="apply", actor="root").seq == 4
        assert store.history("etcd")[-1].digest == hashlib.sha256(b"new bytes\n").hexdigest()
    finally:
        store.close()
    assert v3_store.stat().st_size <= size_before
    store = VersionStore(v3_store)  # opening it again changes nothing
    assert store.head("etcd").seq == 4 and len(store.history("kube-apiserver")) == 3
    store.close()


def test_a_digest_that_is_not_sha256_hex_is_kept_as_the_text_it_was(v3_store: Path) -> None:
    """A damaged or hand-edited store: such a value cannot become 32 bytes, so it stays as it was."""
    db = sqlite3.connect(v3_store)
    db.execute("INSERT INTO blobs(digest, size, data, codec) VALUES ('NOT-A-DIGEST', 3, x'616263', 'raw')")
    db.execute("INSERT INTO versions(component, seq, file_name, digest, size, action, actor, created_at) "
               "VALUES ('odd', 1, 'odd.yaml', 'NOT-A-DIGEST', 3, 'apply', 'root', 1.0)")
    db.commit()
    db.close()
    store = VersionStore(v3_store)
    try:
        assert store._db.execute("SELECT typeof(digest) FROM versions WHERE component = 'odd'").fetchone() == ("text",)
        v = store.get("odd", 1)
        assert v.digest == "NOT-A-DIGEST" and store.data(v.digest) == b"abc"
        assert store._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "4"
    finally:
        store.close()


_CRASH_IN_UPGRADE = """
import os, sys
from pathlib import Path
from staticpodd.store import migrations
from staticpodd.store.versions import VersionStore

real = migrations.to_v4

def to_v4_then_crash(db):
    real(db)  # both tables rebuilt, inside the upgrade's transaction, not committed
    os._exit(9)

migrations.to_v4 = to_v4_then_crash
VersionStore(Path(sys.argv[1]))
"""


def test_an_upgrade_killed_midway_leaves_the_schema_3_store_usable(v3_store: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    before = _dump(v3_store)
    proc = subprocess.run([sys.executable, "-c", _CRASH_IN_UPGRADE, str(v3_store)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert proc.returncode == 9, proc.stderr
    db = sqlite3.connect(v3_store)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "3"
    db.close()
    assert _dump(v3_store) == before
    # the branch point's own code still opens and reads it (when this is a git checkout)
    arch = subprocess.run(["git", "-C", str(REPO), "archive", BRANCH_POINT, "staticpodd"], capture_output=True)
    if arch.returncode == 0:
        old = tmp_path / "old-code"
        old.mkdir()
        subprocess.run(["tar", "-x", "-C", str(old)], input=arch.stdout, check=True)
        read = ("import sys; from pathlib import Path; from staticpodd.store import VersionStore, SCHEMA_VERSION\n"  # regroup: keep (the older code's module)
                "assert SCHEMA_VERSION == 3\n"
                "s = VersionStore(Path(sys.argv[1])); v = s.head('etcd'); print(v.seq, len(s.data(v.digest)))\n")
        got = subprocess.run([sys.executable, "-c", read, str(v3_store)], capture_output=True, text=True,
                             env={"PYTHONPATH": str(old), "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
        assert got.returncode == 0 and got.stdout.split()[0] == "3", got.stderr
    # and this code upgrades it on the next open
    store = VersionStore(v3_store)
    try:
        assert store._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "4"
        assert _dump(v3_store) == before
    finally:
        store.close()


def test_rows_the_previous_release_writes_after_the_upgrade_are_read_too(v3_store: Path) -> None:
    """The branch point's daemon, still running while a new staticpodctl upgrades the store,
    goes on writing hex text digests until it is restarted: those rows stay readable, and the
    same bytes recorded again refer to that blob row (no foreign-key failure, no second copy)."""
    VersionStore(v3_store).close()  # upgraded to 4
    data = b"apiVersion: v1\nkind: Pod\n# written by the old daemon\n"
    db = sqlite3.connect(v3_store)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "4"
    db.close()
    digest = hashlib.sha256(data).hexdigest()
    codec, stored = blobcodec.encode(data)
    db = sqlite3.connect(v3_store)  # the statements schema-3 code runs, verbatim
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("INSERT INTO blobs(digest, size, data, codec) VALUES (?, ?, ?, ?)", (digest, len(data), stored, codec))
    db.execute("INSERT INTO versions(component, seq, file_name, digest, size, mode, uid, gid, action, actor, "
               "actor_via, reason, location, created_at) VALUES ('etcd', 4, 'etcd.yaml', ?, ?, NULL, NULL, NULL, "
               "'external', 'external', NULL, NULL, 'live', 2.0)", (digest, len(data)))
    db.commit()
    db.close()
    store = VersionStore(v3_store)
    try:
        v = store.head("etcd")
        assert (v.seq, v.digest) == (4, digest) and store.data(digest) == data and store.knows_digest("etcd", digest)
        again = store.record("kube-apiserver", "kube-apiserver.yaml", data, action="apply", actor="root")
        assert again.digest == digest and store.data(again.digest) == data
        assert store._db.execute("SELECT COUNT(*) FROM blobs WHERE digest IN (?, ?)",
                                 (bytes.fromhex(digest), digest)).fetchone()[0] == 1
        assert store._db.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        store.close()


DIRFINDINGS_POINT = "f238aee"  # the last code without the dirfindings table (schema 4, like this one)


def test_the_daemons_directory_findings_go_into_a_store_from_before_their_table_and_older_code_still_opens_it(
    tmp_path: Path,
) -> None:
    """``dirfindings`` is a cache added within schema 4: the first save creates it, a look-up in
    a store without it finds nothing, and the code from before it still opens and writes the store."""
    import subprocess
    import sys

    path = tmp_path / "state/versions.sqlite3"
    path.parent.mkdir(mode=0o700)
    old = tmp_path / "old-code"
    arch = subprocess.run(["git", "-C", str(REPO), "archive", DIRFINDINGS_POINT, "staticpodd"], capture_output=True)
    env = {"PYTHONPATH": str(old), "PATH": "/usr/bin:/bin"}
    if arch.returncode == 0:  # a git checkout: the store is written by the code from before the table
        old.mkdir()
        subprocess.run(["tar", "-x", "-C", str(old)], input=arch.stdout, check=True)
        write = ("import sys; from pathlib import Path; from staticpodd.store import VersionStore\n"  # regroup: keep (the older code's module)
                 "s = VersionStore(Path(sys.argv[1])); s.record('etcd', 'etcd.yaml', b'one\\n', action='apply', "
                 "actor='root'); s.close()\n")
        subprocess.run([sys.executable, "-c", write, str(path)], check=True, env=env, cwd=tmp_path)
    else:
        VersionStore(path).record("etcd", "etcd.yaml", b"one\n", action="apply", actor="root")
    store = VersionStore(path)
    try:
        assert store._db.execute("SELECT name FROM sqlite_master WHERE name = 'dirfindings'").fetchone() is None
        assert store.dir_findings("/etc/kubernetes/manifests", "k1") is None
        store.set_dir_findings("/etc/kubernetes/manifests", "k1", b"payload one")
        assert store.dir_findings("/etc/kubernetes/manifests", "k1") == b"payload one"
        assert store.dir_findings("/etc/kubernetes/manifests", "k2") is None  # another key: nothing
        store.set_dir_findings("/srv/manifests", "k2", b"payload two")  # one row: the newest
        assert store.dir_findings("/etc/kubernetes/manifests", "k1") is None
        assert store.dir_findings("/srv/manifests", "k2") == b"payload two"
        assert store._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "4"
    finally:
        store.close()
    if arch.returncode == 0:
        read = ("import sys; from pathlib import Path; from staticpodd.store import VersionStore\n"  # regroup: keep (the older code's module)
                "s = VersionStore(Path(sys.argv[1])); v = s.record('etcd', 'etcd.yaml', b'two\\n', action='apply', "
                "actor='root'); print(v.seq, s.data(s.head('etcd').digest).decode().strip()); s.close()\n")
        got = subprocess.run([sys.executable, "-c", read, str(path)], capture_output=True, text=True, env=env,
                             cwd=tmp_path)
        assert got.returncode == 0 and got.stdout.split() == ["2", "two"], got.stderr
    store = VersionStore(path)
    try:
        assert store.dir_findings("/srv/manifests", "k2") == b"payload two"
        assert store.head("etcd").seq == 2
    finally:
        store.close()
