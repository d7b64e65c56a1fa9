"""Ansible contracts, with the real ansible-core against localhost (connection: local) on a
sandbox --root. Assertions are on the playbook's JSON result (tests/cm/ansible/callback_plugins)
and on the manifest directory itself (bytes, inode, mtime: what the kubelet reacts to).

Nothing is mocked; there is no kubelet here, and none is needed: the contract is what lands in
the directory.
"""

from __future__ import annotations

import json
import os

from staticpodd.manifest.cmpatterns import ANSIBLE_BACKUP, identify

APPLY = "apply kube-scheduler"
SHOW_DIFF = "what staticpodctl would change"
COPY = "kube-scheduler manifest"


def _apply_vars(sandbox, source):
    return {"source": str(source), "staticpodctl_args": ["--root", str(sandbox.root), "--reason", "ansible test"]}


# ---- Recipe A: copy/template with validate: staticpodctl validate %s ---------------------------


def test_copy_validate_writes_a_valid_manifest(sandbox, run_playbook, scheduler):
    good, _, _ = scheduler
    run = run_playbook("copy_validate.yml", {"source": str(good), "manifest_dir": str(sandbox.manifest_dir)})
    assert run.rc == 0, run.out
    assert run.task(COPY)["status"] == "changed"
    assert sandbox.live().read_bytes() == good.read_bytes()
    assert sorted(os.listdir(sandbox.manifest_dir)) == ["kube-scheduler.yaml"]  # no temp, no backup
    again = run_playbook("copy_validate.yml", {"source": str(good), "manifest_dir": str(sandbox.manifest_dir)})
    assert again.task(COPY)["status"] == "ok"


def test_copy_validate_refuses_an_invalid_manifest_and_leaves_the_live_one_untouched(sandbox, run_playbook, scheduler):
    good, _, invalid = scheduler
    extra = {"manifest_dir": str(sandbox.manifest_dir)}
    assert run_playbook("copy_validate.yml", {"source": str(good), **extra}).rc == 0
    before = sandbox.snapshot()

    run = run_playbook("copy_validate.yml", {"source": str(invalid), **extra})

    assert run.rc != 0
    task = run.task(COPY)
    assert task["status"] == "failed"
    assert task["result"]["msg"].startswith("failed to validate")
    # staticpodctl's own finding reaches the operator through Ansible's result
    assert "error[yaml-tab]" in task["result"]["stdout"]
    assert ":" in task["result"]["stdout"].split("error[yaml-tab]")[0]  # file:line:col before it
    assert run.stats["failures"] == 1 and run.stats["changed"] == 0
    assert sandbox.snapshot() == before  # same names, bytes, inode and mtime


def test_copy_with_backup_leaves_a_stray_that_validate_and_cmpatterns_name(sandbox, run_playbook, scheduler):
    """The unsafe pattern the README warns about, produced by the real Ansible."""
    good, changed, _ = scheduler
    extra = {"manifest_dir": str(sandbox.manifest_dir)}
    assert run_playbook("backup_unsafe.yml", {"source": str(good), **extra}).rc == 0
    run = run_playbook("backup_unsafe.yml", {"source": str(changed), **extra})
    assert run.rc == 0
    backup = os.path.basename(run.task("kube-scheduler manifest with backup")["result"]["backup_file"])
    assert sorted(os.listdir(sandbox.manifest_dir)) == sorted(["kube-scheduler.yaml", backup])

    found = identify(backup)
    assert found is not None and found.pattern is ANSIBLE_BACKUP and found.target == "kube-scheduler.yaml"

    res = sandbox.ctl("validate", str(sandbox.manifest_dir), "--json", check=False)
    report = json.loads(res.stdout)
    by_file: dict[str, set[str]] = {}
    for f in _findings(report):
        by_file.setdefault(os.path.basename(f["path"]), set()).add(f["code"])
    assert "stray" in by_file.get(backup, set()), report
    # the old bytes in the backup define the same pod and sort last: the kubelet would run them.
    # The duplicate-pod error goes on the stray that causes it, not on the good file.
    assert "duplicate-pod" in by_file.get(backup, set()), report
    assert "duplicate-pod" not in by_file.get("kube-scheduler.yaml", set()), report


def _findings(report):
    if "findings" in report:
        return report["findings"]
    return [f for r in report.get("results", []) for f in r.get("findings", [])]


# ---- Recipe B: command: staticpodctl apply --detailed-exitcode ---------------------------------


def test_apply_reports_changed_then_ok_and_the_second_run_touches_nothing(sandbox, run_playbook, scheduler):
    good, _, _ = scheduler
    first = run_playbook("apply.yml", _apply_vars(sandbox, good))
    assert first.rc == 0, first.out
    t = first.task(APPLY)
    assert t["status"] == "changed"
    assert t["result"]["rc"] == 2
    reply = json.loads(t["result"]["stdout"])
    assert reply["changed"] is True and reply["version"] == 1 and reply["component"] == "kube-scheduler"
    assert first.stats["changed"] == 1
    assert sandbox.live().read_bytes() == good.read_bytes()
    after_first = sandbox.snapshot()

    second = run_playbook("apply.yml", _apply_vars(sandbox, good))
    assert second.rc == 0
    t2 = second.task(APPLY)
    assert t2["status"] == "ok" and t2["result"]["rc"] == 0
    assert json.loads(t2["result"]["stdout"])["changed"] is False
    assert second.stats["changed"] == 0 and second.stats["failures"] == 0
    assert sandbox.snapshot() == after_first  # no rename, no chmod, no mtime change

    history = json.loads(sandbox.ctl("history", "kube-scheduler", "--json").stdout)
    assert [v["seq"] for v in history["versions"]] == [1]
    assert history["versions"][0]["reason"] == "ansible test"


