"""Cost that follows the change: what park and unpark do must depend on the component asked, not on how many others
the node has, while the duplicate-pod checks (docs/kubelet-contract.md "Duplicate names across files") still
see every live file. Counted (store queries, directory listings), never timed."""

from __future__ import annotations

import os
import time

import pytest
from spd_testlib import small_pod, wait_out_racy_window

from staticpodd.engine import Actor, Engine
from staticpodd.errors import Conflict
from staticpodd.journal import Journal
from staticpodd.layout import Layout
from staticpodd.store import versions as store_mod


@pytest.fixture
def eng(sandbox, monkeypatch):
    monkeypatch.setenv("STATICPODD_NO_JOURNAL", "1")
    for i in range(30):
        sandbox.write(f"p{i:02d}.yaml", small_pod(f"p{i:02d}"))
    old = time.time() - 60
    for p in sandbox.manifests.iterdir():
        if p.is_file():
            os.utime(p, (old, old))
    e = Engine(Layout.build(sandbox.root), actor=Actor("t", 0), journal=Journal("staticpodctl", str(sandbox.root)))
    wait_out_racy_window(monkeypatch, [p for p in sandbox.manifests.iterdir() if p.is_file()])  # signatures stored
    with e.locked():
        e.scan(log=False)
    e.park("p05")
    e.unpark("p05")  # every identity cached
    yield e
    e.close()


def _count(monkeypatch, cls: type, name: str) -> list[int]:
    calls = [0]
    real = getattr(cls, name)

    def counted(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(cls, name, counted)
    return calls


def test_park_asks_the_store_no_identity_per_other_file(eng, monkeypatch) -> None:
    identity = _count(monkeypatch, store_mod.VersionStore, "identity")
    eng.park("p05")
    eng.unpark("p05")
    assert identity[0] <= 4  # the component's own bytes; not one query for each of the 29 others


def test_resolving_a_name_lists_no_directory(eng, monkeypatch) -> None:
    listed: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda p=".": listed.append(str(p)) or real(p))
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real_listdir(p))
    t = eng.resolve("p07")
    assert (t.component, t.file_name, t.live, t.parked) == ("p07", "p07.yaml", True, False)
    t = eng.resolve("p07.yaml")
    assert (t.component, t.file_name, t.live, t.parked) == ("p07", "p07.yaml", True, False)
    assert listed == []


def test_a_twin_edited_by_hand_is_still_seen_by_park(eng, sandbox) -> None:
    # p09.yaml now defines p05's pod; its stat changed, so its cached identity is not trusted
    sandbox.write("p09.yaml", small_pod("p05"))
    with pytest.raises(Conflict, match="p09.yaml also defines pod"):
        eng.park("p05")


def test_the_first_park_on_a_fresh_node_caches_every_identity_in_one_commit(sandbox, monkeypatch) -> None:
    # Seen profiling a 1,000-manifest node: the first park after adoption cached the pod identity of each other
    # live file in a transaction of its own (1,000 commits, ~2 s, on a node of 1,000 manifests).
    monkeypatch.setenv("STATICPODD_NO_JOURNAL", "1")
    for i in range(30):
        sandbox.write(f"p{i:02d}.yaml", small_pod(f"p{i:02d}"))
    e = Engine(Layout.build(sandbox.root), actor=Actor("t", 0), journal=Journal("staticpodctl", str(sandbox.root)))
    try:
        with e.locked():
            e.scan(log=False)
        begins: list[str] = []
        e.store._db.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
        e.park("p05")
        assert len(begins) < 10, f"{len(begins)} transactions for one park of 30 files"
    finally:
        e.close()


def test_a_file_rewritten_into_a_twin_while_apply_validates_is_still_refused(eng, sandbox, monkeypatch) -> None:
    # The duplicate-pod check stats every file itself, after the validation: a file the
    # pre-change scan found unchanged may have been rewritten since (a newcomer's race: a big
    # manifest's validation took 0.35 s; f0a09f1 trusted the scan's stats and let the twin in).
    import staticpodd.validate as validate_mod

    real_gate = validate_mod.gate

    def gate_while_someone_writes(*args, **kwargs):
        sandbox.write("p09.yaml", small_pod("p05"))  # p09 becomes a second file for pod p05
        return real_gate(*args, **kwargs)

    monkeypatch.setattr(validate_mod, "gate", gate_while_someone_writes)
    with pytest.raises(Conflict, match="p09.yaml"):
        eng.apply(small_pod("p05", image="nginx:1.28").encode(), source="p05.next.yaml", component="p05")


