"""Cost that follows the change: the directory's findings are kept in the version store under a key of everything
they depend on, so a restart on an unchanged directory parses and validates nothing (READY on
restart at 1,000 manifests) -- while anything that changed while the daemon was down (bytes, a
mode, a new file, the configuration) is still looked at, judged and acted on before READY.

Real daemon processes under tests/daemon/count_parses.py, which counts every YAML parse, JSON
manifest decode and validation call; nothing else is stood in for."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from daemon_harness import head_digest, journal, make_root, sha, wait_journal, wait_until

pytestmark = pytest.mark.slow

MANIFESTS = "etc/kubernetes/manifests"


def _calls(path: Path) -> list[str]:
    """The parses and validations counted so far (``yaml``, ``json``, ``validate``, ``validate-directory``)."""
    try:
        return [line.split()[0] for line in path.read_text().splitlines()]
    except FileNotFoundError:
        return []


def _problems(d) -> list[tuple[str, str]]:
    return sorted((p["code"], os.path.basename(p.get("path") or "")) for p in d.heartbeat()["problems"])


def test_a_restart_on_an_unchanged_directory_parses_and_validates_nothing(tmp_path, run_daemon) -> None:
    root = make_root(tmp_path)
    mdir = root / MANIFESTS
    os.chmod(mdir / "etcd.yaml", 0o644)  # problems for both starts to report: a loose mode,
    (mdir / "kube-apiserver.yaml.bak").write_bytes((mdir / "kube-apiserver.yaml").read_bytes())  # a stray copy
    first = run_daemon(root, count_parses=tmp_path / "first.txt")
    first.wait_ready()
    reported = _problems(first)
    assert first.stop() == 0
    assert "validate-directory" in _calls(tmp_path / "first.txt")  # the counter works: the first start judged all
    assert ("loose-permissions", "etcd.yaml") in reported and ("stray", "kube-apiserver.yaml.bak") in reported

    second = run_daemon(root, count_parses=tmp_path / "second.txt")
    second.wait_ready()
    assert _calls(tmp_path / "second.txt") == [], second.stderr
    assert _problems(second) == reported


def test_what_changed_while_the_daemon_was_down_is_recorded_judged_and_restored_before_ready(
    tmp_path, run_daemon
) -> None:
    root = make_root(tmp_path, "on_invalid: restore\n")
    mdir = root / MANIFESTS
    first = run_daemon(root)
    first.wait_ready()
    assert _problems(first) == []
    assert first.stop() == 0
    good = (mdir / "kube-scheduler.yaml").read_bytes()
    bad = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-scheduler\n"  # no spec: the kubelet refuses it
    (mdir / "kube-scheduler.yaml").write_bytes(bad)
    os.chmod(mdir / "etcd.yaml", 0o644)  # the same names, other stats and bytes

    second = run_daemon(root, count_parses=tmp_path / "second.txt")
    second.wait_ready()
    assert (mdir / "kube-scheduler.yaml").read_bytes() == good  # restored before READY=1
    assert sha(bad) in {v.digest for v in _history(root, "kube-scheduler")}  # the bad bytes are in history
    assert head_digest(root, "kube-scheduler") == sha(good)
    assert ("loose-permissions", "etcd.yaml") in _problems(second)
    assert "validate-directory" in _calls(tmp_path / "second.txt")
    wait_journal(root, "EXTERNAL_CHANGE", lambda e: e.get("CHANGE") == "mode-changed" and e["FILE_NAME"] == "etcd.yaml")


def test_a_configuration_changed_while_the_daemon_was_down_judges_the_directory_anew(tmp_path, run_daemon) -> None:
    root = make_root(tmp_path, "node_capacity:\n  cpu: \"64\"\n  memory: 256Gi\n")
    first = run_daemon(root)
    first.wait_ready()
    assert _problems(first) == []
    assert first.stop() == 0
    # the same files on a node too small for them (kubeadm's four request 125m CPU together)
    (root / "etc/staticpodd/staticpodd.yaml").write_text("node_capacity:\n  cpu: 100m\n  memory: 256Gi\n")
    second = run_daemon(root)
    second.wait_ready()
    assert "out-of-cpu" in {code for code, _name in _problems(second)}, _problems(second)


def test_a_reload_has_the_whole_directory_judged_again(tmp_path, run_daemon) -> None:
    """The findings' key covers the options, the validator and the host; a SIGHUP is the
    operator's way to have the directory looked at again whatever the key says."""
    root = make_root(tmp_path)
    counts = tmp_path / "counts.txt"
    d = run_daemon(root, count_parses=counts)
    d.wait_ready()
    before = len(_calls(counts))
    d.proc.send_signal(signal.SIGHUP)  # what `staticpodd --reload` sends (it wants the plain daemon's argv)
    wait_until(lambda: d.heartbeat().get("config", {}).get("generation") == 2, what="the reload")
    wait_until(lambda: "validate-directory" in _calls(counts)[before:], 20, what="a validation after the reload")


def _history(root: Path, component: str) -> list:
    from daemon_harness import history

    return history(root, component)


def test_an_invalid_file_is_reported_in_the_same_words_after_a_restart(tmp_path, run_daemon) -> None:
    # the first start found it as a new file (code:line); a restart reported the same file from
    # the kept findings without its line (a newcomer's finding: "(name-missing:3)" then "(name-missing)")
    root = make_root(tmp_path)
    bad = root / MANIFESTS / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  namespace: kube-system\n"
                   "spec:\n  containers:\n  - name: c\n    image: nginx\n")
    os.chmod(bad, 0o600)
    for n in (1, 2):
        d = run_daemon(root)
        d.wait_ready()
        entries = wait_until(lambda n=n: (es := [e for e in journal(root, "INVALID_LIVE")
                                                 if e.get("FILE_NAME") == "bad.yaml"]) and len(es) >= n and es,
                             30, 0.1, what=f"INVALID_LIVE number {n}")
        assert d.stop() == 0
    texts = [e["MESSAGE"] for e in entries]
    assert "(name-missing:3)" in texts[0] and texts[1] == texts[0], texts
