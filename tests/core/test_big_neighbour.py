"""A big pod beside the component a verb changes is not decoded by that verb: the duplicate-pod
and host-port checks decode only files that could define the same pod or claim a host port
(podfacts.may_name, may_claim_host_ports). The cost itself is measured by
tests/bench/bench_big_neighbour.py, not here."""

from __future__ import annotations

import pytest

import staticpodd.decoding
import staticpodd.validate


def big_pod(size: int, *, name: str = "big", extra: str = "") -> bytes:
    head = (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n"
            f"{extra}  containers:\n  - name: big\n    image: registry.k8s.io/pause:3.10\n    env:\n")
    out, i = [head], 0
    while sum(map(len, out)) < size:
        out.append(f"    - name: VAR_{i}\n      value: \"{'v' * 40}\"\n")
        i += 1
    return "".join(out).encode()


@pytest.fixture
def decoded_sizes(monkeypatch):
    """The size of every input decoded (every module that decodes goes through one of these)."""
    sizes: list[int] = []
    real = staticpodd.decoding.decode

    def counting(data, *a, **kw):
        sizes.append(len(data))
        return real(data, *a, **kw)

    for module in (staticpodd.decoding, staticpodd.validate):
        monkeypatch.setattr(module, "decode", counting)
    return sizes


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
