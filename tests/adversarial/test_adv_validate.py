"""Adversarial manifests: every refusal names file and line; hints name real config keys."""

from __future__ import annotations

import json


def test_nul_byte_refusal_names_line(sandbox, ctl_proc, tmp_path):
    f = tmp_path / "nul.yaml"
    f.write_bytes(b'apiVersion: v1\nkind: Pod\nmetadata:\n  name: nul\n  annotations:\n    a: "a\x00b"\n'
                  b"spec:\n  containers:\n  - name: c\n    image: nginx:1.27\n")
    p = ctl_proc("validate", str(f), "--json")
    assert p.returncode == 1
    finding = json.loads(p.stdout)["findings"][0]
    assert finding["line"] == 6, finding


# Regression (found by adversarial testing, fixed in the working tree meanwhile): the too-large hint says
#   'raise max_bytes' but the configuration key is max_manifest_bytes
def test_too_large_hint_names_the_real_key(sandbox, ctl_proc, tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  annotations:\n    a: \"" + "x" * 1100000
                 + "\"\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n")
    p = ctl_proc("validate", str(f), "--json")
    assert p.returncode == 1
    finding = json.loads(p.stdout)["findings"][0]
    assert finding["code"] == "too-large"
    assert "max_manifest_bytes" in (finding["hint"] or "")
