"""A big pod beside the component a verb changes is not decoded by that verb: the duplicate-pod
and host-port checks decode only files that could define the same pod or claim a host port
(podfacts.may_name, may_claim_host_ports). The cost itself is measured by
tests/bench/bench_big_neighbour.py, not here."""

from __future__ import annotations

import pytest
from spd_testlib import big_pod, count_decodes


def test_an_unrelated_apply_does_not_decode_a_big_pod_beside_it(kubeadm, ctl, decoded_sizes, tmp_path):
    kubeadm.write("big.yaml", big_pod(2_000_000))
    changed = tmp_path / "sched.yaml"
    changed.write_bytes(kubeadm.manifests.joinpath("kube-scheduler.yaml").read_bytes() + b"# more\n")
    run = ctl("apply", str(changed), "--as", "kube-scheduler", "--reason", "test")
    assert run.rc == 0, run.err
    assert not [s for s in decoded_sizes if s >= 2_000_000], decoded_sizes


@pytest.mark.parametrize("extra", ["  hostNetwork: true\n", ""], ids=["host-network", "same-name"])
def test_a_big_pod_that_may_clash_is_still_decoded_and_judged(kubeadm, ctl, decoded_sizes, tmp_path, extra):
    # same name as the scheduler, or hostNetwork (claims its ports): it must be looked at
    name = "big" if extra else "kube-scheduler"
    kubeadm.write("big.yaml", big_pod(300_000, name=name, extra=extra))
    changed = tmp_path / "sched.yaml"
    changed.write_bytes(kubeadm.manifests.joinpath("kube-scheduler.yaml").read_bytes() + b"# more\n")
    run = ctl("apply", str(changed), "--as", "kube-scheduler", "--reason", "test")
    assert [s for s in decoded_sizes if s >= 300_000], decoded_sizes
    if not extra:
        assert run.rc != 0 and "big.yaml" in run.err, (run.rc, run.err)


# -- what is known of a big neighbour by its digest: not read again -------------------------------


@pytest.fixture
def big_reads(monkeypatch):
    """How many times each verb reads big.yaml (fsops.read_state: the scan and the checks)."""
    import os

    from staticpodd.node import fsops

    seen: list[str] = []
    real = fsops.read_state

    def counting(path):
        if os.path.basename(path) == "big.yaml":
            seen.append(str(path))
        return real(path)

    monkeypatch.setattr(fsops, "read_state", counting)
    return seen


def _apply_scheduler(kubeadm, ctl, tmp_path, n: int):
    changed = tmp_path / f"sched-{n}.yaml"
    changed.write_bytes(kubeadm.manifests.joinpath("kube-scheduler.yaml").read_bytes() + f"# {n}\n".encode())
    return ctl("apply", str(changed), "--as", "kube-scheduler", "--reason", "test")


def _wait_out_racy_window(path) -> None:
    import os
    import time

    time.sleep(max(0.0, os.stat(path).st_ctime + 2.1 - time.time()))


def test_a_fresh_big_neighbour_is_read_once_per_verb_by_its_scan_only(kubeadm, ctl, tmp_path, big_reads):
    # written under 2 s ago, big.yaml's stat signature is not stored (a write in the same tick
    # would not show): each verb's scan reads and hashes it, and the checks across files take
    # that digest's cached facts instead of reading it again
    kubeadm.write("big.yaml", big_pod(300_000))
    assert _apply_scheduler(kubeadm, ctl, tmp_path, 1).rc == 0
    big_reads.clear()
    run = _apply_scheduler(kubeadm, ctl, tmp_path, 2)
    assert run.rc == 0, run.err
    assert len(big_reads) == 1, big_reads


def test_a_settled_big_neighbour_is_not_read_at_all(kubeadm, ctl, tmp_path, big_reads):
    kubeadm.write("big.yaml", big_pod(300_000))
    assert _apply_scheduler(kubeadm, ctl, tmp_path, 1).rc == 0
    _wait_out_racy_window(kubeadm.manifests / "big.yaml")
    assert _apply_scheduler(kubeadm, ctl, tmp_path, 2).rc == 0  # stores its stat signature
    big_reads.clear()
    run = _apply_scheduler(kubeadm, ctl, tmp_path, 3)
    assert run.rc == 0, run.err
    assert big_reads == []


def test_new_bytes_in_the_big_neighbour_are_judged_again(kubeadm, ctl, tmp_path):
    # what was cached of the old bytes ("defines no pod named kube-scheduler") is theirs only:
    # the same file now defining kube-scheduler is refused as a duplicate
    import os

    big = kubeadm.manifests / "big.yaml"
    kubeadm.write("big.yaml", big_pod(300_000))
    assert _apply_scheduler(kubeadm, ctl, tmp_path, 1).rc == 0
    _wait_out_racy_window(big)
    assert _apply_scheduler(kubeadm, ctl, tmp_path, 2).rc == 0
    st = os.stat(big)
    renamed = big_pod(300_000, name="kube-scheduler")
    big.write_bytes(renamed[:st.st_size].rsplit(b"\n    - name:", 1)[0] + b"\n")
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back; the ctime moves
    run = _apply_scheduler(kubeadm, ctl, tmp_path, 3)
    assert run.rc != 0 and "big.yaml" in run.err and "kube-system/kube-scheduler" in run.err, (run.rc, run.err)


def test_what_one_lock_hold_read_is_forgotten_when_the_lock_is_released(kubeadm):
    from staticpodd.engine import Actor, Engine
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    kubeadm.write("big.yaml", big_pod(300_000))
    eng = Engine(Layout.build(kubeadm.root), actor=Actor("t", 0), journal=Journal("staticpodd", str(kubeadm.root)))
    try:
        with eng.locked():
            eng.scan(log=False)
            assert eng.core._held_digests and "big.yaml" in eng.core._held_digests
            # a write after the scan changes the stat: the scan's digest is not used for it
            kubeadm.write("big.yaml", big_pod(300_000, name="kube-scheduler"))
            assert eng.files_defining(("kube-system", "kube-scheduler"), besides="kube-scheduler.yaml") == [
                "big.yaml"]
        assert eng.core._held_digests is None
    finally:
        eng.close()


@pytest.mark.parametrize("spelled", [
    b"name: !!binary a3ViZS1zY2hlZHVsZXI=",  # go-yaml v2 (the kubelet) base64-decodes it
    b"name: !<tag:yaml.org,2002:binary> a3ViZS1zY2hlZHVsZXI=",
], ids=["binary-tag", "verbatim-tag"])
def test_a_name_the_kubelet_reads_through_a_yaml_tag_may_be_there(spelled):
    # may_name and may_claim_host_ports say "surely not" from the bytes alone: a tag can spell a
    # name or key without its literal bytes, so a file with one is decoded and judged
    from staticpodd.validate.podfacts import may_claim_host_ports, may_name

    data = b"apiVersion: v1\nkind: Pod\nmetadata:\n  " + spelled + b"\n"
    assert may_name(data, "kube-scheduler")
    assert may_claim_host_ports(b"spec:\n  !!binary aG9zdE5ldHdvcms=: true\n")


@pytest.fixture
def decoded_sizes(monkeypatch):
    """The size of every input this process decodes (spd_testlib.count_decodes)."""
    return count_decodes(monkeypatch)

