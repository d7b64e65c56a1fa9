"""Every error the daemon meets is a journal entry with a MESSAGE_ID and priority <= warning, and
the first file adopted on an empty store gets its entry too.

Real staticpodd subprocesses on sandbox roots (tests/daemon/daemon_harness.py), real journald
read back with journalctl (entries filtered by STATICPODD_ROOT).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_harness import Daemon, NotifySocket, make_root, wait_journal, wait_until

from staticpodd.journal import Event

M = "etc/kubernetes/manifests"


@pytest.fixture
def notify() -> Iterator[NotifySocket]:
    s = NotifySocket()
    yield s
    s.close()


def _is_error_entry(e: dict, code: str) -> bool:
    return e.get("MESSAGE_ID") == Event.DAEMON_ERROR.message_id and e.get("ERROR") == code


def test_a_lock_held_at_start_is_a_journal_warning(tmp_path: Path, notify: NotifySocket) -> None:
    root = make_root(tmp_path)
    lock = root / "run/staticpodd/lock"
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    d = Daemon(root, notify, watchdog_usec=1_000_000)
    try:
        e = wait_journal(root, "DAEMON_ERROR", lambda e: _is_error_entry(e, "lock-timeout"))
        assert int(e["PRIORITY"]) <= 4 and "waiting for the lock" in e["MESSAGE"]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        try:
            d.wait_ready()
        finally:
            d.stop()


def test_a_metrics_write_failure_is_a_journal_warning_not_only_stderr(tmp_path: Path, notify: NotifySocket) -> None:
    root = make_root(tmp_path, "metrics:\n  enabled: true\n  textfile_dir: /var/lib/prometheus/node-exporter\n")
    d = Daemon(root, notify)  # the textfile directory does not exist
    try:
        d.wait_ready()
        e = wait_journal(root, "DAEMON_ERROR", lambda e: _is_error_entry(e, "metrics-write-failed"))
        assert int(e["PRIORITY"]) <= 4 and e["PATH"].endswith("/var/lib/prometheus/node-exporter")
        hb = wait_until(lambda: (h := d.heartbeat()) and h.get("problems") and h)
        assert [p["code"] for p in hb["problems"]] == ["metrics-write-failed"]
    finally:
        d.stop()


def test_the_first_file_adopted_on_an_empty_store_has_its_entry(tmp_path: Path, notify: NotifySocket) -> None:
    root = make_root(tmp_path)
    m = root / M
    saved = tmp_path / "saved"
    shutil.move(str(m), saved)
    m.mkdir()
    d = Daemon(root, notify)
    try:
        d.wait_ready()
        shutil.copy(saved / "etcd.yaml", m / "etcd.yaml")  # the first file ever: adopted
        e = wait_journal(root, "EXTERNAL_CHANGE", lambda e: e.get("FILE_NAME") == "etcd.yaml")
        assert e["CHANGE"] == "adopted" and e["VERSION"] == "1" and int(e["PRIORITY"]) <= 5
        shutil.copy(saved / "kube-scheduler.yaml", m / "kube-scheduler.yaml")  # the second: created
        e = wait_journal(root, "EXTERNAL_CHANGE", lambda e: e.get("FILE_NAME") == "kube-scheduler.yaml")
        assert e["CHANGE"] == "created"
    finally:
        d.stop()