def test_check_diff_shows_the_diff_and_changes_nothing(sandbox, run_playbook, scheduler):
    good, changed, _ = scheduler
    assert run_playbook("apply.yml", _apply_vars(sandbox, good)).rc == 0
    before = sandbox.snapshot()

    run = run_playbook("apply.yml", _apply_vars(sandbox, changed), check=True, diff=True)

    assert run.rc == 0, run.out
    t = run.task(APPLY)
    assert t["status"] == "changed"  # "would change", as Ansible reports in check mode
    assert "--check" in t["result"]["cmd"] and "--diff" in t["result"]["cmd"]
    reply = json.loads(t["result"]["stdout"])
    assert reply["check"] is True and reply["changed"] is True
    shown = run.task(SHOW_DIFF)["result"]["msg"]
    assert "-    - --leader-elect=true" in shown and "+    - --leader-elect=false" in shown
    assert sandbox.snapshot() == before
    history = json.loads(sandbox.ctl("history", "kube-scheduler", "--json").stdout)
    assert len(history["versions"]) == 1

    # without --check the same change lands, and the diff task is not run (not in diff mode)
    real = run_playbook("apply.yml", _apply_vars(sandbox, changed))
    assert real.task(APPLY)["status"] == "changed"
    assert real.task(SHOW_DIFF)["status"] == "skipped"
    assert sandbox.live().read_bytes() == changed.read_bytes()


def test_check_mode_with_nothing_to_change_is_ok(sandbox, run_playbook, scheduler):
    good, _, _ = scheduler
    assert run_playbook("apply.yml", _apply_vars(sandbox, good)).rc == 0
    run = run_playbook("apply.yml", _apply_vars(sandbox, good), check=True, diff=True)
    assert run.task(APPLY)["status"] == "ok"
    assert run.task(SHOW_DIFF)["status"] == "skipped"


def test_apply_of_an_invalid_manifest_fails_the_task_and_changes_nothing(sandbox, run_playbook, scheduler):
    good, _, invalid = scheduler
    assert run_playbook("apply.yml", _apply_vars(sandbox, good)).rc == 0
    before = sandbox.snapshot()
    run = run_playbook("apply.yml", _apply_vars(sandbox, invalid))
    assert run.rc != 0
    t = run.task(APPLY)
    assert t["status"] == "failed" and t["result"]["rc"] == 1
    reply = json.loads(t["result"]["stdout"])
    assert reply["ok"] is False and reply["error"]["code"] == "invalid-manifest"
    assert sandbox.snapshot() == before


def test_failing_pre_apply_hook_fails_the_task_naming_the_hook(sandbox, run_playbook, scheduler):
    good, changed, _ = scheduler
    assert run_playbook("apply.yml", _apply_vars(sandbox, good)).rc == 0
    hooks = sandbox.root / "etc" / "staticpodd" / "hooks.d"
    (hooks / "pre-apply.d").mkdir(parents=True)
    for d in (hooks.parent, hooks, hooks / "pre-apply.d"):
        os.chmod(d, 0o755)
    hook = hooks / "pre-apply.d" / "10-change-window"
    hook.write_text('#!/bin/sh\necho "no change window open for $STATICPODD_COMPONENT" >&2\nexit 4\n')
    os.chmod(hook, 0o755)
    before = sandbox.snapshot()

    run = run_playbook("apply.yml", _apply_vars(sandbox, changed))

    t = run.task(APPLY)
    assert t["status"] == "failed" and t["result"]["rc"] == 1
    err = json.loads(t["result"]["stdout"])["error"]
    assert err["code"] == "hook-failed"
    assert "10-change-window" in err["message"] and "status 4" in err["message"]
    assert "no change window open for kube-scheduler" in err["message"]
    assert sandbox.snapshot() == before


def test_apply_to_a_parked_component_updates_the_parked_copy_and_keeps_it_parked(sandbox, run_playbook, scheduler):
    good, changed, _ = scheduler
    assert run_playbook("apply.yml", _apply_vars(sandbox, good)).rc == 0
    assert sandbox.ctl("park", "kube-scheduler", "--reason", "etcd defrag", "--json").returncode == 0
    assert not sandbox.live().exists()

    run = run_playbook("apply.yml", _apply_vars(sandbox, changed))

    t = run.task(APPLY)
    assert t["status"] == "changed", t
    reply = json.loads(t["result"]["stdout"])
    assert reply["location"] == "parked" and "stays parked" in reply["msg"]
    assert not sandbox.live().exists()  # the kubelet still sees no kube-scheduler
    assert run_playbook("apply.yml", _apply_vars(sandbox, changed)).task(APPLY)["status"] == "ok"

    unpark = _apply_vars(sandbox, changed)
    unpark["staticpodctl_args"] = [*unpark["staticpodctl_args"], "--unpark"]
    run = run_playbook("apply.yml", unpark)
    assert run.task(APPLY)["status"] == "changed"
    assert sandbox.live().read_bytes() == changed.read_bytes()
