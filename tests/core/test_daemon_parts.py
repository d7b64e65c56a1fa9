"""Daemon parts built and exercised alone, without a daemon: the status reporter
(:class:`staticpodd.daemon.status.StatusReporter`, over the :class:`~staticpodd.daemon.problems.Problems`
board), the SIGHUP reloader (:class:`staticpodd.daemon.reload.Reloader`) and the watch keeper
(:class:`staticpodd.daemon.watching.WatchKeeper`).

Real: the sd_notify datagrams (a real AF_UNIX socket in the test's directory, read back), the
heartbeat file (written and read back by :func:`read_heartbeat`), the inotify watch, the layout
and the configuration. Stand-ins, said here: the engine (not needed by what is exercised), the
journal (a list the ``log`` function appends to: the entries' fields are what is checked),
and the daemon's own facts and install step (a dict, a list of calls).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from staticpodd.config import Config
from staticpodd.daemon.heartbeat import HEARTBEAT_FORMAT, read_heartbeat
from staticpodd.daemon.problems import Problems
from staticpodd.daemon.reload import Reloader
from staticpodd.daemon.status import StatusReporter
from staticpodd.daemon.watching import WatchKeeper
from staticpodd.errors import ConfigError
from staticpodd.journal import Event
from staticpodd.layout import Layout
from staticpodd.node.notify import Notifier
from staticpodd.node.watch import Hints, Watcher


class Datagrams:
    """A real notification socket bound in ``tmp``; :meth:`take` returns what arrived."""

    def __init__(self, tmp: Path) -> None:
        self.path = tmp / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.setblocking(False)

    def notifier(self) -> Notifier:
        return Notifier({"NOTIFY_SOCKET": str(self.path)}, impl="stdlib")

    def take(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.sock.recv(65536).decode())
            except BlockingIOError:
                return out


@pytest.fixture
def dgrams(tmp_path: Path):
    d = Datagrams(tmp_path)
    yield d
    d.sock.close()


FACTS = {"state": "running", "ready": True, "started_at": 100.0, "last_rescan": None, "parks": [],
         "config": {"generation": 1}, "reload": {"seq": 0}, "cluster": None, "watch": {"watching": True}}


def _reporter(tmp_path: Path, notifier: Notifier, logged: list[tuple[Any, str, dict[str, Any]]],
              problems: Problems | None = None) -> StatusReporter:
    layout = Layout.build(tmp_path / "root")

    def log(event: Any, message: str, **fields: Any) -> None:
        logged.append((event, message, fields))

    return StatusReporter(problems=problems or Problems(), notifier=notifier, root=tmp_path / "root",
                          started_at=100.0, layout=lambda: layout, config=Config.default,
                          engine=lambda: None, facts=lambda: dict(FACTS), log=log, say=lambda _text: None)


def test_the_reporter_alone_says_status_and_writes_the_heartbeat(tmp_path: Path, dgrams: Datagrams) -> None:
    logged: list[tuple[Any, str, dict[str, Any]]] = []
    problems = Problems()
    rep = _reporter(tmp_path, dgrams.notifier(), logged, problems)
    rep.publish_status()
    assert dgrams.take() == ["STATUS=0 live, 0 parked; no problems"]
    lock = {"code": "lock-timeout", "severity": "warning", "path": "/run/lock", "message": "busy"}
    bad = {"code": "invalid-live", "severity": "error", "component": "etcd", "path": "/m/etcd.yaml", "message": "x"}
    problems.set_invalid("etcd.yaml", bad)
    problems.set("lock", lock)
    problems.set_directory([{"code": "loose-permissions", "severity": "warning", "path": "/m/a.yaml", "message": "m"},
                            {"code": "fyi", "severity": "info", "path": "/m/b.yaml", "message": "not a problem"}])
    rep.publish_status()
    rep.publish_status()  # unchanged: not sent again
    assert dgrams.take() == ["STATUS=0 live, 0 parked; 3 problems: lock-timeout lock, …"]

    rep.heartbeat()
    hb = read_heartbeat(Layout.build(tmp_path / "root"))
    assert hb is not None
    # runtime problems first, then invalid live files, then the directory's errors and warnings
    assert hb["problems"] == [lock, bad, {"code": "loose-permissions", "severity": "warning", "path": "/m/a.yaml",
                                          "component": None, "message": "a.yaml: m"}]
    assert hb["summary"] == {"live": 0, "parked": 0, "missing": 0, "problems": 3}
    assert hb["status"] == "0 live, 0 parked; 3 problems: lock-timeout lock, …"
    assert hb["format"] == HEARTBEAT_FORMAT and hb["root"] == str(tmp_path / "root")
    assert {k: hb[k] for k in FACTS} == FACTS  # the daemon's facts, as given
    # the bytes are json.dumps(sort_keys=True) of what was read, as before the reporter was a part
    raw = Layout.build(tmp_path / "root").heartbeat_path.read_text()
    assert raw == json.dumps(hb, sort_keys=True) + "\n"

    problems.clear("lock")
    problems.directory_gone()
    rep.ready(rep.status_line())
    assert dgrams.take() == ["READY=1\nSTATUS=0 live, 0 parked; no problems"]
    assert logged == []


def test_a_heartbeat_that_cannot_be_written_is_journalled_once(tmp_path: Path, dgrams: Datagrams) -> None:
    logged: list[tuple[Any, str, dict[str, Any]]] = []
    rep = _reporter(tmp_path, dgrams.notifier(), logged)
    run_dir = Layout.build(tmp_path / "root").heartbeat_path.parent
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    run_dir.write_text("a file where the run directory should be")
    rep.heartbeat()
    rep.heartbeat()
    assert [(e, f["error"]) for e, _m, f in logged] == [(Event.DAEMON_ERROR, "heartbeat-write-failed")]


def test_the_reloader_alone_refuses_then_installs(tmp_path: Path, dgrams: Datagrams) -> None:
    logged: list[tuple[Any, str, dict[str, Any]]] = []
    rep = _reporter(tmp_path, dgrams.notifier(), logged)
    states: list[str] = []
    installed: list[Config] = []
    generation = [1]
    results: list[Any] = [ConfigError("bad field", path="/etc/staticpodd/config.yaml", line=3, field="debounce"),
                          (Config.default(), Layout.build(tmp_path / "root"))]

    def load() -> tuple[Config, Layout]:
        r = results.pop(0)
        if isinstance(r, Exception):
            raise r
        return r

    def install(cfg: Config, _layout: Layout) -> None:
        installed.append(cfg)
        generation[0] += 1

    def log(event: Any, message: str, **fields: Any) -> None:
        logged.append((event, message, fields))

    rl = Reloader(load=load, install=install, forget=lambda: states.append("forget"), set_state=states.append,
                  generation=lambda: generation[0], reporter=rep, notifier=dgrams.notifier(), log=log,
                  say=lambda _text: None)
    assert not rl.pending()
    rl.request()
    assert rl.pending()
    rl.reload()
    assert not rl.pending() and installed == []
    assert rl.state["seq"] == 1 and rl.state["status"] == "refused" and "bad field" in rl.state["error"]
    assert states == ["reloading", "forget", "running"]
    assert [(e, f.get("field")) for e, _m, f in logged] == [(Event.CONFIG_INVALID, "debounce")]
    assert "generation 1" in logged[0][1]
    said = dgrams.take()
    assert [m.splitlines()[0] for m in said] == ["RELOADING=1", "READY=1"]  # RELOADING=1 with MONOTONIC_USEC=
    assert said[1] == "READY=1\nSTATUS=0 live, 0 parked; no problems"

    rl.request()
    rl.reload()
    assert len(installed) == 1 and rl.state["seq"] == 2 and rl.state["status"] == "ok"
    assert logged[-1][0] == Event.CONFIG_RELOADED and logged[-1][2]["generation"] == 2
    hb = read_heartbeat(Layout.build(tmp_path / "root"))
    assert hb is not None and hb["status"] == "0 live, 0 parked; no problems"


def test_the_watch_keeper_alone_reports_a_missing_directory_then_its_return(tmp_path: Path) -> None:
    layout = Layout.build(tmp_path / "root")
    hints = Hints(0.1)
    watcher = Watcher(layout.manifest_dir, hints)
    problems = Problems()
    logged: list[tuple[Any, str, dict[str, Any]]] = []
    exits: list[int] = []

    def log(event: Any, message: str, **fields: Any) -> None:
        logged.append((event, message, fields))

    keeper = WatchKeeper(watcher=lambda: watcher, layout=lambda: layout, problems=problems, log=log,
                         say=lambda _text: None, exit=exits.append)
    try:
        assert keeper.check(initial=True) is True  # missing at start: said once, then polled
        assert (problems.get("watch") or {}).get("code") == "manifest-dir-missing"
        assert keeper.check() is False  # still missing: nothing new
        layout.manifest_dir.mkdir(parents=True)
        assert keeper.check() is True  # it appeared: watched, and a full rescan follows
        assert "watch" not in problems and "read-only" not in problems and exits == []
        assert [(e, f.get("finding") or f.get("change")) for e, _m, f in logged] == [
            (Event.DIRECTORY_PROBLEM, "manifest-dir-missing"), (Event.DIRECTORY_REWATCHED, "created")]
    finally:
        watcher.stop()
        hints.close()


def test_the_publisher_flushes_again_for_a_row_queued_while_its_flush_ran(tmp_path: Path) -> None:
    """The cluster publisher's loop (:class:`staticpodd.daemon.publishing.ClusterPublishing`) with a
    stand-in publisher whose first flush has a verb queue a row after it read the queue (and die
    before it woke the daemon): the next look at the outbox sees the row and flushes again. The
    outbox is real SQLite; no API server is asked (the stand-in says what a flush would)."""
    import threading
    import time

    from staticpodd.cluster.outbox import Outbox
    from staticpodd.daemon.publishing import ClusterPublishing, _Run

    calls: list[float] = []

    class Racing:
        state_dir = tmp_path
        node_name = "node-1"

        def flush(self, *, resync: bool = False, deadline: float | None = None) -> dict[str, Any]:
            calls.append(time.monotonic())
            if len(calls) == 1:  # the queue was read (empty); now a verb queues a row and dies
                with Outbox(tmp_path) as box:
                    box.put({"reason": "ComponentParked", "type": "Warning", "message": "m", "at": "2026"})
            return {"published": 0, "annotations": False, "waiting": 0, "error": None, "busy": False,
                    "dropped": 0, "refused": []}

    pub = ClusterPublishing(lambda *a, **kw: None, lambda line: None)
    run = _Run(None, None)  # no socket: it looks at the outbox every POLL (0.5 s)
    thread = threading.Thread(target=pub._run, args=(Racing(), run), daemon=True)
    thread.start()
    try:
        end = time.monotonic() + 5
        while len(calls) < 2 and time.monotonic() < end:
            time.sleep(0.05)
        assert len(calls) >= 2, "the row queued during the flush waits for the resync (5 min)"
    finally:
        run.stop.set()
        run.wake.set()
        thread.join(5)
