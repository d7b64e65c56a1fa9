"""The validate verb: exit statuses, compiler-style text, stable --json, and real config-management use.

Runs real processes: ``python -m staticpodd.validate``, ``staticpodctl validate`` (the lead's CLI,
when installed), and a real ``ansible-playbook`` copy with ``validate:`` against localhost.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from staticpodd.validate.cli import add_validate_parser, run_validate
from tests.validate.conftest import pod

BAD = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  hostNetwork: 'true'\n  containers: [{name: c, image: 'i:1'}]\n"
WARN = pod({"priority": 7})


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="staticpodctl")
    sub = parser.add_subparsers(dest="verb")
    add_validate_parser(sub)
    return parser.parse_args(["validate", "--node-name", "cp-1", *argv])


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    rc = run_validate(parse(*argv), out)
    return rc, out.getvalue()


def test_exit_0_with_warnings_and_1_with_errors(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_bytes(WARN)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(BAD)
    rc, text = run(str(ok))
    assert rc == 0 and "warning[priority-without-class]" in text
    rc, text = run(str(ok), str(bad))
    assert rc == 1
    first = text.splitlines()
    assert any(
        line.startswith(f"{bad}:6:16: error[schema-type] (the kubelet refuses it): ") and line.endswith("[spec.hostNetwork]") for line in first
    )
    assert any(line.startswith("    hint: remove the quotes") for line in first)
    assert first[-1] == "2 manifests checked against Kubernetes 1.37: 1 error, 1 warning; the kubelet would not run 1 of 2 files"
    assert f"{bad}: the kubelet refuses it (it drops the pod)" in first


def test_exit_1_for_unreadable_paths_and_2_for_unknown_versions(tmp_path):
    assert run(str(tmp_path / "missing.yaml"))[0] == 1  # a filesystem error, as for apply
    f = tmp_path / "f.yaml"
    f.write_bytes(WARN)
    assert run("--kubernetes-version", "1.12", str(f))[0] == 2
    assert run("--kubernetes-version", "v1.33.4", str(f))[0] == 0


def test_strict_makes_unknown_fields_fail(tmp_path):
    f = tmp_path / "f.yaml"
    f.write_bytes(
        pod({"containers": [{"name": "c", "image": "i:1", "imagePullPolicy": "IfNotPresent", "timeOutSeconds": 1}]})
    )
    assert run(str(f))[0] == 0
    assert run("--strict", str(f))[0] == 1


def test_json_output_is_one_stable_object(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(BAD)
    rc, text = run("--json", str(bad))
    doc = json.loads(text)
    assert rc == 1
    assert set(doc) == {"format_version", "command", "ok", "files", "findings", "verdicts", "summary"}
    assert (doc["format_version"], doc["command"], doc["ok"], doc["files"]) == (1, "validate", False, [str(bad)])
    assert doc["summary"] == {
        "errors": 1, "warnings": 0, "manifests": 1, "kubelet_refuses": 1, "staticpodd_only": 0
    }
    assert doc["verdicts"] == [{
        "path": str(bad), "kubelet": "refuses", "staticpodd": "refuses", "kubelet_runs": False,
        "reasons": ["schema-type"], "strictness": [],
    }]
    assert doc["findings"][0] == {
        "code": "schema-type",
        "severity": "error",
        "kubelet": "refuses",
        "path": str(bad),
        "line": 6,
        "column": 16,
        "field": "spec.hostNetwork",
        "message": doc["findings"][0]["message"],
        "hint": "remove the quotes: true",
    }


def test_json_errors_that_stop_validation(tmp_path):
    rc, text = run("--json", str(tmp_path / "nope"))
    assert rc == 1 and json.loads(text)["error"]["code"] == "fs-error"
    f = tmp_path / "f.yaml"
    f.write_bytes(WARN)
    rc, text = run("--json", "--kubernetes-version", "1.12", str(f))
    assert rc == 2 and json.loads(text)["error"]["code"] == "usage"


def test_python_m_entry_point_runs_as_a_process(tmp_path):
    f = tmp_path / ".ansible_tmpXYZ"
    f.write_bytes(BAD)
    proc = subprocess.run(
        [sys.executable, "-m", "staticpodd.validate", "--node-name", "cp-1", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "error[schema-type]" in proc.stdout


def _staticpodctl() -> str:
    exe = Path(sys.executable).parent / "staticpodctl"
    if not exe.exists():
        pytest.skip("staticpodctl is not installed in this environment")
    return str(exe)


def test_staticpodctl_validate_verb(tmp_path):
    f = tmp_path / "tmpfile-any-name"
    f.write_bytes(BAD)
    proc = subprocess.run(
        [_staticpodctl(), "validate", "--json", "--node-name", "cp-1", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["summary"]["errors"] == 1


def test_ansible_copy_with_validate_keeps_the_good_file(tmp_path):
    """A real ansible-playbook run (local connection): a bad manifest never replaces the good one."""
    playbook_bin = Path(sys.executable).parent / "ansible-playbook"
    if not playbook_bin.exists() and shutil.which("ansible-playbook") is None:
        pytest.skip("ansible-core is not installed")
    ctl = _staticpodctl()
    dest = tmp_path / "manifests" / "web.yaml"
    dest.parent.mkdir()
    dest.write_bytes(pod())
    good = dest.read_bytes()

    def play(content: bytes) -> subprocess.CompletedProcess[str]:
        src = tmp_path / "src.yaml"
        src.write_bytes(content)
        pb = tmp_path / "play.yml"
        pb.write_text(
            "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
            f"  - copy: {{src: '{src}', dest: '{dest}', mode: '0600', validate: '{ctl} validate --node-name cp-1 %s'}}\n"
        )
        env = dict(
            os.environ,
            ANSIBLE_LOCAL_TEMP=str(tmp_path / "atmp"),
            ANSIBLE_HOME=str(tmp_path / "ahome"),
            ANSIBLE_PYTHON_INTERPRETER=sys.executable,
            LC_ALL="C.UTF-8",
            LANG="C.UTF-8",
            ANSIBLE_NOCOLOR="1",
        )
        exe = str(playbook_bin) if playbook_bin.exists() else "ansible-playbook"
        return subprocess.run(
            [exe, "-i", "localhost,", "-c", "local", str(pb)], capture_output=True, text=True, env=env, timeout=300
        )

    bad = play(BAD)
    assert bad.returncode != 0, bad.stdout
    assert "failed to validate" in bad.stdout
    assert dest.read_bytes() == good
    changed = pod(name="web2")
    ok = play(changed)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert dest.read_bytes() == changed


def test_node_capacity_flags_drive_the_node_fit_check(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_bytes(pod({"containers": [{"name": "c", "image": "i:1", "resources": {"requests": {"cpu": "3"}}}]}))
    rc, text = run("--node-cpu", "2", "--node-memory", "8Gi", str(f))
    assert rc == 1 and "(res: cpu, q: 1000)" in text and "UnexpectedAdmissionError" in text
    assert "the kubelet reads it but the pod fails admission (it never runs)" in text
    assert run("--node-cpu", "4", "--node-memory", "8Gi", str(f))[0] == 0
    assert run("--node-cpu", "lots", str(f))[0] == 2


def test_kubelet_config_reservations_shrink_allocatable(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_bytes(pod({"containers": [{"name": "c", "image": "i:1", "resources": {"requests": {"cpu": "3500m"}}}]}))
    cfg = tmp_path / "config.yaml"
    cfg.write_bytes(b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                    b"kubeReserved: {cpu: 300m}\nsystemReserved: {cpu: 300m, memory: 1Gi}\n")
    assert run("--node-cpu", "4", "--node-memory", "8Gi", str(f))[0] == 0
    rc, text = run("--node-cpu", "4", "--node-memory", "8Gi", "--kubelet-config", str(cfg), str(f))
    assert rc == 1 and "(res: cpu, q: 100)" in text, text
    cfg.write_bytes(b"kubeReserved: {cpu: lots}\n")
    rc, text = run("--kubelet-config", str(cfg), str(f))
    assert rc == 2


def test_no_host_checks_skips_this_machines_paths(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_bytes(pod({"volumes": [{"name": "k", "hostPath": {"path": str(tmp_path / "admin.conf")}}]}))
    assert "hostpath-missing" in run(str(f))[1]
    assert "hostpath-missing" not in run("--no-host-checks", str(f))[1]


def test_a_directory_counts_the_manifests_it_holds_and_odd_names_stay_valid_json(tmp_path):
    import os

    d = tmp_path / "manifests"
    d.mkdir()
    for n in ("a.yaml", "b.yaml", "c.yaml.bak"):
        (d / n).write_bytes(WARN)
    (d / os.fsdecode(b"w\xffb.yaml")).write_bytes(WARN)
    (d / ".hidden").write_bytes(b"x")
    rc, text = run(str(d))
    assert text.splitlines()[-1].startswith("4 manifests in 1 path checked against")
    assert "w\\xffb.yaml" in text
    rc, text = run(str(d), "--json")
    doc = json.loads(text)  # strict: no lone surrogates
    assert doc["summary"]["manifests"] == 4
    assert "\\udc" not in text


def test_a_symlink_loop_in_a_directory_does_not_zero_the_count_or_hide_the_verdicts(tmp_path):
    """``ln -s loop.yaml loop.yaml`` beside real manifests: the count said "0 manifests" and the
    summary lost "the kubelet would not run …" (is_file() raises ELOOP; a newcomer's try)."""
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "a.yaml").write_bytes(WARN)
    (d / "b.yaml").write_bytes(BAD)
    (d / "loop.yaml").symlink_to("loop.yaml")
    rc, text = run(str(d))
    assert rc == 1
    last = text.splitlines()[-1]
    assert last.startswith("2 manifests in 1 path checked against"), last
    assert "the kubelet would not run 1 of 2 files" in last
