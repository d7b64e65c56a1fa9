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


def test_a_symlink_to_a_secret_file_is_named_but_its_bytes_are_never_recorded(sandbox, ctl, tmp_path):
    # Found by a newcomer (stop 16): `ln -s /etc/shadow manifests/x.yaml` put the secret's bytes
    # into the version store (and `show` printed them). The kubelet follows the link, cannot decode
    # the file as a pod and runs nothing from it (it refuses it at every relist: it does not skip
    # it, as staticpodd once said); staticpodd names the link and records nothing of it.
    import json

    secret = tmp_path / "admin.conf"
    secret.write_text("apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
                      "    client-key-data: TOP-SECRET-KEY\n")
    (sandbox.manifests / "admin.yaml").symlink_to(secret)
    sandbox.write("web.yaml", small_pod("web"))
    for verb in (("status", "--json"), ("park", "web"), ("unpark", "web"), ("recover",)):
        ctl(*verb)
    st = json.loads(ctl("status", "--json").out)
    assert [c["component"] for c in st["components"]] == ["web"]
    assert [link["file_name"] for link in st["links_not_recorded"]] == ["admin.yaml"]
    said = ctl("status").err
    assert "not a pod manifest" in said and "the kubelet follows it and refuses it at every relist" in said
    doctor = json.loads(ctl("doctor", "--json").out)
    assert "symlink-not-recorded" in {p["code"] for p in doctor["problems"]}
    assert all("skips it" not in p["message"] for p in doctor["problems"])
    from staticpodd.layout import Layout
    from staticpodd.store.versions import VersionStore

    store = VersionStore(Layout.build(sandbox.root).db_path)  # blobs are compressed: ask the store
    try:
        assert store.components() == ["web"]
        assert all(b"TOP-SECRET-KEY" not in store.data(v.digest) for v in store.history("web"))
    finally:
        store.close()
    assert "no recorded versions" in ctl("history", "admin").out


def test_a_symlink_to_a_real_manifest_is_still_recorded(sandbox, ctl, tmp_path):
    target = tmp_path / "pods" / "web.yaml"
    target.parent.mkdir()
    target.write_text(small_pod("web"))
    (sandbox.manifests / "web.yaml").symlink_to(target)
    ctl("status")
    assert ctl("park", "other").rc != 0  # a changing verb scans first
    assert ctl("history", "web").rc == 0
