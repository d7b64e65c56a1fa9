"""Start-up cost: what a verb's process imports. Checked in a fresh interpreter by module
name, never timed: the figures are in tests/bench/bench_scale.py row 5."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

from spd_testlib import JOURNAL_SOCKET

from staticpodd.journal import Event


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_a_journal_entry_does_not_import_systemd_journal_and_keeps_its_fields() -> None:
    assert JOURNAL_SOCKET.exists()
    root = f"/tmp/startup-imports-{uuid.uuid4().hex}"
    out = _run(
        "import sys, os; os.environ.pop('STATICPODD_NO_JOURNAL', None)\n"
        "from staticpodd.journal import Journal, Event, NOTICE\n"
        f"Journal('staticpodctl', {root!r}).log(Event.PARKED, 'x: parked x.yaml', priority=NOTICE,"
        " component='x', file_name='x.yaml', version=3, reason=None)\n"
        "print(sorted(m for m in ('systemd.journal', 'logging', 'uuid', 'ctypes') if m in sys.modules))\n"
    )
    assert out.strip() == "[]"
    got = None
    for _ in range(50):
        lines = subprocess.run(["journalctl", "--no-pager", "-o", "json", f"STATICPODD_ROOT={root}"],
                               capture_output=True, text=True).stdout.splitlines()
        if lines:
            got = json.loads(lines[-1])
            break
        time.sleep(0.1)
    assert got is not None, "the entry did not reach the journal"
    assert got["MESSAGE"] == "x: parked x.yaml"
    assert got["MESSAGE_ID"] == Event.PARKED.message_id
    assert (got["PRIORITY"], got["SYSLOG_IDENTIFIER"], got["STATICPODD_EVENT"]) == ("5", "staticpodctl", "PARKED")
    assert (got["COMPONENT"], got["FILE_NAME"], got["VERSION"]) == ("x", "x.yaml", "3")
    assert "REASON" not in got
    # what systemd.journal.send adds: the frame that sent it
    assert got["CODE_FILE"].endswith("staticpodd/journal.py") and got["CODE_FUNC"] == "log"
    assert int(got["CODE_LINE"]) > 0


def test_building_a_verbs_parser_does_not_import_shutil() -> None:
    out = _run(
        "import sys\nfrom staticpodd.commands.parser import build_parser\n"
        "p = build_parser('status', only=True); p.parse_args(['status'])\n"
        "print(sorted(m for m in ('shutil', 'lzma', 'bz2') if m in sys.modules))\n"
    )
    assert out.strip() == "[]"


#: Modules the verbs below must not import: each costs a share of a bare interpreter's whole
#: start-up (bench_scale row 5 prints the figures): ``typing`` about 0.4x, ``dataclasses`` with
#: ``inspect``/``ast``/``dis``/``tokenize`` about 1.2x, ``hashlib`` (OpenSSL) about 0.3x.
HEAVY = ("typing", "dataclasses", "inspect", "ast", "tokenize", "jsonschema", "watchdog")


def _settled_node(kubeadm, tmp_path) -> None:
    """kubeadm's four manifests recorded, and a full scan since their ctimes left the racy window
    (fsfacts._RACY_NS): a node at rest, as the daemon's rescans keep it."""
    time.sleep(2.1)
    copy = tmp_path / "ks.yaml"
    copy.write_bytes((kubeadm.manifests / "kube-scheduler.yaml").read_bytes())
    out = subprocess.run([sys.executable, "-m", "staticpodd.cli", "apply", str(copy), "--as", "kube-scheduler",
                          "--root", str(kubeadm.root)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def _imports_of(root, *argv: str) -> set[str]:
    """The modules a fresh ``staticpodctl ARGV --root ROOT`` process has imported when it exits
    (a name blocked with ``sys.modules[name] = None`` is not imported)."""
    code = (
        "import sys\nfrom staticpodd.cli import main\n"
        f"rc = main({[*argv, '--root', str(root)]!r})\n"
        "sys.stdout.flush()\nprint('\\nMODULES', ' '.join(sorted(m for m, v in sys.modules.items() if v is not None)))\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.rsplit("MODULES ", 1)[1].split())


def test_status_and_history_on_a_node_at_rest_import_no_typing_dataclasses_or_openssl(kubeadm, tmp_path) -> None:
    _settled_node(kubeadm, tmp_path)
    for argv in (["status"], ["status", "--json"], ["history", "kube-scheduler"], ["history", "etcd", "--json"]):
        mods = _imports_of(kubeadm.root, *argv)
        assert sorted(m for m in (*HEAVY, "hashlib", "signal", "yaml") if m in mods) == [], argv
        # a read verb runs the query family alone: the families that change things stay unimported
        assert sorted(m for m in mods if m in WRITING_FAMILIES or m == "staticpodd.engine.gate") == [], argv


#: The engine's families that change the directory or the store (staticpodd.engine's map).
WRITING_FAMILIES = tuple(f"staticpodd.engine.{m}" for m in ("scan", "recover", "swap", "park", "full"))


def test_park_unpark_and_validate_import_no_typing_or_dataclasses(kubeadm, tmp_path) -> None:
    _settled_node(kubeadm, tmp_path)
    for argv in (["park", "kube-scheduler"], ["unpark", "kube-scheduler"],
                 ["validate", str(kubeadm.manifests / "etcd.yaml")], ["validate", str(kubeadm.manifests)]):
        mods = _imports_of(kubeadm.root, *argv)
        assert sorted(m for m in HEAVY if m in mods) == [], argv
        # hashing is CPython's own sha256: OpenSSL's libcrypto is never loaded (staticpodd.hashes)
        assert "_hashlib" not in mods and ("hashlib" in mods or argv[0] != "validate"), argv
        if argv[0] == "validate":  # the gate and its options, nothing that writes
            assert sorted(m for m in mods if m in WRITING_FAMILIES) == [], argv
