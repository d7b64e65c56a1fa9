"""``doctor`` on a version store whose file is damaged where SQLite still opens it: an index page
with one flipped byte (real SQLite, a real file; ``PRAGMA integrity_check`` finds it). The problem
is counted and doctor exits 1; it used to print the problem and then "no problems found", exit 0."""

from __future__ import annotations

import sqlite3

SCHED = "kube-scheduler.yaml"


def _flip_a_byte_of_an_index(db) -> str:
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the pages are in the file, not the WAL
    size = con.execute("PRAGMA page_size").fetchone()[0]
    roots = [r for (r,) in con.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index'")]
    con.close()
    with open(db, "r+b") as fh:
        for root in roots:  # the first index leaf that holds a cell
            fh.seek(size * (root - 1))
            page = bytearray(fh.read(size))
            if page[0] == 10 and int.from_bytes(page[3:5], "big") >= 1:
                page[size - 3] ^= 0x01  # inside the key of the last cell on the page
                fh.seek(size * (root - 1))
                fh.write(page)
                break
    con = sqlite3.connect(db)
    verdict = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    return str(verdict)


def test_a_damaged_version_store_is_a_problem_and_doctor_exits_1(kubeadm, ctl) -> None:
    assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0
    verdict = _flip_a_byte_of_an_index(kubeadm.root / "var/lib/staticpodd/versions.sqlite3")
    assert verdict != "ok", "the damage must be one integrity_check finds"
    r = ctl("doctor")
    assert "problem[store-corrupt]" in r.out, r.out
    assert "no problems found" not in r.out and r.rc == 1, (r.rc, r.out)
    assert ctl("doctor", "--json").json()["ok"] is False
