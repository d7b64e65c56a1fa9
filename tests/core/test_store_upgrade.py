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

from staticpodd import blobcodec
from staticpodd.store import SCHEMA_VERSION, VersionStore

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
        row = store._db.execute("SELECT codec, data FROM blobs WHERE digest = ?", (digest,)).fetchone()
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
    codec, stored = store._db.execute("SELECT codec, data FROM blobs WHERE digest = ?", (v.digest,)).fetchone()
    assert codec == blobcodec.ZD1 and len(stored) < len(data) / 3
    assert store._db.execute("SELECT codec FROM blobs WHERE digest = ?", (tiny.digest,)).fetchone()[0] == "raw"
    assert store.data(v.digest) == data and store.data(tiny.digest) == b"a"
    store.close()


def test_the_zd1_dictionary_is_frozen() -> None:
    """Stores on nodes decode with these exact bytes: editing ZDICT_1 would turn them to garbage."""
    assert hashlib.sha256(blobcodec.ZDICT_1).hexdigest() == (
        "5e5e88253fcb3a77d30bc5ad9a541b287327dc181583e5347e7cff4b9f64e782")
