"""The journald catalog has an entry for every MESSAGE_ID staticpodd emits, and journalctl takes it.

MESSAGE_IDs come from two places: the Event enum (staticpodd/journal.py, the single source) and,
so that nothing escapes, any other 32-hex-digit literal in the staticpodd/ sources. Real tools:
`journalctl --update-catalog` / `--list-catalog` / `--dump-catalog` against a temporary --root.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from systemd_files import CATALOG, REPO

from staticpodd.journal import Event

HEX32 = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32}(?![0-9A-Za-z])")
REQUIRED_HEADERS = ("Subject", "Defined-By", "Support", "Documentation")
SHIPPED_MAN_PAGES = {"man:staticpodctl(8)", "man:staticpodd(8)", "man:staticpodd.yaml(5)"}


def parse_catalog(text: str) -> dict[str, tuple[dict[str, str], str]]:
    """{message_id: ({header: value}, body)}; raises AssertionError on a repeated id."""
    entries: dict[str, tuple[dict[str, str], str]] = {}
    chunks = re.split(r"^-- ([0-9a-fA-F]{32})(?:@\S+)?\s*$", text, flags=re.M)
    for mid, chunk in zip(chunks[1::2], chunks[2::2], strict=True):
        lines = [ln for ln in chunk.split("\n") if not ln.startswith("#")]
        while lines and lines[0] == "":
            lines.pop(0)
        headers: dict[str, str] = {}
        while lines and lines[0]:
            key, _, value = lines.pop(0).partition(": ")
            headers[key] = value
        assert mid.lower() not in entries, f"MESSAGE_ID {mid} has two catalog entries"
        entries[mid.lower()] = (headers, "\n".join(lines).strip())
    return entries


def ids_in_sources() -> dict[str, str]:
    """Every 32-hex literal in staticpodd/**/*.py -> where it was found (file:line)."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "staticpodd").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in HEX32.finditer(line):
                found.setdefault(m.group(0).lower(), f"{path.relative_to(REPO)}:{n}")
    return found


@pytest.fixture(scope="module")
def catalog() -> dict[str, tuple[dict[str, str], str]]:
    return parse_catalog(CATALOG.read_text(encoding="utf-8"))


def test_every_event_has_an_entry(catalog) -> None:
    missing = [e.name for e in Event if e.message_id not in catalog]
    assert not missing, f"no catalog entry for: {missing}"


def test_no_other_message_id_escapes_the_catalog(catalog) -> None:
    found = ids_in_sources()
    assert {e.message_id for e in Event} <= set(found), "the scan must see the Event enum itself"
    missing = {mid: where for mid, where in found.items() if mid not in catalog}
    assert not missing, f"32-hex literals in staticpodd/ without a catalog entry: {missing}"


def test_every_entry_belongs_to_an_event(catalog) -> None:
    orphans = set(catalog) - {e.message_id for e in Event}
    assert not orphans, f"catalog entries for no Event: {orphans}"


def test_entries_say_what_happened_what_the_kubelet_does_and_what_to_do(catalog) -> None:
    for event in Event:
        headers, body = catalog[event.message_id]
        for key in REQUIRED_HEADERS:
            assert headers.get(key), f"{event.name}: no {key}:"
        assert headers["Defined-By"] == "staticpodd"
        assert set(headers["Documentation"].split()) <= SHIPPED_MAN_PAGES, event.name
        paragraphs = [p for p in body.split("\n\n") if p.strip()]
        assert len(paragraphs) >= 3, f"{event.name}: what happened / the kubelet / what to do"
        assert "kubelet" in body.lower(), f"{event.name}: says nothing about the kubelet"
        # Fields differ per call site and a missing @FIELD@ prints its bare name: none are used.
        assert not re.search(r"@[A-Z0-9_]+@", body + headers["Subject"]), event.name


def test_commands_in_the_catalog_exist(catalog) -> None:
    """Every quoted "staticpodctl VERB --option" is a verb and option of the real parser."""
    cli = pytest.importorskip("staticpodd.cli", reason="staticpodd/cli.py not there yet")
    verbs = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = " ".join(body for _, body in catalog.values())
    commands = re.findall(r'"staticpodctl\s+([a-z-]+)((?:\s+--[a-z-]+)*)', text)
    assert commands
    for verb, opts in commands:
        assert verb in verbs, f"staticpodctl {verb}: no such verb"
        known = {o for a in verbs[verb]._actions for o in a.option_strings}
        for opt in opts.split():
            assert opt in known, f"staticpodctl {verb} {opt}: no such option"


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl not installed")
def test_journalctl_compiles_and_lists_every_entry(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "usr/lib/systemd/catalog").mkdir(parents=True)
    shutil.copy2(CATALOG, root / "usr/lib/systemd/catalog/staticpodd.catalog")
    r = subprocess.run(["journalctl", f"--root={root}", "--update-catalog"], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    assert (root / "var/lib/systemd/catalog/database").is_file()
    listed = subprocess.run(
        ["journalctl", f"--root={root}", "--list-catalog"], capture_output=True, text=True, check=True
    ).stdout
    for event in Event:
        assert re.search(rf"^{event.message_id} staticpodd: \S", listed, re.M), event.name
    dump = subprocess.run(
        ["journalctl", f"--root={root}", "--dump-catalog", Event.INVALID_LIVE.message_id],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "Subject: Live manifest is invalid: the kubelet will kill the pod" in dump


@pytest.mark.skipif(shutil.which("journalctl") is None, reason="journalctl not installed")
def test_journalctl_rejects_a_malformed_catalog(tmp_path: Path) -> None:
    """The check above can fail: a body before any id is refused."""
    root = tmp_path / "root"
    (root / "usr/lib/systemd/catalog").mkdir(parents=True)
    (root / "usr/lib/systemd/catalog/bad.catalog").write_text("Subject: x\n\nbody\n")
    r = subprocess.run(["journalctl", f"--root={root}", "--update-catalog"], capture_output=True, text=True)
    assert r.returncode != 0
