"""Puppet contracts with the real Puppet (Debian's ``puppet`` package), ``puppet apply`` on a
sandbox --root: ``file { validate_cmd => 'staticpodctl validate %' }`` and an ``exec`` running
``staticpodctl apply`` guarded by ``unless => 'staticpodctl apply --check --detailed-exitcode'``.
Skipped when ``puppet`` is not installed (.ci/apt-packages.txt installs it in CI).

Assertions use Puppet's own ``--detailed-exitcode`` (0 no change, 2 changes, 4 failures,
6 both) and the directory itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from staticpodd.manifest.cmpatterns import PUPPET_BACKUP, PUPPET_TEMPFILE, identify

HERE = Path(__file__).resolve().parent
PUPPET = shutil.which("puppet")

pytestmark = pytest.mark.skipif(PUPPET is None, reason="puppet is not installed (apt-get install puppet)")


@pytest.fixture
def puppet_apply(sandbox, tmp_path):
    state = tmp_path / "puppet"

    def run(manifest: str, facts: dict[str, str], *, noop: bool = False) -> subprocess.CompletedProcess[str]:
        args = [PUPPET, "apply", "--detailed-exitcode", "--color=false"]
        for d in ("confdir", "vardir", "codedir", "logdir", "rundir"):
            args += [f"--{d}", str(state / d)]
        if noop:
            args.append("--noop")
        env = dict(sandbox.env)
        env.update({f"FACTER_{k}": v for k, v in facts.items()})
        return subprocess.run(
            [*args, str(HERE / "puppet" / manifest)],
            env=env,
            capture_output=True,
            text=True,
            cwd=sandbox.work,
            timeout=300,
        )

    return run


def _facts(sandbox, source):
    return {"sp_root": str(sandbox.root), "sp_source": str(source)}


def _desired(sandbox) -> Path:
    return sandbox.root / "etc" / "staticpodd" / "desired"


def test_first_run_changes_second_run_changes_nothing(sandbox, puppet_apply, scheduler):
    good, _, _ = scheduler
    first = puppet_apply("staticpod.pp", _facts(sandbox, good))
    assert first.returncode == 2, first.stdout + first.stderr
    assert "Exec[staticpodctl apply kube-scheduler]/returns: executed successfully" in first.stdout
    assert sandbox.live().read_bytes() == good.read_bytes()
    before = sandbox.snapshot()

    second = puppet_apply("staticpod.pp", _facts(sandbox, good))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Exec[" not in second.stdout
    assert sandbox.snapshot() == before
    # Puppet's temp files were made beside the desired copy, not in the kubelet's directory
    assert sorted(os.listdir(sandbox.manifest_dir)) == [".staticpodd", "kube-scheduler.yaml"]
    assert os.listdir(_desired(sandbox)) == ["kube-scheduler.yaml"]
    history = sandbox.ctl("history", "kube-scheduler", "--json").stdout
    assert '"reason":"puppet"' in history.replace(" ", "")


def test_validate_cmd_refuses_an_invalid_manifest_and_nothing_is_applied(sandbox, puppet_apply, scheduler):
    good, _, invalid = scheduler
    assert puppet_apply("staticpod.pp", _facts(sandbox, good)).returncode == 2
    before = sandbox.snapshot()
    desired_before = (_desired(sandbox) / "kube-scheduler.yaml").read_bytes()

    run = puppet_apply("staticpod.pp", _facts(sandbox, invalid))

    assert run.returncode & 4, run.stdout + run.stderr  # failures
    assert "error[yaml-tab]" in run.stdout + run.stderr
    assert "Skipping because of failed dependencies" in run.stdout + run.stderr
    assert sandbox.snapshot() == before
    assert (_desired(sandbox) / "kube-scheduler.yaml").read_bytes() == desired_before


def test_a_hand_edit_of_the_live_file_is_put_back_on_the_next_run(sandbox, puppet_apply, scheduler):
    good, changed, _ = scheduler
    assert puppet_apply("staticpod.pp", _facts(sandbox, good)).returncode == 2
    shutil.copyfile(changed, sandbox.live())  # someone edits the live manifest by hand

    run = puppet_apply("staticpod.pp", _facts(sandbox, good))

    assert run.returncode == 2, run.stdout + run.stderr
    assert "Exec[staticpodctl apply kube-scheduler]/returns: executed successfully" in run.stdout
    assert sandbox.live().read_bytes() == good.read_bytes()


def test_noop_reports_the_pending_change_and_changes_nothing(sandbox, puppet_apply, scheduler):
    good, changed, _ = scheduler
    assert puppet_apply("staticpod.pp", _facts(sandbox, good)).returncode == 2
    before = sandbox.snapshot()
    run = puppet_apply("staticpod.pp", _facts(sandbox, changed), noop=True)
    assert "(noop)" in run.stdout
    assert sandbox.snapshot() == before


def test_writing_into_the_manifest_directory_puts_puppets_temp_file_there(sandbox, puppet_apply, scheduler, tmp_path):
    """Why the README says: never point a Puppet file resource at the kubelet's directory."""
    good, changed, _ = scheduler
    listing = tmp_path / "listing"
    probe = tmp_path / "probe.sh"
    probe.write_text(f'#!/bin/sh\nls -a "$(dirname "$1")" > {listing}\nexec staticpodctl validate "$1"\n')
    os.chmod(probe, 0o755)
    facts = {"sp_manifest_dir": str(sandbox.manifest_dir), "sp_probe": str(probe), "sp_backup": ".puppet-bak"}

    assert puppet_apply("unsafe_direct.pp", {**facts, "sp_source": str(good)}).returncode == 2
    seen = [n for n in listing.read_text().split() if n not in (".", "..")]
    temp = [n for n in seen if n != "kube-scheduler.yaml"]
    assert len(temp) == 1, seen
    found = identify(temp[0])
    assert found is not None and found.pattern is PUPPET_TEMPFILE and found.target == "kube-scheduler.yaml"

    assert puppet_apply("unsafe_direct.pp", {**facts, "sp_source": str(changed)}).returncode == 2
    left = sorted(os.listdir(sandbox.manifest_dir))
    assert left == ["kube-scheduler.yaml", "kube-scheduler.yaml.puppet-bak"]
    assert identify("kube-scheduler.yaml.puppet-bak").pattern is PUPPET_BACKUP
    report = json.loads(sandbox.ctl("validate", str(sandbox.manifest_dir), "--json", check=False).stdout)
    stray = {os.path.basename(f["path"]) for f in report["findings"] if f["code"] == "stray"}
    assert "kube-scheduler.yaml.puppet-bak" in stray
