"""The daemon's publisher of the cluster view (staticpodd.daemon.publishing), a real staticpodd
process against the stand-in API server (tests/fake_apiserver.py; the real one in
tests/controlplane/test_cp_cluster_view.py): a verb's Events go out through the daemon at once;
the daemon's own deadline unpark is an Event; what waited while the API server was down goes out,
in order, within seconds of it answering; the heartbeat says how publishing goes."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from daemon_harness import make_root, staticpodctl, wait_journal, wait_until
from fake_apiserver import FakeApiServer, SilentApiServer


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    yield server
    server.stop()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short root: ``<root>/run/staticpodd/cluster.sock`` must fit AF_UNIX's 108 bytes."""
    with tempfile.TemporaryDirectory(prefix="spd-", dir="/tmp") as d:
        yield Path(d)


def _root(tmp: Path, api: FakeApiServer) -> Path:
    # a budget a loaded machine does not run out of (the default 2 s is per API call)
    root = make_root(tmp, config="cluster:\n  publish: true\n  timeout: 30\n")
    api.kubeconfig(root / "etc/kubernetes/kubelet.conf")
    return root


def test_a_verb_publishes_through_the_daemon_and_the_daemon_publishes_its_own_deadline_unpark(
        short_tmp: Path, api: FakeApiServer, run_daemon) -> None:
    root = _root(short_tmp, api)
    d = run_daemon(root)
    d.wait_ready()
    assert (root / "run/staticpodd/cluster.sock").exists()
    r = staticpodctl(root, "park", "kube-scheduler", "--for", "2s", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["cluster"]["state"] == "published", r.stdout + r.stderr
    assert api.annotations()["staticpodd.io/parked"] == "kube-scheduler"
    wait_until(lambda: api.reasons()[-2:] == ["ParkExpired", "ComponentUnparked"], 20, what="the deadline's Events")
    wait_until(lambda: "staticpodd.io/parked" not in api.annotations(), 5, what="the annotation to go")
    hb = d.heartbeat()["cluster"]
    assert hb["enabled"] and hb["node"] == "node-1" and hb["error"] is None and hb["waiting"] == 0
    assert "cluster view: publishing to Node node-1\n" in staticpodctl(root, "status").stdout


def test_events_queued_while_the_api_server_is_down_go_out_in_order_when_it_answers(
        short_tmp: Path, api: FakeApiServer, run_daemon) -> None:
    root = _root(short_tmp, api)
    d = run_daemon(root)
    d.wait_ready()
    api.down = True
    t0 = time.monotonic()
    r = staticpodctl(root, "park", "kube-scheduler", "--reason", "first", "--json")
    took = time.monotonic() - t0
    assert json.loads(r.stdout)["cluster"]["state"] == "queued"
    assert took < 2.0, f"the verb waited {took:.1f} s for an API server that answered 503 at once"
    staticpodctl(root, "unpark", "kube-scheduler", "--reason", "second")
    wait_journal(root, "CLUSTER_PUBLISH_FAILED")
    assert api.events == []
    wait_until(lambda: "NOT PUBLISHING: " in staticpodctl(root, "status").stdout, 30, what="status to say so")
    api.down = False
    wait_until(lambda: len(api.events) == 2, 10, what="the queued Events within seconds of the API server answering")
    assert [(e["reason"], "first" in e["message"]) for e in api.events] == [("ComponentParked", True),
                                                                           ("ComponentUnparked", False)]
    wait_journal(root, "CLUSTER_PUBLISHED")
    wait_until(lambda: (d.heartbeat().get("cluster") or {}).get("waiting") == 0, 30, what="the heartbeat")


def test_a_quarantined_stray_and_a_broken_park_are_events_on_the_node(short_tmp: Path, api: FakeApiServer,
                                                                     run_daemon) -> None:
    root = make_root(short_tmp, config="debounce: 0.2\non_stray: quarantine\ncluster:\n  publish: true\n")
    api.kubeconfig(root / "etc/kubernetes/kubelet.conf")
    mdir = root / "etc/kubernetes/manifests"
    d = run_daemon(root)
    d.wait_ready()
    (mdir / "kube-apiserver.yaml.bak").write_bytes((mdir / "kube-apiserver.yaml").read_bytes())
    wait_until(lambda: "StrayQuarantined" in api.reasons(), 20, what="StrayQuarantined")
    ev = next(e for e in api.events if e["reason"] == "StrayQuarantined")
    assert ev["type"] == "Warning" and "kube-apiserver.yaml.bak" in ev["message"]
    assert staticpodctl(root, "park", "kube-scheduler").returncode == 0
    (mdir / "kube-scheduler.yaml").write_bytes((mdir / ".staticpodd/parked/kube-scheduler.yaml").read_bytes())
    wait_until(lambda: "ParkBroken" in api.reasons(), 20, what="ParkBroken")
    wait_until(lambda: api.annotations().get("staticpodd.io/parked") == "kube-scheduler(broken)", 10,
               what="the annotation to say broken")


def test_a_reload_does_not_wait_for_a_flush_stuck_on_a_silent_api_server_and_the_old_one_ends(
        short_tmp: Path, api: FakeApiServer, run_daemon, notify_socket) -> None:
    silent = SilentApiServer().start()
    try:
        root = make_root(short_tmp, config="cluster:\n  publish: true\n  kubeconfig: /etc/kubernetes/silent.conf\n"
                                           "  timeout: 4\n")
        silent.kubeconfig(root / "etc/kubernetes/silent.conf")
        api.kubeconfig(root / "etc/kubernetes/kubelet.conf")
        d = run_daemon(root, watchdog_usec=600_000)
        d.wait_ready()
        wait_until(lambda: silent.accepted >= 1, 10, what="the first flush to wait on the silent API server")
        # the operator points it at an API server that answers, while that flush still waits
        (root / "etc/staticpodd/staticpodd.yaml").write_text("cluster:\n  publish: true\n  timeout: 4\n")
        mark, t0 = len(notify_socket.messages), time.monotonic()
        os.kill(d.proc.pid, signal.SIGHUP)
        notify_socket.wait_for(lambda m: "READY=1" in m.split("\n"), after=mark, timeout=10)
        took = time.monotonic() - t0
        assert took < 2.0, f"the reload waited {took:.1f} s for a flush stuck on the API server"
        # the stuck flush holds the outbox until it times out; the new publisher goes on after it
        assert staticpodctl(root, "park", "kube-scheduler").returncode == 0
        wait_until(lambda: api.reasons() == ["ComponentParked"], 10, what="the park's Event through the new publisher")
        wait_until(lambda: time.monotonic() - t0 > 4.5, 10, what="the stuck flush to time out")
        asked = silent.accepted
        r = staticpodctl(root, "unpark", "kube-scheduler", "--json")
        assert json.loads(r.stdout)["cluster"]["state"] == "published", r.stdout + r.stderr
        hb = d.heartbeat()["cluster"]
        assert hb["error"] is None and hb["node"] == "node-1", hb
        assert silent.accepted == asked, "the old publisher went on after the reload"
        assert "Traceback" not in d.stderr
    finally:
        silent.stop()


def test_an_event_the_api_server_refuses_for_good_is_said_in_the_journal_and_by_the_verb(
        short_tmp: Path, api: FakeApiServer, run_daemon) -> None:
    root = _root(short_tmp, api)
    d = run_daemon(root)
    d.wait_ready()
    api.invalid = {"create-event"}
    r = staticpodctl(root, "park", "kube-scheduler", "--reason", "drill", "--json")
    rep = json.loads(r.stdout)["cluster"]
    assert r.returncode == 0 and rep["state"] == "failed" and "Event is invalid" in rep["error"], rep
    entry = wait_journal(root, "CLUSTER_PUBLISH_FAILED", lambda e: "refused Event ComponentParked" in e["MESSAGE"])
    assert entry["PRIORITY"] == "4" and "dropped" in entry["MESSAGE"]


def test_a_row_queued_by_a_verb_killed_before_it_woke_the_daemon_goes_out_within_seconds(
        short_tmp: Path, api: FakeApiServer, run_daemon) -> None:
    from staticpodd.cluster.outbox import Outbox

    root = _root(short_tmp, api)
    d = run_daemon(root)
    d.wait_ready()
    wait_until(lambda: (d.heartbeat().get("cluster") or {}).get("waiting") == 0, 10, what="the first flush")
    # what `staticpodctl park` leaves when SIGKILLed between queuing its row and poking the daemon
    with Outbox(root / "var/lib/staticpodd") as box:
        box.put({"reason": "ComponentParked", "type": "Warning", "message": "orphan", "at": "2026-12-04T06:00:00Z"})
    # LOOK (5 s) and a flush; 30 s leaves a loaded machine room and is still far from RESYNC (300 s)
    wait_until(lambda: [e["message"] for e in api.events] == ["orphan"], 30,
               what="the row without a wake-up (the next resync is minutes away)")
