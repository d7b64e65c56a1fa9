"""The daemon never crash-loops in silence: a bug at start-up or later is a DAEMON_ERROR journal
entry (ERROR=internal-error, TRACEBACK=...) and a one-line message, and an input such as a
5,000-digit integer in a stray is no bug at all (the daemon starts and serves)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from spd_testlib import REPO, journal_entries

DAEMON_ERROR = "6d2dc6cec7b048f7b7b793c3a4e96386"
DAEMON_STARTED = "56784f2f85df4587bb35596e079a41e4"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("STATICPODD_TEST_CRASHPOINT", None)
    env.pop("STATICPODD_NO_JOURNAL", None)
    return env


def test_a_5000_digit_stray_does_not_stop_the_daemon(kubeadm):
    kubeadm.write("notes.yaml.bak", b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: notes\nx: " + b"9" * 5000 + b"\n")
    proc = subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(kubeadm.root)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        entries = journal_entries(kubeadm.root, want=lambda es: any(
            e.get("MESSAGE_ID") in (DAEMON_STARTED, DAEMON_ERROR) for e in es) or proc.poll() is not None,
            timeout=30)
        assert proc.poll() is None, f"the daemon exited {proc.returncode}: {proc.stderr.read()[-2000:]}"
        assert any(e.get("MESSAGE_ID") == DAEMON_STARTED for e in entries)
        assert not [e for e in entries if e.get("MESSAGE_ID") == DAEMON_ERROR]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_bug_at_start_up_is_a_daemon_error_entry_not_a_bare_traceback(kubeadm):
    # a real daemon process whose first reconcile hits a bug (an exception no handler expects)
    code = (
        "import sys\n"
        "from staticpodd.daemon import lifecycle\n"
        "def broken(self):\n"
        "    raise RuntimeError('injected bug in the first reconcile')\n"
        "lifecycle.Daemon._first_reconcile = broken\n"
        "from staticpodd.daemon.command import main\n"
        "sys.exit(main(['--root', sys.argv[1]]))\n"
    )
    started = time.time()
    proc = subprocess.run([sys.executable, "-c", code, str(kubeadm.root)], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "internal error: RuntimeError: injected bug in the first reconcile" in proc.stderr
    entries = journal_entries(kubeadm.root, want=lambda es: any(e.get("MESSAGE_ID") == DAEMON_ERROR for e in es))
    errors = [e for e in entries if e.get("MESSAGE_ID") == DAEMON_ERROR]
    assert errors, "no DAEMON_ERROR entry in the journal"
    assert errors[0]["ERROR"] == "internal-error"
    assert "cannot start" in errors[0]["MESSAGE"]
    assert "injected bug" in errors[0]["TRACEBACK"] and "_first_reconcile" not in Path(__file__).name
    assert float(errors[0]["__REALTIME_TIMESTAMP"]) / 1e6 >= started - 5


def test_a_bug_in_a_verb_is_one_clear_line_and_a_journal_entry(kubeadm):
    code = (
        "import sys\n"
        "from staticpodd.commands import status\n"
        "def broken(args, out):\n"
        "    raise KeyError('injected bug in status')\n"
        "status.cmd_status = broken\n"
        "from staticpodd import cli\n"
        "sys.exit(cli.main(['status', '--root', sys.argv[1]]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(kubeadm.root)], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "staticpodctl: internal error: KeyError: 'injected bug in status'" in proc.stderr
    entries = journal_entries(kubeadm.root, want=lambda es: any(e.get("MESSAGE_ID") == DAEMON_ERROR for e in es))
    errors = [e for e in entries if e.get("MESSAGE_ID") == DAEMON_ERROR]
    assert errors and errors[0]["ERROR"] == "internal-error"
    assert errors[0]["SYSLOG_IDENTIFIER"] == "staticpodctl"
    assert "injected bug in status" in errors[0]["TRACEBACK"]