def test_a_twin_written_after_the_last_apply_is_still_refused(eng, sandbox) -> None:
    sandbox.write("p09.yaml", small_pod("p05"))  # after the scans that stored p09's signature
    with pytest.raises(Conflict, match="p09.yaml"):
        eng.apply(small_pod("p05", image="nginx:1.28").encode(), source="p05.next.yaml", component="p05")


def test_unpark_and_apply_decode_no_other_file_for_its_host_ports(eng, monkeypatch) -> None:
    # The host-port check (docs/kubelet-contract.md "What the kubelet refuses") looks at every other live
    # file's claims, memoised by digest and trusted while the file's stat is what it was when
    # its bytes were read: after the first look, the 29 others are neither read nor decoded, and
    # the two checks of the other files (duplicates, host ports) stat each of them once.
    from staticpodd.validate import podfacts

    def claiming(port: int) -> bytes:
        return small_pod("p05", extra=f"    ports:\n    - containerPort: 80\n      hostPort: {port}\n").encode()

    eng.apply(claiming(9999), source="p05.next.yaml", component="p05")  # the first look: memoised
    decoded = _count(monkeypatch, podfacts, "port_claims")
    eng.park("p05")
    eng.unpark("p05")
    assert decoded[0] == 0  # the parked bytes' claims are memoised too
    from staticpodd.engine import gate

    stats = _count(monkeypatch, gate, "_stat_sig")
    eng.apply(claiming(9998), source="p05.next.yaml", component="p05")
    assert decoded[0] == 0  # no other file; the new bytes' claims come from the gate's document
    assert stats[0] <= 30  # one stat per live file for the duplicate and host-port checks together


def test_a_port_taken_after_the_last_apply_is_still_refused(eng, sandbox) -> None:
    sandbox.write("p09.yaml", small_pod("p09", extra="    ports:\n    - containerPort: 80\n      hostPort: 8080\n"))
    with pytest.raises(Conflict, match="host port 8080/TCP .* p09.yaml"):
        eng.apply(small_pod("p05", extra="    ports:\n    - containerPort: 80\n      hostPort: 8080\n").encode(),
                  source="p05.next.yaml", component="p05")


def test_a_port_claimed_by_an_unchanged_file_is_refused_from_its_memo(eng, sandbox, monkeypatch) -> None:
    # the other file's claims come from the store (its stat unchanged since its bytes were read),
    # and still refuse: only the new bytes are decoded
    from staticpodd.validate import podfacts

    ports = "    ports:\n    - containerPort: 80\n      hostPort: 8080\n"
    p09 = sandbox.write("p09.yaml", small_pod("p09", extra=ports))
    old = time.time() - 60
    os.utime(p09, (old, old))
    wait_out_racy_window(monkeypatch, [p09])
    with eng.locked():
        eng.scan(log=False)
    eng.apply(small_pod("p05", extra=ports.replace("8080", "9999")).encode(), source="p05.next.yaml",
              component="p05")  # p09's claims memoised
    decoded = _count(monkeypatch, podfacts, "port_claims")
    for proto in ("UDP", "TCP"):  # 8080/UDP is free; 8080/TCP is p09's
        bytes_ = small_pod("p05", extra=ports + (f"      protocol: {proto}\n")).encode()
        if proto == "UDP":
            eng.apply(bytes_, source="p05.next.yaml", component="p05")
        else:
            with pytest.raises(Conflict, match="host port 8080/TCP .* p09.yaml"):
                eng.apply(bytes_, source="p05.next.yaml", component="p05")
    assert decoded[0] == 0  # p09 neither read nor decoded (the new bytes: the gate's document)
