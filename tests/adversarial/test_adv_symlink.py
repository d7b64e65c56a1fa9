"""Adversarial: live manifests that are symlinks (the kubelet follows them)."""

from __future__ import annotations

import json
import os

from spd_testlib import small_pod


# Regression (found by adversarial testing, fixed in the working tree meanwhile): park of a component whose
#   live file is a relative symlink moves the link into .staticpodd/parked/ (now dangling), then dies with
#   AssertionError: the pod leaves the kubelet's directory, nothing is recorded, unpark/status no longer know
#   the component
def test_park_relative_symlink(sandbox, ctl_proc):
    real = sandbox.manifests.parent / "real"
    real.mkdir()
    (real / "web.yaml").write_text(small_pod("web", "nginx:1.27"))
    os.symlink("../real/web.yaml", sandbox.manifests / "web.yaml")
    assert ctl_proc("status").returncode == 0
    p = ctl_proc("park", "web", "--json")
    obj = json.loads(p.stdout.splitlines()[-1])
    if p.returncode != 0:
        # a clean refusal is fine: nothing may have changed
        assert obj["error"]["code"] != "internal", p.stderr
        assert os.path.islink(sandbox.manifests / "web.yaml")
        assert os.path.exists(sandbox.manifests / "web.yaml")
        return
    u = ctl_proc("unpark", "web", "--json")
    assert u.returncode == 0, u.stdout
    assert (sandbox.manifests / "web.yaml").read_text() == small_pod("web", "nginx:1.27")
