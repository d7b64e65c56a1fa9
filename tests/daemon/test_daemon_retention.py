"""The real staticpodd prunes on its timer (``retention:``): right after READY, then every
``interval``. Old versions beyond the policy go, and a removed stray past the window leaves
``status`` and the metrics textfile. The clock is ours: the history is recorded through the
product's API with ``created_at`` 30 days back, and the events' times are moved back by SQL
(record_event has no time argument; nothing else is touched)."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest
from daemon_harness import journal, make_root, staticpodctl, wait_journal

from staticpodd.engine import Actor, Engine
from staticpodd.journal import Journal
from staticpodd.layout import Layout

pytestmark = pytest.mark.slow

DAY = 86400.0
MDIR = "etc/kubernetes/manifests"


def test_the_daemon_prunes_on_its_timer_and_a_removed_stray_leaves_status_and_metrics(tmp_path, run_daemon):
    root = make_root(tmp_path, config=(
        "retention:\n  keep_versions: 2\n  keep_for: 604800\n  interval: 3600\n"
        "metrics:\n  enabled: true\n  textfile_dir: /var/lib/node-exporter\n"))
    (root / "var/lib/node-exporter").mkdir(parents=True)
    mdir = root / MDIR
    etcd = (mdir / "etcd.yaml").read_bytes()
    (mdir / "etcd.yaml.bak").write_bytes(etcd)
    os.chmod(mdir / "etcd.yaml.bak", 0o600)
    eng = Engine(Layout.build(root), actor=Actor("test", 0), journal=Journal("staticpodd", str(root)))


    old = time.time() - 30 * DAY
    with eng.locked():
        eng.scan()  # adopts the five files, .bak included
        (mdir / "etcd.yaml.bak").unlink()
        eng.scan()  # records its removal
        for i in range(5):
            eng.store.record("etcd", "etcd.yaml", etcd + f"# {i}\n".encode(), action="apply", actor="root",
                             created_at=old + i)
        eng.store.record("etcd", "etcd.yaml", etcd, action="rollback", actor="root", created_at=old + 10)
    eng.close()
    db = sqlite3.connect(root / "var/lib/staticpodd/versions.sqlite3")
    db.execute("UPDATE versions SET created_at = ? WHERE created_at > ?", (old, old + 100))
    db.execute("UPDATE events SET created_at = ?", (old,))
    db.commit()
    db.close()
    st = staticpodctl(root, "status", "--json")
    assert "etcd.yaml.bak" in st.stdout

    d = run_daemon(root)
    d.wait_ready()
    e = wait_journal(root, "PRUNED", lambda e: e.get("COMPONENT") == "etcd.yaml.bak")
    assert e["KIND"] == "stray-retired" and e["MESSAGE_ID"] == "abe21babe36c4499a9f1bf7ed0f67d17"
    e = wait_journal(root, "PRUNED", lambda e: e.get("COMPONENT") == "etcd")
    assert e["VERSIONS"] == "1,2,3,4,5"
    h = staticpodctl(root, "history", "etcd", "--json")
    assert '"version":6' in h.stdout and '"version":5' not in h.stdout
    st = staticpodctl(root, "status", "--json")
    assert st.returncode == 0 and "etcd.yaml.bak" not in st.stdout
    prom = root / "var/lib/node-exporter/staticpodd.prom"

    def metrics_clean() -> bool:
        return prom.exists() and "etcd.yaml.bak" not in prom.read_text()

    from daemon_harness import wait_until

    wait_until(metrics_clean, 15, what="metrics without the retired stray")
    assert "etcd.yaml" in prom.read_text()
    assert d.stop() == 0
    assert len([x for x in journal(root, "PRUNED")]) == 2
