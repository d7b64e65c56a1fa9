"""The key the daemon keeps its directory findings under (staticpodd.daemon.findings), and how
the findings are written into the store and read back: the key changes with anything the
findings depend on; what is read back equals what was validated."""

from __future__ import annotations

import os
from pathlib import Path

from daemon_harness import make_root, sha

from staticpodd.daemon.findings import decode, encode, findings_key
from staticpodd.validate import Options, validate_directory

MANIFESTS = "etc/kubernetes/manifests"


def _digests(mdir: Path) -> dict[str, str]:
    return {p.name: sha(p.read_bytes()) for p in mdir.iterdir() if p.is_file()}


def test_findings_read_back_from_the_store_format_equal_the_ones_validated(tmp_path) -> None:
    mdir = make_root(tmp_path) / MANIFESTS
    os.chmod(mdir / "etcd.yaml", 0o644)
    (mdir / "kube-apiserver.yaml.bak").write_bytes((mdir / "kube-apiserver.yaml").read_bytes())
    (mdir / "broken.yaml").write_bytes(b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: caf\xc3\xa9\n  bad: [\n")
    found = validate_directory(mdir, Options(node_name="node-1", cpu_capacity_millis=1000))
    assert {f.code for f in found} >= {"loose-permissions", "stray", "duplicate-pod"}
    assert decode(encode(found)) == found
    assert decode(b"not what encode writes") is None


def test_the_key_follows_the_bytes_the_modes_the_names_and_the_options(tmp_path) -> None:
    mdir = make_root(tmp_path) / MANIFESTS
    opts = Options(node_name="node-1")
    key = findings_key(mdir, _digests(mdir), opts)
    assert key is not None and len(key) == 64
    assert findings_key(mdir, _digests(mdir), opts) == key  # the same directory: the same key
    assert findings_key(mdir, _digests(mdir), Options(node_name="node-1", kubernetes_version="1.33")) != key
    assert findings_key(mdir, _digests(mdir), Options(node_name="node-1", cpu_capacity_millis=100)) != key
    assert findings_key(mdir, _digests(mdir), Options(node_name="node-1", max_bytes=1000)) != key
    assert findings_key(mdir, {**_digests(mdir), "etcd.yaml": sha(b"other bytes")}, opts) != key
    os.chmod(mdir / "etcd.yaml", 0o644)
    chmodded = findings_key(mdir, _digests(mdir), opts)
    assert chmodded != key
    (mdir / "notes.txt").write_text("x\n")
    assert findings_key(mdir, _digests(mdir), opts) != chmodded
    assert findings_key(tmp_path / "absent", {}, opts) is None
