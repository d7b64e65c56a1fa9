"""Adversarial file names: two files with one stem (web.yaml + web.yml / web.json)."""

from __future__ import annotations

import json

from spd_testlib import small_pod


# Regression (found by adversarial testing): web.yaml and web.yml were merged into one component.
def test_two_files_one_stem_are_kept_apart(sandbox, ctl_proc):
    sandbox.write("web.yaml", small_pod("web", "nginx:1.27"))
    sandbox.write("web.yml", small_pod("web3", "nginx:1.26"))
    assert ctl_proc("park", "web.yml").returncode == 0
    assert ctl_proc("unpark", "web.yml").returncode == 0
    st = json.loads(ctl_proc("status", "--json").stdout)
    rows = {c["file_name"]: c for c in st["components"]}
    assert set(rows) == {"web.yaml", "web.yml"}, rows.keys()
    assert not any(c["drift"] for c in rows.values()), rows
    h = ctl_proc("history", "web.yml", "--json")
    assert h.returncode == 0, h.stdout
    assert {v["file_name"] for v in json.loads(h.stdout)["versions"]} == {"web.yml"}
