"""Adversarial: what goes into the version store."""

from __future__ import annotations

import os


# Regression (found by adversarial testing, fixed in the working tree meanwhile): files of any size are copied
#   whole into versions.sqlite3 (no cap, even over the kubelet's 10 MB limit): junk files in the directory
#   fill /var/lib (3x200 MB -> 800 MB store)
def test_store_does_not_ingest_huge_files(kubeadm, ctl_proc):
    kubeadm.write("junk.yaml", os.urandom(30 * 1024 * 1024))
    p = ctl_proc("park", "kube-scheduler")  # any changing verb scans the directory first
    assert p.returncode == 0, p.stderr
    ctl_proc("apply", str(kubeadm.manifests / "junk.yaml"), "--as", "junk")
    db = kubeadm.root / "var" / "lib" / "staticpodd"
    size = sum(f.stat().st_size for f in db.iterdir())
    assert size < 11 * 1024 * 1024, f"store holds {size} bytes"
