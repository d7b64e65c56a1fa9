"""Judging a big file in a child process (staticpodd/validate/isolated.py, the daemon's): the
findings and the pod's facts are the ones the same code gives in this process, the daemon's scan
and its directory findings judge one file once between them, and a child that fails leaves the
verdict to this process (never a guess)."""

from __future__ import annotations

import subprocess

import pytest

from staticpodd.validate import Options, isolated, validate_bytes, validate_directory
from staticpodd.validate.podfacts import FileMemo


def pod(name: str, entries: int, extra: str = "") -> bytes:
    env = "".join(f"    - name: VAR_{i}\n      value: \"{'v' * 40}\"\n" for i in range(entries))
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n"
            f"  hostNetwork: true\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n"
            f"    ports:\n    - containerPort: 8080\n{extra}    env:\n{env}").encode()


@pytest.fixture
def children(monkeypatch):
    """Isolation on for files over 10 kB; the child processes started, counted."""
    started: list[str] = []
    real = isolated._in_child

    def counting(data, display, options):
        started.append(display)
        return real(data, display, options)

    monkeypatch.setattr(isolated, "ISOLATE_OVER", 10_000)
    monkeypatch.setattr(isolated, "_in_child", counting)
    isolated.enable()
    yield started
    isolated.enable(False)


def test_a_big_file_gets_the_findings_it_gets_in_this_process(children, monkeypatch):
    data = pod("big", 300, extra="    livenessProbe:\n      timeoutSeconds: -1\n")
    isolated.enable(False)
    here = validate_bytes(data, "/m/big.yaml")
    isolated.enable()

    def not_here(*a):
        raise AssertionError("judged in the daemon's process")

    import staticpodd.validate.directory

    monkeypatch.setattr(staticpodd.validate.directory, "judge_all", not_here)  # the child has its own
    assert validate_bytes(data, "/m/big.yaml") == here
    assert any(f.severity == "error" for f in here)
    assert children == ["/m/big.yaml"]


def test_the_directory_checks_see_a_big_files_pod_and_ports(children, tmp_path):
    (tmp_path / "big.yaml").write_bytes(pod("big", 300))
    (tmp_path / "small.yaml").write_bytes(pod("small", 1))
    both = validate_directory(tmp_path, Options(), FileMemo())
    assert children == [str(tmp_path / "big.yaml")]
    clash = [f for f in both if f.code == "host-port-conflict"]
    assert clash, [f.code for f in both]
    isolated.enable(False)
    assert sorted(both, key=repr) == sorted(validate_directory(tmp_path, Options(), FileMemo()), key=repr)


def test_one_file_is_judged_once_for_the_scan_and_the_directory(children, tmp_path):
    data = pod("big", 300)
    (tmp_path / "big.yaml").write_bytes(data)
    validate_bytes(data, str(tmp_path / "big.yaml"))  # the daemon's drift scan
    validate_directory(tmp_path, Options(), FileMemo())  # then its directory findings
    assert children == [str(tmp_path / "big.yaml")]


def test_a_child_that_fails_leaves_the_verdict_to_this_process(children, monkeypatch):
    data = pod("big", 300, extra="    livenessProbe:\n      timeoutSeconds: -1\n")
    monkeypatch.setattr(subprocess, "run",
                        lambda *a, **kw: subprocess.CompletedProcess(a, -9, b"", b"Killed"))
    found = validate_bytes(data, "/m/big.yaml")
    isolated.enable(False)
    assert found == validate_bytes(data, "/m/big.yaml")
    assert any(f.severity == "error" for f in found)


def test_a_child_running_other_code_than_ours_answers_nothing(tmp_path):
    # `python -I` with our package directory last on its path: a staticpodd found before it (a
    # different install) would judge by other rules, so it exits 3 and this process judges
    from staticpodd.validate.child import main

    assert main(str(tmp_path)) == 3
