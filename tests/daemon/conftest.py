"""Fixtures for tests/daemon: a notification socket and real staticpodd subprocesses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from daemon_harness import Daemon, NotifySocket


@pytest.fixture
def notify_socket():
    s = NotifySocket()
    yield s
    s.close()


@pytest.fixture
def run_daemon(notify_socket):
    """Start staticpodd on a root; stops every daemon started when the test ends."""
    started: list[Daemon] = []

    def start(root: Path, **kw: Any) -> Daemon:
        d = Daemon(root, notify_socket, **kw)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.stop()
