"""apply refuses both levels (exit 1, nothing changed) but says which one refused: the kubelet, or
only staticpodd's own rules (the two levels, not one). Real files, real SQLite, real journald."""

from __future__ import annotations

from spd_testlib import journal_entries, small_pod


def test_apply_says_when_only_staticpodd_refuses_and_when_the_kubelet_does(sandbox, ctl_proc, tmp_path) -> None:
    dup = tmp_path / "web.yaml"
    text = small_pod("web")
    dup.write_text(text.replace("  name: web\n", "  name: web\n  name: web\n", 1))
    assert dup.read_text() != text
    r = ctl_proc("apply", str(dup))
    assert r.returncode == 1
    assert "the kubelet would run this file, but staticpodd refuses it by its own rules" in r.stderr, r.stderr
    assert "(staticpodd's own rule: the kubelet would run it)" in r.stderr
    tab = tmp_path / "api.yaml"
    tab.write_text(text.replace("  name: web\n", "\tname: web\n", 1))
    r = ctl_proc("apply", str(tab))
    assert r.returncode == 1 and "the kubelet would refuse this file" in r.stderr, r.stderr

    def refused(es):
        return [e for e in es if e.get("STATICPODD_EVENT") == "REFUSED_INVALID"]

    entries = refused(journal_entries(sandbox.root, want=lambda es: len(refused(es)) >= 2))
    assert "by staticpodd's own rules (the kubelet would run it)" in entries[0]["MESSAGE"], entries[0]["MESSAGE"]
    assert "staticpodd's own rules" not in entries[1]["MESSAGE"], entries[1]["MESSAGE"]
