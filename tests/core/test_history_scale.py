"""Cost that follows the change: ``history`` costs the same with 1 or 10,000 versions: by default it shows the newest
100 (text and --json, which says the total and that it is cut), ``--all`` / ``-n 0`` everything,
and the rows are not deep-copied (no ``dataclasses.asdict`` per version)."""

from __future__ import annotations

import dataclasses

from staticpodd.store.versions import VersionStore


def _many(sandbox, n: int) -> None:
    sandbox.write("web.yaml", b"# v%d\n" % (n - 1))
    store = VersionStore(sandbox.root / "var/lib/staticpodd/versions.sqlite3")
    with store.transaction():
        for i in range(n):
            store.record("web", "web.yaml", b"# v%d\n" % i, action="apply", actor="root")
    store.close()


def test_history_shows_the_newest_100_and_says_how_many_are_older(sandbox, ctl) -> None:
    _many(sandbox, 250)
    body = ctl("history", "web", "--json").json()
    assert [v["version"] for v in body["versions"]] == list(range(151, 251))
    assert body["total_versions"] == 250 and body["truncated"] is True
    r = ctl("history", "web")
    assert r.rc == 0 and "150 older version(s) not shown" in r.out and "--all" in r.out
    assert len(ctl("history", "web", "--all", "--json").json()["versions"]) == 250
    assert len(ctl("history", "web", "-n", "0", "--json").json()["versions"]) == 250
    small = ctl("history", "web", "-n", "3", "--json").json()
    assert [v["version"] for v in small["versions"]] == [248, 249, 250] and small["truncated"] is True
    assert ctl("history", "web", "-n", "-1").rc == 2


def test_a_short_history_is_shown_whole_and_not_marked_cut(sandbox, ctl) -> None:
    _many(sandbox, 3)
    body = ctl("history", "web", "--json").json()
    assert len(body["versions"]) == 3 and body["total_versions"] == 3 and body["truncated"] is False
    assert "not shown" not in ctl("history", "web").out


def test_text_history_does_not_deep_copy_rows(sandbox, ctl, monkeypatch) -> None:
    _many(sandbox, 5)
    calls = []
    real = dataclasses.asdict
    monkeypatch.setattr(dataclasses, "asdict", lambda *a, **k: calls.append(1) or real(*a, **k))
    import staticpodd.store.versions as st

    monkeypatch.setattr(st, "asdict", dataclasses.asdict, raising=False)
    assert ctl("history", "web").rc == 0
    assert ctl("history", "web", "--json").rc == 0
    assert calls == []
