"""Cost that follows the change: the heartbeat of a node with thousands of problems is rewritten every 10 s for its
``last_loop``; :class:`HeartbeatEncoder` writes the same bytes as ``json.dumps(sort_keys=True)``
while re-encoding the problem list only when it changed."""

from __future__ import annotations

import json

from staticpodd.daemon.heartbeat import HeartbeatEncoder, ProblemList, read_heartbeat, write_heartbeat
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


class _Finding:
    """Stands for a validator Finding: the heartbeat makes a dict of it only when it encodes it."""

    made = 0

    def __init__(self, i: int, word: str = "loose") -> None:
        self.code, self.path = f"{word}-permissions", f"/m/x-{i}.yaml"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Finding) and (self.code, self.path) == (other.code, other.path)

    def as_dict(self) -> dict[str, object]:
        _Finding.made += 1
        return {"code": self.code, "severity": "warning", "path": self.path, "component": None,
                "message": f"{self.path}: mode 0644"}


def test_a_problem_list_of_findings_is_written_as_the_same_list_of_dicts_and_made_into_dicts_once() -> None:
    enc = HeartbeatEncoder()
    tail = [_Finding(i) for i in range(3)]
    head = [{"code": "lock-timeout", "severity": "warning", "path": "/run/lock", "message": "held"}]
    problems = ProblemList(head, tail, _Finding.as_dict)
    assert len(problems) == 4 and problems[0] == head[0] and problems[-1] == tail[-1].as_dict()
    assert list(problems) == head + [f.as_dict() for f in tail] and problems[1:2] == [tail[0].as_dict()]
    data = {"format": 1, "last_loop": 1.5, "problems": problems}
    plain = {**data, "problems": list(problems)}
    assert enc.encode(data) == json.dumps(plain, sort_keys=True)
    _Finding.made = 0
    data["last_loop"] = 2.5
    again = enc.encode(data)
    data["problems"] = ProblemList(head, list(tail), _Finding.as_dict)  # another list, the same findings
    other_list = enc.encode(data)
    assert _Finding.made == 0  # neither made a dict of a finding: the text was kept
    assert again == other_list == json.dumps({**plain, "last_loop": 2.5}, sort_keys=True)
    for problems in (ProblemList(head, [_Finding(1, "other")], _Finding.as_dict), ProblemList([], [], _Finding.as_dict),
                     ProblemList(head, [], _Finding.as_dict), ProblemList([], tail, _Finding.as_dict)):
        data["problems"] = problems
        assert enc.encode(data) == json.dumps({**data, "problems": list(problems)}, sort_keys=True)


def test_write_heartbeat_without_an_encoder_writes_a_problem_list_as_a_list(tmp_path) -> None:
    layout = Layout.build(tmp_path)
    problems = ProblemList([], [_Finding(7)], _Finding.as_dict)
    write_heartbeat(layout.heartbeat_path, {"format": 1, "problems": problems})
    assert read_heartbeat(layout) == {"format": 1, "problems": list(problems)}
