"""The cluster view on a sandbox node, against a stand-in API server (tests/fake_apiserver.py; the
real one is met in tests/controlplane/test_cp_cluster_view.py). No daemon runs here, so each verb
publishes what it queued itself; the daemon's publisher is tested in tests/daemon."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_apiserver import FakeApiServer, SilentApiServer

from staticpodd.cluster.outbox import Outbox, outbox_path
from staticpodd.cluster.view import desired_annotations, entry_for, node_view

SCHED = "kube-scheduler.yaml"


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer(nodes=("node-1", "node-2")).start()
    yield server
    server.stop()


def _publish(kubeadm, api: FakeApiServer, extra: str = "") -> None:
    api.kubeconfig(kubeadm.root / "etc/kubernetes/kubelet.conf")
    cfg = kubeadm.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    # a budget a loaded machine does not run out of (the default 2 s did, at load 5 on 2 cores);
    # the tests of the budget itself set their own
    budget = "" if "timeout:" in extra else "  timeout: 30\n"
    cfg.write_text("cluster:\n  publish: true\n" + budget + extra)


def _queued(kubeadm) -> list[dict]:
    with Outbox(kubeadm.root / "var/lib/staticpodd") as box:
        return [e for _s, e in box.pending()]


def test_a_park_is_on_the_node_as_annotations_and_an_event_and_the_verb_says_published(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    r = ctl("park", "kube-scheduler", "--reason", "drill", "--json")
    assert r.rc == 0 and r.json()["cluster"] == {"state": "published", "node": "node-1", "events": 1, "error": None}
    ann = api.annotations("node-1")
    assert ann["staticpodd.io/parked"] == "kube-scheduler"
    detail = json.loads(ann["staticpodd.io/parked-detail"])
    assert detail[0]["component"] == "kube-scheduler" and detail[0]["reason"] == "drill" and not detail[0]["broken"]
    ev = api.events[0]
    assert ev["reason"] == "ComponentParked" and ev["type"] == "Warning" and "drill" in ev["message"]
    assert ev["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-1",
                                    "uid": api.nodes["node-1"]["metadata"]["uid"]}
    assert ev["source"] == {"component": "staticpodd", "host": "node-1"}
    text = ctl("unpark", "kube-scheduler")
    assert text.rc == 0 and "cluster: published on Node node-1 (1 Event(s))" in text.out
    assert "staticpodd.io/parked" not in api.annotations("node-1")
    assert api.reasons() == ["ComponentParked", "ComponentUnparked"]
    assert _queued(kubeadm) == []


def test_an_event_message_is_one_printable_line_whatever_file_name_it_holds() -> None:
    # a stray's name comes from the directory: it may hold a newline, ESC, bytes that are not UTF-8
    name = "x.yaml\nWarning  NodeReady  all good\x1b[2J\udcff"
    entry = entry_for("STRAY_QUARANTINED", f"moved stray {name} to /q", {"actor": "root\x1b[0m"},
                      at="2026-12-04T06:00:00Z")
    assert entry is not None
    message = entry["message"]
    assert "\n" not in message and "\x1b" not in message and "x.yaml\\nWarning" in message, message
    assert message.encode("utf-8")  # no lone surrogate: valid UTF-8 for the API server and kubectl


def test_with_publishing_off_nothing_is_queued_or_asked(kubeadm, ctl, api) -> None:
    api.kubeconfig(kubeadm.root / "etc/kubernetes/kubelet.conf")
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and "cluster" not in r.json()
    assert not outbox_path(kubeadm.root / "var/lib/staticpodd").exists() and api.calls == []


def test_an_api_server_that_is_down_leaves_the_events_queued_in_order_until_it_answers(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    api.down = True
    r = ctl("park", "kube-scheduler", "--reason", "one", "--json")
    assert r.rc == 0 and r.json()["ok"]
    assert r.json()["cluster"]["state"] == "queued" and "503" in r.json()["cluster"]["error"] or \
        "down" in r.json()["cluster"]["error"]
    assert SCHED not in kubeadm.visible()  # the park itself happened
    text = ctl("unpark", "kube-scheduler", "--reason", "two")
    assert text.rc == 0 and "cluster: queued" in text.out and "in order, when the API server answers" in text.out
    assert [e["reason"] for e in _queued(kubeadm)] == ["ComponentParked", "ComponentUnparked"]
    api.down = False
    r = ctl("park", "kube-scheduler", "--reason", "three", "--json")
    assert r.json()["cluster"]["state"] == "published"
    assert api.reasons() == ["ComponentParked", "ComponentUnparked", "ComponentParked"]
    assert "one" in api.events[0]["message"] and "two" in api.events[1]["message"] and "three" in api.events[2]["message"]
    assert api.annotations()["staticpodd.io/parked"] == "kube-scheduler"


def test_the_queue_is_bounded_and_one_event_says_how_many_were_dropped(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api, "  queue_limit: 10\n")
    api.down = True
    for _ in range(6):
        assert ctl("park", "kube-scheduler").rc == 0
        assert ctl("unpark", "kube-scheduler").rc == 0
    assert len(_queued(kubeadm)) == 10
    api.down = False
    assert ctl("park", "kube-scheduler").rc == 0
    # 13 Events, 10 kept: the 3 oldest are said to be dropped, first; the rest in order
    assert api.reasons() == ["EventsDropped"] + ["ComponentUnparked", "ComponentParked"] * 5
    assert api.events[0]["message"].startswith("3 staticpodd Event(s) were dropped"), api.events[0]["message"]
    assert _queued(kubeadm) == []


@pytest.fixture
def silent() -> Iterator[SilentApiServer]:
    server = SilentApiServer().start()
    yield server
    server.stop()


def test_an_api_server_that_never_answers_holds_a_verb_for_one_cluster_timeout_at_most(kubeadm, ctl,
                                                                                      silent) -> None:
    silent.kubeconfig(kubeadm.root / "etc/kubernetes/kubelet.conf")
    cfg = kubeadm.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("cluster:\n  publish: true\n  timeout: 0.5\n")
    for verb in ("park", "unpark"):
        before, t0 = silent.accepted, time.monotonic()
        r = ctl(verb, "kube-scheduler", "--json")
        took = time.monotonic() - t0
        assert r.rc == 0 and r.json()["ok"] and r.json()["cluster"]["state"] == "queued"
        assert "cannot reach the API server: timed out" in r.json()["cluster"]["error"]
        # one call that times out, not one more for each queued Event after it
        assert silent.accepted - before == 1 and took < 1.5, (silent.accepted - before, took)
    assert [e["reason"] for e in _queued(kubeadm)] == ["ComponentParked", "ComponentUnparked"]


def test_a_get_that_times_out_is_not_asked_again_by_the_http_client(silent, tmp_path: Path) -> None:
    from staticpodd.cluster.client import Api, ClusterError

    api = Api(str(silent.kubeconfig(tmp_path / "kc")), timeout=0.3)
    with pytest.raises(ClusterError, match="list nodes: cannot reach the API server: timed out"):
        api.nodes()
    assert silent.accepted == 1  # urllib3 retried a GET 3 more times: 4 times the timeout


def test_the_events_dropped_event_is_made_once_across_a_crash_and_again_for_later_drops(kubeadm, api,
                                                                                       monkeypatch) -> None:
    from staticpodd.cluster.hook import make_publisher
    from staticpodd.config import Config
    from staticpodd.layout import Layout

    _publish(kubeadm, api)
    state = kubeadm.root / "var/lib/staticpodd"
    pub = make_publisher(Layout.build(kubeadm.root), Config.from_dict({"cluster": {"publish": True,
                                                                                  "queue_limit": 10}}))
    entry = {"reason": "ComponentParked", "type": "Warning", "message": "m", "at": "2026-12-04T06:00:00Z"}
    with Outbox(state, limit=10) as box:
        for _ in range(13):
            box.put(entry)
    # the process dies after the API server took the EventsDropped Event, before it was counted off
    def die(self: Outbox, *n: int) -> None:
        raise SystemExit("killed")

    monkeypatch.setattr(Outbox, "take_dropped", die)
    with pytest.raises(SystemExit):
        pub.flush()
    monkeypatch.undo()
    time.sleep(1.1)  # the retry comes in another second
    assert pub.flush()["error"] is None
    assert api.reasons() == ["EventsDropped"] + ["ComponentParked"] * 10
    # more drops, published within the same second as the first notice: a second notice, not a 409
    with Outbox(state, limit=10) as box:
        for _ in range(12):
            box.put(entry)
    assert pub.flush()["error"] is None
    assert api.reasons() == ["EventsDropped"] + ["ComponentParked"] * 10 + ["EventsDropped"] + ["ComponentParked"] * 10
    assert api.events[0]["message"].startswith("3 ") and api.events[11]["message"].startswith("2 ")


def test_a_verb_that_sees_its_rows_attempted_reads_that_flushs_error_not_the_one_before(kubeadm, api,
                                                                                      monkeypatch) -> None:
    # A verb beside the daemon waits until ``attempted_through`` covers its rows, then reads
    # ``error``: the flush must write its error first (CI once saw "queued" with no reason).
    from staticpodd.cluster.hook import make_publisher
    from staticpodd.config import Config
    from staticpodd.layout import Layout

    _publish(kubeadm, api)
    state = kubeadm.root / "var/lib/staticpodd"
    pub = make_publisher(Layout.build(kubeadm.root), Config.from_dict({"cluster": {"publish": True}}))
    entry = {"reason": "ComponentParked", "type": "Warning", "message": "m", "at": "2026-12-04T06:00:00Z"}
    with Outbox(state) as box:
        box.put(entry)
    assert pub.flush()["error"] is None  # the error before: none
    with Outbox(state) as box:
        mine = box.put(entry)
    api.down = True
    seen: list[str | None] = []
    real_set = Outbox.set

    def watching(self: Outbox, key: str, value: str | None) -> None:
        real_set(self, key, value)
        if key == "attempted_through" and int(value or 0) >= mine:
            with Outbox(state) as reader:  # what the waiting verb reads at this moment
                seen.append(reader.get("error"))

    monkeypatch.setattr(Outbox, "set", watching)
    assert pub.flush()["error"] is not None
    assert seen and seen[0] is not None, seen


def test_a_change_with_no_event_is_published_only_once_a_flush_after_it_has_run(kubeadm, api, monkeypatch) -> None:
    # An edit of a parked copy (PARKED_COPY_UPDATED) changes the annotations and queues no Event.
    # Beside a daemon, the verb said "published" at once, before any flush had read the change.
    import threading

    from staticpodd.cluster import hook as hook_mod
    from staticpodd.config import Config
    from staticpodd.journal import INFO, Event
    from staticpodd.layout import Layout

    _publish(kubeadm, api)
    layout = Layout.build(kubeadm.root)
    cfg = Config.from_dict({"cluster": {"publish": True}})
    monkeypatch.setattr(hook_mod, "poke", lambda _layout: True)  # a daemon runs (and publishes nothing yet)
    pub = hook_mod.make_publisher(layout, cfg)
    assert pub.flush()["error"] is None  # a flush before the change: it does not count
    patches = sum(1 for method, _path in api.calls if method == "PATCH")

    hook = hook_mod.ClusterHook(lambda: layout, lambda: cfg)
    hook(Event.PARKED_COPY_UPDATED, "kube-scheduler: the parked copy changed", INFO, {"component": "kube-scheduler"})
    assert not hook.seqs
    rep = hook.report(budget=0.3)
    assert rep is not None and rep["state"] == "queued", rep  # no flush has run since the change

    threading.Timer(0.2, pub.flush, kwargs={"resync": True}).start()  # the daemon's next flush
    rep = hook.report(budget=10)
    assert rep is not None and rep["state"] == "published" and rep["error"] is None, rep
    assert sum(1 for method, _path in api.calls if method == "PATCH") > patches  # the resync patched


def test_a_long_queue_is_read_a_batch_at_a_time_and_goes_out_whole_in_order(kubeadm, api, monkeypatch) -> None:
    from staticpodd.cluster.hook import make_publisher
    from staticpodd.config import Config
    from staticpodd.layout import Layout

    _publish(kubeadm, api)
    state = kubeadm.root / "var/lib/staticpodd"
    with Outbox(state) as box:
        for i in range(250):
            box.put({"reason": "ComponentParked", "type": "Warning", "message": f"m{i}", "at": "2026-12-04T06:00:00Z"})
    read: list[int] = []
    pending = Outbox.pending

    def counting(self: Outbox, limit: int | None = None) -> list:
        rows = pending(self, limit)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(Outbox, "pending", counting)
    pub = make_publisher(Layout.build(kubeadm.root), Config.from_dict({"cluster": {"publish": True}}))
    api.down = True  # a retry while the API server is away reads one batch, not the whole queue
    assert pub.flush()["waiting"] == 250 and read == [100], read
    api.down = False
    assert pub.flush()["published"] == 250
    assert [e["message"] for e in api.events] == [f"m{i}" for i in range(250)]
    assert max(read) == 100


def test_verbs_at_once_with_no_daemon_each_see_their_event_published_in_order(kubeadm, ctl_proc, api) -> None:
    import threading

    # a budget no busy machine runs out of: "queued" here can only mean a row left to no one
    _publish(kubeadm, api, "  timeout: 60\n")
    said: list[str] = []

    def operator(component: str) -> None:
        for i in range(4):
            for verb in ("park", "unpark"):
                r = ctl_proc(verb, component, "--reason", f"{component}-{i}", "--json")
                said.append(json.loads(r.stdout)["cluster"]["state"])

    both = [threading.Thread(target=operator, args=(c,)) for c in ("kube-scheduler", "kube-controller-manager")]
    for t in both:
        t.start()
    for t in both:
        t.join()
    # a verb that found another one flushing waited for it rather than leaving its row to no one
    assert len(said) == 16 and said.count("queued") == 0, said
    assert _queued(kubeadm) == [] and len({e["metadata"]["name"] for e in api.events}) == 16
    for c in ("kube-scheduler", "kube-controller-manager"):
        assert [e["reason"] for e in api.events if f"{c}-" in e["message"]] == [
            "ComponentParked", "ComponentUnparked"] * 4
        assert [int(e["message"].split(f"{c}-")[1][0]) for e in api.events if f"{c}-" in e["message"]] == [
            i for i in range(4) for _ in (0, 1)]


def test_an_event_the_api_server_refuses_for_good_is_dropped_and_the_verb_says_not_published(
        kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    api.invalid = {"create-event"}
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["ok"] and SCHED not in kubeadm.visible()
    rep = r.json()["cluster"]
    assert rep["state"] == "failed" and "refused Event ComponentParked for good" in rep["error"], rep
    assert "Event is invalid" in rep["error"] and _queued(kubeadm) == []  # dropped: it would block the queue
    api.invalid = set()
    text = ctl("unpark", "kube-scheduler")
    assert "cluster: published" in text.out and api.reasons() == ["ComponentUnparked"]


def test_a_refused_patch_is_a_sentence_and_the_verb_stands(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    api.forbid = {"patch-node"}
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["ok"] and "Traceback" not in r.err
    assert r.json()["cluster"]["state"] == "queued"
    assert "annotate node node-1: nodes \"node-1\" is forbidden" in r.json()["cluster"]["error"]
    assert SCHED not in kubeadm.visible()


def test_an_outbox_another_user_could_have_written_is_refused_and_the_verb_stands(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    assert ctl("park", "kube-scheduler").rc == 0
    path = outbox_path(kubeadm.root / "var/lib/staticpodd")
    os.chmod(path, 0o666)
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["cluster"]["state"] == "failed"
    assert "world-writable" in r.json()["cluster"]["error"] and "cluster outbox" in r.json()["cluster"]["error"]
    assert SCHED in kubeadm.visible()


@pytest.mark.parametrize("damage", ["overwritten", "truncated"])
def test_an_outbox_sqlite_cannot_read_is_named_with_what_to_do_and_the_verb_stands(kubeadm, ctl, api,
                                                                                  damage: str) -> None:
    from staticpodd.cluster.hook import make_publisher
    from staticpodd.config import Config
    from staticpodd.layout import Layout

    _publish(kubeadm, api)
    api.down = True
    for _ in range(20):
        assert ctl("park", "kube-scheduler").rc == 0 and ctl("unpark", "kube-scheduler").rc == 0
    path = outbox_path(kubeadm.root / "var/lib/staticpodd")
    data = path.read_bytes()
    path.write_bytes(b"x" * 5000 if damage == "overwritten" else data[:len(data) // 2])
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["ok"] and SCHED not in kubeadm.visible()
    rep = r.json()["cluster"]
    # not "queued": nothing was, and nothing will publish it
    assert rep["state"] == "failed" and rep["events"] == 0, rep
    assert f"{path}: the cluster outbox cannot be read" in rep["error"] and f"mv {path} {path}.bad" in rep["error"]
    text = ctl("unpark", "kube-scheduler")
    assert text.rc == 0 and "cluster: NOT published" in text.out and "journal has it" in text.out, text.out
    res = make_publisher(Layout.build(kubeadm.root), Config.from_dict({"cluster": {"publish": True}})).flush()
    assert str(path) in res["error"] and "internal" not in res["error"], res
    os.rename(path, f"{path}.bad")  # as the hint says: a new queue starts
    api.down = False
    assert ctl("park", "kube-scheduler", "--json").json()["cluster"]["state"] == "published"
    assert path.with_name(path.name + ".bad").read_bytes()[:5000] == (b"x" * 5000 if damage == "overwritten"
                                                                       else data[:len(data) // 2])[:5000]


def test_an_api_server_message_cannot_forge_a_line_of_the_verbs_output(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    api.forbid = {"patch-node"}
    api.forbid_message = "denied\nstaticpodctl: all good\x1b[2J"
    text = ctl("park", "kube-scheduler")
    assert text.rc == 0 and "cluster: queued" in text.out, text.out
    assert not any(line.startswith("staticpodctl: all good") for line in text.out.splitlines()), text.out
    assert "\x1b" not in text.out and "denied\\nstaticpodctl" in text.out


@pytest.mark.parametrize("plant", ["-wal symlink", "-shm symlink", "-wal of another user"])
def test_an_outbox_wal_or_shm_another_user_could_have_planted_is_refused_and_nothing_is_written_through_it(
        kubeadm, ctl, api, tmp_path: Path, plant: str) -> None:
    _publish(kubeadm, api)
    assert ctl("park", "kube-scheduler").rc == 0  # the outbox exists, its WAL checkpointed away
    path = outbox_path(kubeadm.root / "var/lib/staticpodd")
    suffix, how = plant.split(" ", 1)
    side = path.with_name(path.name + suffix)
    victim = tmp_path / "precious"
    victim.write_bytes(b"precious\n")
    if how == "symlink":
        side.symlink_to(victim)
    else:
        side.write_bytes(b"")
        os.chown(side, 65534, 65534)
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["ok"] and SCHED in kubeadm.visible()
    assert r.json()["cluster"]["state"] == "failed" and str(side) in r.json()["cluster"]["error"], r.json()["cluster"]
    assert victim.read_bytes() == b"precious\n"


def test_a_kubeconfig_another_user_could_have_written_is_not_used(kubeadm, ctl, api) -> None:
    _publish(kubeadm, api)
    os.chmod(kubeadm.root / "etc/kubernetes/kubelet.conf", 0o666)
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["cluster"]["state"] == "queued" and api.calls == []
    assert "another user could have written it" in r.json()["cluster"]["error"]


def test_a_kubeconfig_in_a_directory_another_user_may_rename_in_is_not_used_nor_its_exec_run(
        kubeadm, ctl, api) -> None:
    import yaml

    _publish(kubeadm, api)
    kc = kubeadm.root / "etc/kubernetes/kubelet.conf"
    marker = kubeadm.root / "ran-as-root"
    doc = yaml.safe_load(kc.read_text())  # what a user who swapped the file would write
    doc["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/sh",
                                        "args": ["-c", f"touch {marker}; echo '{{}}'"]}}
    kc.write_text(yaml.safe_dump(doc))
    os.chmod(kc.parent, 0o775)
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc == 0 and r.json()["ok"] and r.json()["cluster"]["state"] == "queued"
    assert "directory holding the cluster kubeconfig" in r.json()["cluster"]["error"], r.json()["cluster"]
    assert not marker.exists() and api.calls == []


def test_a_kubeconfig_that_is_a_fifo_is_refused_not_waited_on(kubeadm, ctl_proc, api, tmp_path: Path) -> None:
    _publish(kubeadm, api)
    kc = kubeadm.root / "etc/kubernetes/kubelet.conf"
    kc.unlink()
    os.mkfifo(kc, 0o600)
    r = ctl_proc("park", "kube-scheduler", "--json", timeout=20)
    assert r.returncode == 0 and json.loads(r.stdout)["cluster"]["state"] == "queued"
    assert "not a regular file" in json.loads(r.stdout)["cluster"]["error"]
    fifo = tmp_path / "admin.fifo"
    os.mkfifo(fifo, 0o600)
    r = ctl_proc("status", "--cluster", "--kubeconfig", str(fifo), timeout=20)
    assert r.returncode != 0 and "not a regular file" in r.stderr and "Traceback" not in r.stderr


def test_status_cluster_lists_every_parked_component_and_reads_bad_annotations_as_problems(
        kubeadm, ctl, api, tmp_path: Path) -> None:
    _publish(kubeadm, api)
    assert ctl("park", "kube-scheduler", "--reason", "drill").rc == 0
    api.nodes["node-2"]["metadata"]["annotations"] = {"staticpodd.io/parked": "etcd",
                                                       "staticpodd.io/parked-detail": "{not json"}
    admin = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
    r = ctl("status", "--cluster", "--kubeconfig", str(admin), "--json")
    assert r.rc == 0, r.err
    body = r.json()
    assert [(p["node"], p["component"]) for p in body["parked"]] == [("node-1", "kube-scheduler"), ("node-2", "etcd")]
    assert body["problems"] == [{"node": "node-2",
                                 "problem": "annotation staticpodd.io/parked-detail is not a JSON list of objects"}]
    text = ctl("status", "--cluster", "--kubeconfig", str(admin))
    assert "node-1" in text.out and "drill" in text.out and "warning: node node-2" in text.err


HOSTILE_NODES = {
    # a newline in a component forges a line of output; ESC and CR rewrite the screen
    "forger": {"staticpodd.io/parked": "etcd\nstaticpodctl: all good",
               "staticpodd.io/pinned-detail": json.dumps([{"namespace": "default", "name": "p\x1b[2J",
                                                           "by": "a\rb", "since": "s\ny"}])},
    # nested deeper than Python's json recurses
    "deep": {"staticpodd.io/parked-detail": "[" * 100000 + "]" * 100000},
    # wrong types everywhere: lists, mappings, numbers, null
    "types": {"staticpodd.io/parked-detail": json.dumps([{"component": ["etcd"], "by": {"u": 1}, "since": 3,
                                                          "broken": "yes"}]),
              "staticpodd.io/pinned-detail": json.dumps([{"namespace": None, "name": None}]),
              "staticpodd.io/pinned": 7},
    # an item claiming to be on another node
    "liar": {"staticpodd.io/parked-detail": json.dumps([{"component": "kube-apiserver", "node": "node-1"}])},
}


def test_status_cluster_reads_a_bounded_number_of_items_from_a_node(kubeadm, ctl, api, tmp_path: Path) -> None:
    api.nodes["node-2"]["metadata"]["annotations"] = {
        "staticpodd.io/pinned": ",".join(f"ns/pod-{i}" for i in range(1000))}
    admin = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
    r = ctl("status", "--cluster", "--kubeconfig", str(admin), "--json")
    assert r.rc == 0, r.err
    assert len(r.json()["pinned"]) == 200 and sum(1 for _m, path in api.calls if "/pods/" in path) == 200
    assert r.json()["problems"] == [{"node": "node-2", "problem": "annotation staticpodd.io/pinned lists 1000 items; "
                                                                  "only the first 200 are read"}]


def test_status_cluster_asks_only_for_pods_with_names_a_pod_can_have(kubeadm, ctl, api, tmp_path: Path) -> None:
    api.nodes["node-2"]["metadata"]["annotations"] = {"staticpodd.io/pinned-detail": json.dumps(
        [{"namespace": "..", "name": ".."}, {"namespace": "default", "name": "../../x"},
         {"namespace": "default", "name": "ok-pod"}])}
    admin = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
    r = ctl("status", "--cluster", "--kubeconfig", str(admin), "--json")
    assert r.rc == 0, r.err
    asked = [path for method, path in api.calls if method == "GET" and path != "/api/v1/nodes"]
    assert asked == ["/api/v1/namespaces/default/pods/ok-pod"], asked  # not /api/v1/ through "../.."
    assert [p.get("present") for p in r.json()["pinned"]] == [None, None, False]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_status_cluster_reads_hostile_annotations_as_problems_never_as_output_lines_or_a_crash(
        kubeadm, ctl, api, tmp_path: Path, as_json: bool) -> None:
    for name, ann in HOSTILE_NODES.items():
        api.nodes[name] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": ann}}
    admin = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
    r = ctl("status", "--cluster", "--kubeconfig", str(admin), *(["--json"] if as_json else []))
    assert r.rc == 0 and "internal error" not in r.err, r.err
    if as_json:
        body = r.json()
        assert {(p["node"], p["component"]) for p in body["parked"]} == {
            ("forger", "etcd\nstaticpodctl: all good"), ("types", None), ("liar", "kube-apiserver")}
        assert {(p["node"], p["problem"]) for p in body["problems"]} == {
            ("deep", "annotation staticpodd.io/parked-detail is not a JSON list of objects"),
            ("types", "annotation staticpodd.io/parked-detail: field by is not text"),
            ("types", "annotation staticpodd.io/parked-detail: field component is not text"),
            ("types", "annotation staticpodd.io/pinned is not text")}
        return
    assert not any(line.startswith("staticpodctl: all good") for line in r.out.splitlines()), r.out
    assert "\x1b" not in r.out + r.err and "\r" not in r.out + r.err
    assert "etcd\\nstaticpodctl: all good" in r.out and "p\\x1b[2J" in r.out
    assert any(line.startswith("liar ") and "kube-apiserver" in line for line in r.out.splitlines()), r.out


def test_status_cluster_with_an_answer_nested_too_deep_is_a_clear_error(kubeadm, ctl, api, tmp_path: Path) -> None:
    admin = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
    api.raw_node_list = b'{"items": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    r = ctl("status", "--cluster", "--kubeconfig", str(admin))
    assert r.rc == 1 and "list nodes: the API server answered something that is not JSON" in r.err, r.err
    assert "internal error" not in r.err


def test_status_cluster_with_the_api_server_down_is_a_clear_error(kubeadm, ctl, api, tmp_path: Path) -> None:
    admin = api.kubeconfig(tmp_path / "admin.conf", user="kubernetes-admin")
    api.down = True
    r = ctl("status", "--cluster", "--kubeconfig", str(admin))
    assert r.rc == 1 and "list nodes" in r.err and "Traceback" not in r.err


def test_which_journal_events_become_which_node_events() -> None:
    assert entry_for("UNPARKED", "kube-scheduler: park ended", {"action": "discard", "actor": "root"},
                     at="2026-12-04T06:00:00Z")["reason"] == "ParkDiscarded"
    assert entry_for("PARK_EXPIRED", "park expired", {}, at="x")["reason"] == "ParkExpired"
    assert entry_for("EXTERNAL_CHANGE", "edited", {}, at="x") is None
    want = desired_annotations([{"component": "etcd", "actor": "root", "since": "s", "until": None, "reason": None}],
                               {"etcd"}, [])
    assert want["staticpodd.io/parked"] == "etcd(broken)" and want["staticpodd.io/pinned"] is None
    assert node_view({"metadata": {"name": "n", "annotations": {"staticpodd.io/parked": "etcd(broken)"}}})["parked"] == [
        {"component": "etcd", "broken": True, "by": None, "reason": None, "since": None, "until": None}]
    assert node_view({"metadata": None})["node"] == "?"


def test_a_resync_forgets_pinned_pods_the_api_server_no_longer_has(kubeadm, api) -> None:
    from staticpodd.cluster.hook import make_publisher
    from staticpodd.config import Config
    from staticpodd.layout import Layout
    from staticpodd.pin.local import list_local_pins, record_pin

    _publish(kubeadm, api)
    state = kubeadm.root / "var/lib/staticpodd"
    for name, uid in (("kept", "u1"), ("deleted", "u2"), ("recreated", "u3")):
        record_pin(state, {"namespace": "default", "name": name, "node": "node-1", "uid": uid, "bare": True,
                           "pinned_at": "2026-12-04T06:00:00Z", "actor": "root"})
    api.pods[("default", "kept")] = {"metadata": {"name": "kept", "uid": "u1"}}
    api.pods[("default", "recreated")] = {"metadata": {"name": "recreated", "uid": "another"}}
    pub = make_publisher(Layout.build(kubeadm.root), Config.from_dict({"cluster": {"publish": True}}))
    assert pub.flush(resync=True)["error"] is None
    assert [p["name"] for p in list_local_pins(state)] == ["kept"]
    assert api.annotations()["staticpodd.io/pinned"] == "default/kept"
