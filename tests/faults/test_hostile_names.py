"""File names that would forge output: newlines and control characters, and names like ``--help``.

A fault seen before: a newline in a manifest's file name was printed raw by ``status`` and
``validate DIR`` (a forged ``staticpodd: … all good`` line) and landed raw in the journal
MESSAGE; a component named ``--help`` got the hint ``staticpodctl unpark --help``. Now every
name with a control character is shown escaped (``\\n``, ``\\t``, ``\\xNN``) in human text and in
the journal's MESSAGE (the structured FILE_NAME/COMPONENT fields keep the raw name), and hints
quote names as shell words (``staticpodctl unpark -- --help``, ``$'a\\nb'``).

Real staticpodctl processes and a real journald (entries read back with journalctl).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from faultlib import run_ctl, run_ctl_root_first
from spd_testlib import journal_entries, small_pod

EVIL = "evil\nstaticpodd: all good"
MDIR = "etc/kubernetes/manifests"


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / MDIR).mkdir(parents=True)
    (root / MDIR / "web.yaml").write_text(small_pod("web"))
    (root / MDIR / f"{EVIL}.yaml").write_text(small_pod("evil"))
    (root / MDIR / "tab\there\x1b[2J.yaml").write_text(small_pod("tab"))
    return root


def _forged(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("staticpodd: all good")]


def test_status_and_validate_show_a_newline_in_a_name_escaped(tmp_path: Path) -> None:
    root = _root(tmp_path)
    st = run_ctl(root, "status")
    assert st.returncode == 0, st.stderr
    assert not _forged(st.stdout), st.stdout
    assert "evil\\nstaticpodd: all good" in st.stdout
    assert "tab\\there\\x1b[2J" in st.stdout and "\x1b" not in st.stdout
    val = run_ctl(root, "validate", str(root / MDIR))
    assert not _forged(val.stdout + val.stderr), val.stdout
    assert "evil\\nstaticpodd: all good.yaml" in val.stdout
    # JSON keeps the raw name: it is data, not a line on a screen
    raw = json.loads(run_ctl(root, "status", "--json").stdout)
    assert f"{EVIL}.yaml" in [c["file_name"] for c in raw["components"]]


def test_history_park_and_errors_escape_the_name_and_hints_quote_it(tmp_path: Path) -> None:
    root = _root(tmp_path)
    park = run_ctl(root, "park", EVIL)
    assert park.returncode == 0, park.stderr
    assert not _forged(park.stdout + park.stderr), park.stdout
    assert "staticpodctl unpark $'evil\\nstaticpodd: all good'" in park.stdout
    hist = run_ctl(root, "history", EVIL)
    assert hist.returncode == 0 and not _forged(hist.stdout), hist.stdout
    again = run_ctl(root, "park", EVIL)
    assert again.returncode == 4 and not _forged(again.stderr), again.stderr
    assert "staticpodctl unpark $'evil\\nstaticpodd: all good'" in again.stderr
    # the hint can be pasted into bash as it is shown
    hint = next(ln for ln in again.stderr.splitlines() if "hint:" in ln).split("bring it back with: ")[1]
    argv = subprocess.run(["bash", "-c", f"printf '%s\\0' {hint.removeprefix('staticpodctl unpark ')}"],
                          capture_output=True, text=True).stdout.split("\0")[:-1]
    assert argv == [EVIL]


def test_a_component_named_like_an_option_gets_a_hint_with_double_dash(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / MDIR).mkdir(parents=True)
    (root / MDIR / "--help.yaml").write_text(small_pod("help"))
    park = run_ctl_root_first(root, "park", "--", "--help")
    assert park.returncode == 0, park.stderr
    assert "staticpodctl unpark -- --help" in park.stdout
    again = run_ctl_root_first(root, "park", "--", "--help")
    assert "staticpodctl unpark -- --help" in again.stderr
    back = run_ctl_root_first(root, "unpark", "--", "--help")
    assert back.returncode == 0, back.stderr


def test_the_journal_message_is_one_line_and_the_field_keeps_the_raw_name(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert run_ctl(root, "park", EVIL).returncode == 0
    entries = journal_entries(root, want=lambda es: any(e.get("STATICPODD_EVENT") == "PARKED" for e in es))
    parked = [e for e in entries if e.get("STATICPODD_EVENT") == "PARKED"]
    assert parked, entries
    e = parked[0]
    assert "\n" not in e["MESSAGE"] and "evil\\nstaticpodd: all good" in e["MESSAGE"]
    assert e["FILE_NAME"] == f"{EVIL}.yaml"
    assert all("\n" not in x.get("MESSAGE", "") for x in entries if isinstance(x.get("MESSAGE"), str))
