"""A big file the daemon judges is decoded in a short-lived child process, not in the daemon:
a 9.5 MB pod costs some 400 MB of Python objects to decode, which the daemon's heap would keep
(staticpodd/validate/isolated.py). The verdict is the one the daemon's own code gives.

The real daemon runs under tests/daemon/count_parses.py, which counts every YAML parse and
validation the daemon process makes (the child is a process of its own: not counted)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from daemon_harness import REPO, make_root, wait_until
from spd_testlib import big_pod, count_decodes, staticpodctl_cmd

pytestmark = pytest.mark.slow




def _versions(root: Path, component: str) -> list[dict]:
    run = subprocess.run([*staticpodctl_cmd(), "history", component, "--json", "--root", str(root)],
                         capture_output=True, text=True, cwd=str(REPO), env=dict(os.environ, PYTHONPATH=str(REPO)))
    return json.loads(run.stdout).get("versions", []) if run.returncode == 0 else []


def _problems(d) -> list[dict]:
    return [p for p in d.heartbeat().get("problems") or [] if "big.yaml" in str(p.get("path") or "")]


def test_an_edit_of_a_big_pod_is_judged_outside_the_daemon(tmp_path, run_daemon) -> None:
    root = make_root(tmp_path)
    big = root / "etc/kubernetes/manifests/big.yaml"
    big.write_bytes(big_pod(1_500_000))  # over isolated.ISOLATE_OVER (1 MiB)
    os.chmod(big, 0o600)
    counts = tmp_path / "parses.txt"
    d = run_daemon(root, count_parses=counts)
    d.wait_ready(60)
    wait_until(lambda: _problems(d), 60, 0.2, what="the daemon's finding on big.yaml")
    edited = time.time()
    with open(big, "ab") as fh:
        fh.write(b"# edited\n")
    wait_until(lambda: len(_versions(root, "big")) >= 2, 60, 0.5, what="the edit of big.yaml recorded")
    size = big.stat().st_size
    # the daemon's problem follows the new bytes: it judged the edit (in a child)
    found = wait_until(lambda: [p for p in _problems(d) if f"{size} bytes" in p.get("message", "")], 60, 0.2,
                       what="the daemon's finding on the edited big.yaml")
    after = [line.split()[0] for line in counts.read_text().splitlines() if float(line.split()[1]) > edited]
    assert not [k for k in after if k in ("yaml", "validate")], after
    # the verdict is the validator's: over staticpodd's 1 MiB limit, and the kubelet would run it
    assert found[0]["code"] == "invalid-live", found
    assert "over staticpodd's limit" in found[0]["message"] and "still runs it" in found[0]["message"], found




def _doctor(root: Path) -> str:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from staticpodd import cli

    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        cli.main(["doctor", "--root", str(root)])
    return out.getvalue()


def test_doctor_takes_the_findings_the_daemon_kept_for_the_directory_as_it_is(tmp_path, run_daemon,
                                                                               decoded_sizes) -> None:
    from staticpodd.layout import Layout
    from staticpodd.validate import Options, validate_directory

    root = make_root(tmp_path)
    mdir = root / "etc/kubernetes/manifests"
    big = mdir / "big.yaml"
    big.write_bytes(big_pod(1_500_000))
    os.chmod(big, 0o600)
    d = run_daemon(root)
    d.wait_ready(60)
    wait_until(lambda: _problems(d), 60, 0.2, what="the daemon's finding on big.yaml")
    d.stop()
    report = _doctor(root)
    assert not [s for s in decoded_sizes if s >= 1_500_000], decoded_sizes  # not decoded again
    judged = validate_directory(mdir, Options())
    assert judged and all(f.format() in report for f in judged), report
    # a version store another user could have written: what it keeps is not taken
    db = Layout.build(root).db_path
    mode = db.stat().st_mode
    os.chmod(db, 0o666)
    report = _doctor(root)
    assert [s for s in decoded_sizes if s >= 1_500_000], decoded_sizes
    assert "untrusted-path" in report, report
    os.chmod(db, mode)
    decoded_sizes.clear()
    assert _doctor(root) and not [s for s in decoded_sizes if s >= 1_500_000], decoded_sizes
    # the directory moved since (a chmod): the kept findings are not its findings any more
    os.chmod(big, 0o644)
    report = _doctor(root)
    assert [s for s in decoded_sizes if s >= 1_500_000], decoded_sizes
    assert "loose-permissions" in report and "big.yaml" in report


@pytest.fixture
def decoded_sizes(monkeypatch):
    """The size of every input this process decodes (spd_testlib.count_decodes)."""
    return count_decodes(monkeypatch)

