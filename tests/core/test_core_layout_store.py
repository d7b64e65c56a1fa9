"""Layout (staticPodPath detection, component names) and the SQLite version store."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from staticpodd.errors import StoreError, UnknownVersion
from staticpodd.layout import Layout, component_of, read_static_pod_path
from staticpodd.store.versions import ParkRecord, VersionStore, digest_of


@pytest.mark.parametrize(
    ("name", "component"),
    [
        ("kube-scheduler.yaml", "kube-scheduler"),
        ("etcd.yml", "etcd"),
        ("etcd.json", "etcd"),
        ("kube-addon-manager.manifest", "kube-addon-manager"),
        ("kube-apiserver.yaml.bak", "kube-apiserver.yaml.bak"),
        ("4913", "4913"),
        (".yaml", ".yaml"),
    ],
)
def test_a_component_is_named_by_its_file_stem(name: str, component: str) -> None:
    assert component_of(name) == component


def test_the_manifest_dir_defaults_to_kubeadms_path_when_there_is_no_kubelet_config(tmp_path: Path) -> None:
    layout = Layout.build(tmp_path)
    assert layout.manifest_dir == tmp_path / "etc/kubernetes/manifests"
    assert layout.parked_dir == tmp_path / "etc/kubernetes/manifests/.staticpodd/parked"
    assert layout.db_path.parent == tmp_path / "var/lib/staticpodd"
    assert layout.lock_path.parent == tmp_path / "run/staticpodd"
    assert layout.config_path == tmp_path / "etc/staticpodd/staticpodd.yaml"


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/pods\n",
        "staticPodPath: \"/etc/kubernetes/pods\"  # comment\n",
        "staticPodPath: '/etc/kubernetes/pods'\n",
        '{"kind": "KubeletConfiguration", "staticPodPath": "/etc/kubernetes/pods"}\n',
        "kind: KubeletConfiguration\nstaticPodPath:\n  /etc/kubernetes/pods\n",
    ],
)
def test_the_kubelets_staticPodPath_is_taken_under_the_root(tmp_path: Path, text: str) -> None:
    cfg = tmp_path / "var/lib/kubelet/config.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(text)
    assert read_static_pod_path(cfg) == "/etc/kubernetes/pods"
    assert Layout.build(tmp_path).manifest_dir == tmp_path / "etc/kubernetes/pods"


def test_an_explicit_manifest_dir_wins_over_the_kubelet_config(tmp_path: Path) -> None:
    cfg = tmp_path / "var/lib/kubelet/config.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("staticPodPath: /etc/kubernetes/pods\n")
    assert Layout.build(tmp_path, tmp_path / "m").manifest_dir == tmp_path / "m"


def test_a_kubelet_config_without_staticPodPath_falls_back_to_the_default(tmp_path: Path) -> None:
    cfg = tmp_path / "var/lib/kubelet/config.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("kind: KubeletConfiguration\nclusterDNS: [10.96.0.10]\n")
    assert Layout.build(tmp_path).manifest_dir == tmp_path / "etc/kubernetes/manifests"


@pytest.fixture
def store(tmp_path: Path) -> VersionStore:
    return VersionStore(tmp_path / "state" / "versions.sqlite3")


def test_the_store_is_private_and_in_wal_mode(tmp_path: Path, store: VersionStore) -> None:
    assert stat.S_IMODE(os.stat(tmp_path / "state").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_versions_are_numbered_per_component_and_identical_bytes_are_stored_once(store: VersionStore) -> None:
    a = store.record("etcd", "etcd.yaml", b"A", action="external", actor="external")
    b = store.record("etcd", "etcd.yaml", b"B", action="apply", actor="alice", reason="bump")
    c = store.record("etcd", "etcd.yaml", b"A", action="rollback", actor="alice")
    s = store.record("kube-scheduler", "kube-scheduler.yaml", b"A", action="apply", actor="bob")
    assert (a.seq, b.seq, c.seq, s.seq) == (1, 2, 3, 1)
    assert store._db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 2
    assert [v.seq for v in store.history("etcd")] == [1, 2, 3]
    assert [v.seq for v in store.history("etcd", limit=2)] == [2, 3]
    assert store.head("etcd").action == "rollback"
    assert store.data(store.get("etcd", 2).digest) == b"B"
    assert store.get("etcd", 2).reason == "bump"
    assert store.components() == ["etcd", "kube-scheduler"]


def test_blobs_and_versions_keep_the_digest_as_32_raw_bytes_and_every_row_returned_has_the_hex(
        store: VersionStore) -> None:
    """Cost that follows the change: the hex digest written twice per version (blob key, version row) was most of what
    a small manifest's version cost on disk."""
    v = store.record("etcd", "etcd.yaml", b"A" * 100, action="apply", actor="root")
    assert v.digest == hashlib.sha256(b"A" * 100).hexdigest()
    db = store._db
    assert db.execute("SELECT typeof(digest), length(digest) FROM versions").fetchall() == [("blob", 32)]
    assert db.execute("SELECT digest FROM blobs").fetchall() == [(bytes.fromhex(v.digest),)]
    assert store.head("etcd") == v == store.get("etcd", 1) == store.history("etcd")[0]
    assert store.knows_digest("etcd", v.digest) and store.data(v.digest) == b"A" * 100
    assert not store.knows_digest("etcd", "not-hex") and not store.knows_digest("etcd", v.digest.upper())


def test_asking_for_a_missing_version_names_the_range(store: VersionStore) -> None:
    store.record("etcd", "etcd.yaml", b"A", action="apply", actor="a")
    with pytest.raises(UnknownVersion) as exc:
        store.get("etcd", 7)
    assert "1..1" in (exc.value.hint or "")


def test_an_unknown_action_is_a_programming_error(store: VersionStore) -> None:
    with pytest.raises(ValueError):
        store.record("etcd", "etcd.yaml", b"A", action="yolo", actor="a")


def test_parks_and_their_deadlines_survive_reopening(tmp_path: Path, store: VersionStore) -> None:
    store.set_park(ParkRecord("kube-scheduler", "kube-scheduler.yaml", digest_of(b"x"), 100.0, 200.0,
                              "alice", "sudo", "drill"))
    store.set_park(ParkRecord("etcd", "etcd.yaml", digest_of(b"y"), 100.0, None, "bob", None, None))
    store.close()
    again = VersionStore(store.path)
    assert [p.component for p in again.expired_parks(150.0)] == []
    assert [p.component for p in again.expired_parks(200.0)] == ["kube-scheduler"]
    assert again.park_of("kube-scheduler").actor_via == "sudo"
    again.clear_park("kube-scheduler")
    assert [p.component for p in again.parks()] == ["etcd"]


def test_intents_are_durable_until_ended(store: VersionStore) -> None:
    i = store.begin_intent("swap", "etcd", {"file_name": "etcd.yaml"})
    assert [x.op for x in store.intents()] == ["swap"]
    assert store.intents()[0].payload == {"file_name": "etcd.yaml"}
    store.end_intent(i)
    assert store.intents() == []


def test_a_failed_transaction_records_nothing(store: VersionStore) -> None:
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.record("etcd", "etcd.yaml", b"A", action="apply", actor="a")
            raise RuntimeError("boom")
    assert store.head("etcd") is None


def test_a_store_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    VersionStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer"):
        VersionStore(path)


def test_a_file_that_is_not_a_store_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError) as exc:
        VersionStore(path)
    assert exc.value.path == str(path)
