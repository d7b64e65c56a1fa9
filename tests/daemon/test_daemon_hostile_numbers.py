"""A number no Python ``int()`` may read, in a stray file or in the configuration, and a bug met
while starting: the daemon starts, or says why it cannot in the journal; never a bare traceback.

CPython refuses to convert a decimal string of more than 4,300 digits (``sys.int_info``'s
``default_max_str_digits``) with a ValueError. The kubelet's decoder has no such limit: go-yaml
keeps an out-of-range integer as a string (tests/validate/test_differential_go.py).
"""

from __future__ import annotations

import os

from daemon_harness import head_digest, make_root, wait_journal, wait_until

HUGE = b"9" * 5000


def test_a_stray_holding_a_5000_digit_integer_does_not_stop_the_daemon(tmp_path, run_daemon):
    # Found by testers: the daemon crash-looped every 5 s with no journal entry.
    root = make_root(tmp_path)
    stray = root / "etc/kubernetes/manifests/notes.yaml.bak"
    stray.write_bytes(b"notes: " + HUGE + b"\n")
    d = run_daemon(root)
    d.wait_ready()
    assert "Traceback" not in d.stderr, d.stderr[-2000:]
    assert head_digest(root, "kube-scheduler") is not None  # the first pass recorded the directory
    # an edit of a real manifest is still recorded
    f = root / "etc/kubernetes/manifests/kube-scheduler.yaml"
    f.write_bytes(f.read_bytes() + b"# edited by hand\n")
    wait_until(lambda: head_digest(root, "kube-scheduler") is not None and
               head_digest(root, "kube-scheduler") == __import__("hashlib").sha256(f.read_bytes()).hexdigest(),
               what="the hand edit recorded")
    assert d.proc.poll() is None
    assert d.stop() == 0
    assert "Traceback" not in d.stderr, d.stderr[-2000:]


def test_a_configuration_holding_a_5000_digit_integer_is_refused_with_its_line(tmp_path, run_daemon):
    root = make_root(tmp_path, config="retention:\n  keep_versions: " + HUGE.decode() + "\n")
    os.chmod(root / "etc/staticpodd/staticpodd.yaml", 0o600)
    d = run_daemon(root)
    assert d.proc.wait(30) == 78
    e = wait_journal(root, "CONFIG_INVALID")
    assert "staticpodd.yaml:2:18" in e["MESSAGE"] and "5000 digits" in e["MESSAGE"], e["MESSAGE"]
    assert "Traceback" not in d.stderr, d.stderr[-2000:]


def test_a_bug_met_while_starting_is_a_daemon_error_entry_not_a_bare_traceback(tmp_path, run_daemon, monkeypatch):
    monkeypatch.setenv("STATICPODD_TEST_FAILPOINT", "daemon:start")
    root = make_root(tmp_path)
    d = run_daemon(root)
    assert d.proc.wait(30) == 1
    e = wait_journal(root, "DAEMON_ERROR", lambda e: e.get("ERROR") == "internal-error")
    assert "start-up" in e["MESSAGE"] and "RuntimeError: test failpoint daemon:start" in e["MESSAGE"]
    assert "Traceback" in e["TRACEBACK"]
    assert "Traceback" not in d.stderr and "cannot start: internal error" in d.stderr, d.stderr
    assert d.heartbeat()["state"] == "stopped"
