"""Issue 14: the heartbeat of a node with thousands of problems is rewritten every 10 s for its
``last_loop``; :class:`HeartbeatEncoder` writes the same bytes as ``json.dumps(sort_keys=True)``
while re-encoding the problem list only when it changed."""

from __future__ import annotations

import json

from staticpodd.daemon.heartbeat import HeartbeatEncoder, read_heartbeat, write_heartbeat
from staticpodd.layout import Layout


def _problems(n: int, word: str = "loose") -> list[dict[str, object]]:
    return [{"code": f"{word}-permissions", "severity": "warning", "path": f"/m/x-{i}.yaml", "component": None,
             "message": f"x-{i}.yaml: mode 0644 \u2014 \"quoted\""} for i in range(n)]


def test_the_encoder_writes_what_json_dumps_writes_and_follows_every_change() -> None:
    enc = HeartbeatEncoder()
    data = {"format": 1, "last_loop": 1.5, "problems": _problems(3), "summary": {"live": 3, "problems": 3},
            "watch": {"watching": True, "error": None}, "parks": []}
    assert enc.encode(data) == json.dumps(data, sort_keys=True)
    data["last_loop"] = 2.5  # the problems unchanged: same text
    assert enc.encode(data) == json.dumps(data, sort_keys=True)
    data["problems"] = _problems(3) + [{"code": "invalid-live", "severity": "error", "path": None,
                                        "component": "etcd", "message": "etcd.yaml: broken"}]
    assert enc.encode(data) == json.dumps(data, sort_keys=True)
    data["problems"] = _problems(4, "other")  # same length, other contents
    assert enc.encode(data) == json.dumps(data, sort_keys=True)
    data["problems"] = []
    assert enc.encode(data) == json.dumps(data, sort_keys=True)


def test_write_heartbeat_with_an_encoder_is_read_back(tmp_path) -> None:
    layout = Layout.build(tmp_path)
    enc = HeartbeatEncoder()
    data = {"format": 1, "pid": 1, "last_loop": 3.0, "problems": _problems(2)}
    write_heartbeat(layout.heartbeat_path, data, enc)
    assert read_heartbeat(layout) == data
    assert layout.heartbeat_path.read_text() == json.dumps(data, sort_keys=True) + "\n"
