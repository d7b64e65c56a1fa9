"""hooks.d: real executables in a sandbox --root, real process groups, real journald.

Nothing is mocked: hooks are /bin/sh scripts, ownership and modes are real (the tests run as
root; ``trusted_uid`` lets a test demand a different owner to see a refusal).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from staticpodd.engine.hooks import HOOK_ENV_KEYS, SAFE_PATH, hook_env, run_hooks, skip_reason
from staticpodd.errors import HookFailed
from staticpodd.layout import Layout

ENV_DUMP = 'env | grep -E "^(STATICPODD_|PATH=|LANG=|HOME=|SECRET_FROM_CALLER=)" | sort > {out}'


def _env(layout: Layout, **kw: object) -> dict[str, str]:
    args: dict = {
        "component": "kube-scheduler",
        "file_name": "kube-scheduler.yaml",
        "version": 7,
        "digest": "ab" * 32,
        "actor": "alice",
        "reason": "maintenance window",
    }
    args.update(kw)
    return hook_env(layout, **args)


def _read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_hooks_run_in_name_order_with_only_the_documented_environment(
    layout, make_hook, journal, tmp_path, monkeypatch
):
    monkeypatch.setenv("SECRET_FROM_CALLER", "must-not-leak")
    order = tmp_path / "order"
    make_hook("pre", "apply", "20-second.sh", f"echo 20 >> {order}")
    make_hook("pre", "apply", "10-first", f"echo 10 >> {order}; " + ENV_DUMP.format(out=tmp_path / "env"))
    make_hook("pre", "apply", "9-sorts-after-20", f"echo 9 >> {order}")  # byte order, as run-parts

    results = run_hooks(layout, "pre", "apply", _env(layout), timeout=30, journal=journal)

    assert [r.name for r in results] == ["10-first", "20-second.sh", "9-sorts-after-20"]
    assert all(r.status == "ok" and r.returncode == 0 for r in results)
    assert order.read_text().split() == ["10", "20", "9"]
    env = _read_env(tmp_path / "env")
    assert env == {
        "LANG": "C.UTF-8",
        "PATH": SAFE_PATH,
        "STATICPODD_ACTOR": "alice",
        "STATICPODD_COMPONENT": "kube-scheduler",
        "STATICPODD_DIGEST": "ab" * 32,
        "STATICPODD_FILE": str(layout.manifest_dir / "kube-scheduler.yaml"),
        "STATICPODD_MANIFEST_DIR": str(layout.manifest_dir),
        "STATICPODD_PHASE": "pre",
        "STATICPODD_REASON": "maintenance window",
        "STATICPODD_ROOT": str(layout.root),
        "STATICPODD_VERB": "apply",
        "STATICPODD_VERSION": "7",
    }
    assert set(HOOK_ENV_KEYS) == {k for k in env if k.startswith("STATICPODD_")}


def test_unknown_values_are_empty_strings_not_missing(layout, make_hook, journal, tmp_path):
    make_hook("post", "park", "10-dump", ENV_DUMP.format(out=tmp_path / "env"))
    run_hooks(
        layout,
        "post",
        "park",
        _env(layout, version=None, digest=None, reason=None),
        timeout=30,
        journal=journal,
    )
    env = _read_env(tmp_path / "env")
    assert (
        env["STATICPODD_VERSION"] == "" and env["STATICPODD_DIGEST"] == "" and env["STATICPODD_REASON"] == ""
    )
    assert env["STATICPODD_VERB"] == "park" and env["STATICPODD_PHASE"] == "post"


def test_run_parts_leftovers_and_non_executables_are_skipped_not_run(layout, make_hook, journal, tmp_path):
    ran = tmp_path / "ran"
    names = [
        ".hidden",
        "10-x~",
        "10-x.dpkg-old",
        "10-x.dpkg-dist",
        "10-x.ucf-dist",
        "10-x.rpmnew",
        "10-x.rpmsave",
        "#10-x#",
        "10-x.swp",
    ]
    for name in names:
        make_hook("pre", "unpark", name, f"echo {name!r} >> {ran}")
    make_hook("pre", "unpark", "30-disabled", f"echo disabled >> {ran}", mode=0o644)
    (layout.hooks_dir / "pre-unpark.d" / "40-subdir").mkdir()
    (layout.hooks_dir / "pre-unpark.d" / "50-dangling").symlink_to(tmp_path / "nowhere")
    make_hook("pre", "unpark", "20-real.sh", f"echo real >> {ran}")

    results = run_hooks(layout, "pre", "unpark", _env(layout), timeout=30, journal=journal)

    assert ran.read_text().split() == ["real"]
    by_name = {r.name: r for r in results}
    assert by_name["20-real.sh"].status == "ok"
    for name in [*names, "30-disabled", "40-subdir", "50-dangling"]:
        assert by_name[name].status == "skipped", name
        assert by_name[name].ok
    assert by_name["30-disabled"].reason == "not executable"
    assert by_name["40-subdir"].reason == "not a regular file"


@pytest.mark.parametrize(
    "name, skipped",
    [
        (".x", True),
        ("x~", True),
        ("x.dpkg-new", True),
        ("x.rpmorig", True),
        ("#x#", True),
        ("10-drain.sh", False),
        ("10_drain", False),
        ("rpm-check", False),
        ("x.dpkg", False),
    ],
)
def test_skip_rules(name, skipped):
    assert (skip_reason(name) is not None) is skipped


def test_symlinked_hook_runs_when_its_target_is_trusted(layout, make_hook, journal, tmp_path):
    target = tmp_path / "shared-hook"
    target.write_text(f"#!/bin/sh\necho linked > {tmp_path / 'out'}\n")
    os.chmod(target, 0o755)
    make_hook("post", "apply", "00-placeholder", "true")
    (layout.hooks_dir / "post-apply.d" / "10-linked").symlink_to(target)
    results = run_hooks(layout, "post", "apply", _env(layout), timeout=30, journal=journal)
    assert [r.status for r in results] == ["ok", "ok"]
    assert (tmp_path / "out").read_text() == "linked\n"


def test_no_hook_directory_means_no_hooks(layout, journal):
    assert run_hooks(layout, "pre", "rollback", _env(layout), timeout=30, journal=journal) == []


def test_failing_pre_hook_raises_naming_hook_status_and_stderr_and_stops(
    layout, make_hook, journal, tmp_path, journal_entries
):
    make_hook("pre", "apply", "10-ok", f"echo 10 >> {tmp_path / 'ran'}")
    make_hook(
        "pre",
        "apply",
        "20-quorum",
        "echo 'checking etcd quorum' >&2; echo 'quorum lost: 1/3 members healthy' >&2; exit 3",
    )
    make_hook("pre", "apply", "30-never", f"echo 30 >> {tmp_path / 'ran'}")

    with pytest.raises(HookFailed) as info:
        run_hooks(layout, "pre", "apply", _env(layout), timeout=30, journal=journal)

    err = info.value
    assert err.code == "hook-failed"
    assert err.path == str(layout.hooks_dir / "pre-apply.d" / "20-quorum")
    assert "pre-apply hook 20-quorum exited with status 3" in err.message
    assert "quorum lost: 1/3 members healthy" in err.message
    assert "checking etcd quorum" in err.message
    assert err.details["hook"]["returncode"] == 3
    assert err.details["hook"]["stderr_tail"][-1] == "quorum lost: 1/3 members healthy"
    assert (tmp_path / "ran").read_text().split() == ["10"]  # 30-never did not run

    entries = journal_entries(event="HOOK_FAILED")
    assert len(entries) == 1
    e = entries[0]
    assert e["MESSAGE_ID"] == "6267c9d140be4b8ba5eb7473da0a4c66"
    assert e["PRIORITY"] == "3"
    assert e["HOOK"].endswith("/pre-apply.d/20-quorum")
    assert e["EXIT_STATUS"] == "3"
    assert e["COMPONENT"] == "kube-scheduler" and e["ACTOR"] == "alice" and e["VERSION"] == "7"
    assert "quorum lost" in e["HOOK_STDERR"]


def test_stderr_tail_keeps_only_the_last_lines(layout, make_hook, journal):
    make_hook("pre", "park", "10-noisy", "for i in $(seq 1 500); do echo line$i >&2; done; exit 1")
    with pytest.raises(HookFailed) as info:
        run_hooks(layout, "pre", "park", _env(layout), timeout=30, journal=journal)
    assert info.value.details["hook"]["stderr_tail"] == [f"line{i}" for i in range(496, 501)]
    assert "line495" not in info.value.message and "line500" in info.value.message


def test_failing_post_hooks_are_logged_and_returned_and_the_rest_still_run(
    layout, make_hook, journal, tmp_path, journal_entries
):
    make_hook("post", "rollback", "10-fails", "echo 'pager unreachable' >&2; exit 7")
    make_hook("post", "rollback", "20-killed", "kill -KILL $$")
    make_hook("post", "rollback", "30-ok", f"echo 30 >> {tmp_path / 'ran'}")

    results = run_hooks(layout, "post", "rollback", _env(layout), timeout=30, journal=journal)

    assert [(r.name, r.status) for r in results] == [
        ("10-fails", "failed"),
        ("20-killed", "signaled"),
        ("30-ok", "ok"),
    ]
    assert results[0].returncode == 7 and results[0].stderr_tail == ("pager unreachable",)
    assert results[1].signal == 9 and "SIGKILL" in results[1].describe()
    assert (tmp_path / "ran").read_text() == "30\n"
    entries = journal_entries(want=2, event="HOOK_FAILED")
    assert sorted(e["HOOK_STATUS"] for e in entries) == ["failed", "signaled"]
    assert {e["PRIORITY"] for e in entries} == {"4"}


def test_signal_ends_a_pre_hook_as_failure(layout, make_hook, journal):
    make_hook("pre", "unpark", "10-segv", "kill -SEGV $$")
    with pytest.raises(HookFailed, match="was killed by SIGSEGV"):
        run_hooks(layout, "pre", "unpark", _env(layout), timeout=30, journal=journal)


def test_timeout_kills_the_whole_process_group(layout, make_hook, journal, tmp_path, gone):
    pids = tmp_path / "pids"
    # A child that ignores SIGTERM: only the group SIGKILL after kill_grace ends it.
    make_hook(
        "pre",
        "apply",
        "10-hangs",
        f"sh -c 'trap \"\" TERM; echo $$ >> {pids}; exec sleep 300' & "
        f"echo $$ >> {pids}; echo 'waiting for lock' >&2; sleep 300",
    )
    with pytest.raises(HookFailed) as info:
        run_hooks(layout, "pre", "apply", _env(layout), timeout=0.5, journal=journal, kill_grace=0.2)
    assert info.value.details["hook"]["status"] == "timeout"
    assert "timed out after" in info.value.message
    assert "waiting for lock" in info.value.message
    recorded = [int(p) for p in pids.read_text().split()]
    assert len(recorded) == 2
    for pid in recorded:
        assert gone(pid), f"process {pid} of the hook's group survived the timeout"


def test_background_children_left_by_a_finished_hook_are_killed(layout, make_hook, journal, tmp_path, gone):
    pidfile = tmp_path / "bg"
    make_hook("post", "apply", "10-leaves-child", f"sleep 300 & echo $! > {pidfile}; exit 0")
    results = run_hooks(layout, "post", "apply", _env(layout), timeout=60, journal=journal)
    assert results[0].status == "ok"
    assert gone(int(pidfile.read_text()))


def test_a_file_without_shebang_is_a_failure_that_names_why(layout, make_hook, journal):
    make_hook("pre", "apply", "10-no-shebang", "true", shebang=False)
    with pytest.raises(HookFailed, match="could not be started"):
        run_hooks(layout, "pre", "apply", _env(layout), timeout=30, journal=journal)


@pytest.mark.parametrize("mode, why", [(0o775, "group-writable"), (0o757, "world-writable")])
def test_writable_pre_hook_is_refused_and_nothing_runs(
    layout, make_hook, journal, tmp_path, mode, why, journal_entries
):
    make_hook("pre", "park", "10-fine", f"echo ran >> {tmp_path / 'ran'}")
    bad = make_hook("pre", "park", "20-writable", f"echo ran >> {tmp_path / 'ran'}", mode=mode)
    os.chmod(bad, mode)  # umask-proof
    with pytest.raises(HookFailed) as info:
        run_hooks(layout, "pre", "park", _env(layout), timeout=30, journal=journal)
    assert info.value.details["hook"]["status"] == "refused"
    assert why in info.value.message and "20-writable" in info.value.message
    assert not (tmp_path / "ran").exists(), "fail closed: no pre-hook runs when one is refused"
    assert journal_entries(event="HOOK_FAILED")[0]["HOOK_STATUS"] == "refused"


def test_hook_not_owned_by_the_trusted_uid_is_refused(layout, make_hook, journal, tmp_path):
    hook = make_hook("pre", "apply", "10-x", f"echo ran >> {tmp_path / 'ran'}")
    os.chown(hook, 4242, 4242)
    with pytest.raises(HookFailed, match="owned by uid 4242, not uid 0"):
        run_hooks(layout, "pre", "apply", _env(layout), timeout=30, journal=journal)
    assert not (tmp_path / "ran").exists()


def test_trusted_uid_is_what_the_owner_check_compares_against(layout, make_hook, journal, tmp_path):
    hook = make_hook("post", "apply", "10-x", f"echo ran >> {tmp_path / 'ran'}")
    os.chown(hook, 4242, 4242)
    os.chown(hook.parent, 4242, 4242)
    os.chown(layout.hooks_dir, 4242, 4242)
    results = run_hooks(layout, "post", "apply", _env(layout), timeout=30, journal=journal, trusted_uid=4242)
    assert [r.status for r in results] == ["ok"]
    results = run_hooks(layout, "post", "apply", _env(layout), timeout=30, journal=journal, trusted_uid=0)
    assert [r.status for r in results] == ["refused"]
    assert (tmp_path / "ran").read_text() == "ran\n"


def test_writable_hook_directory_refuses_every_hook(layout, make_hook, journal, tmp_path):
    make_hook("post", "unpark", "10-a", f"echo a >> {tmp_path / 'ran'}")
    make_hook("post", "unpark", "20-b", f"echo b >> {tmp_path / 'ran'}")
    os.chmod(layout.hooks_dir, 0o777)
    results = run_hooks(layout, "post", "unpark", _env(layout), timeout=30, journal=journal)
    assert [r.status for r in results] == ["refused", "refused"]
    assert all(
        "world-writable" in (r.reason or "") and str(layout.hooks_dir) in (r.reason or "") for r in results
    )
    assert not (tmp_path / "ran").exists()


def test_post_refusal_does_not_stop_the_other_post_hooks(layout, make_hook, journal, tmp_path):
    bad = make_hook("post", "park", "10-bad", "true")
    os.chmod(bad, 0o777)
    make_hook("post", "park", "20-good", f"echo good >> {tmp_path / 'ran'}")
    results = run_hooks(layout, "post", "park", _env(layout), timeout=30, journal=journal)
    assert [r.status for r in results] == ["refused", "ok"]
    assert (tmp_path / "ran").read_text() == "good\n"


@pytest.mark.parametrize(
    "phase, verb, env, timeout",
    [
        ("during", "apply", {}, 1),
        ("pre", "edit", {}, 1),
        ("pre", "apply", {"PATH": "/tmp"}, 1),
        ("pre", "apply", {"STATICPODD_REASON": "a\0b"}, 1),
        ("pre", "apply", {}, 0),
    ],
)
def test_programming_errors_are_value_errors(layout, journal, phase, verb, env, timeout):
    with pytest.raises(ValueError):
        run_hooks(layout, phase, verb, env, timeout=timeout, journal=journal)


def test_a_failing_post_hook_is_a_warning_on_stderr_and_in_json_and_the_verb_succeeds(layout, make_hook, corpus):
    """Through staticpodctl (a real process): the park is done, exit 0, but the operator sees it."""
    import subprocess
    import sys

    from spd_testlib import REPO

    (layout.manifest_dir / "kube-scheduler.yaml").write_bytes(
        (corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml").read_bytes())
    make_hook("post", "park", "10-notify", "echo 'pager unreachable' >&2; exit 1")
    make_hook("post", "unpark", "10-notify", "exit 3")

    def ctl(*args):
        env = dict(os.environ, PYTHONPATH=str(REPO))
        return subprocess.run([sys.executable, "-m", "staticpodd.cli", *args, "--root", str(layout.root)],
                              env=env, capture_output=True, text=True, timeout=60)

    r = ctl("park", "kube-scheduler")
    assert r.returncode == 0
    assert "warning[hook-failed]: post-park hook 10-notify exited with status 1: pager unreachable" in r.stderr
    r = ctl("unpark", "kube-scheduler", "--json")
    assert r.returncode == 0
    [w] = json.loads(r.stdout)["warnings"]
    assert w["code"] == "hook-failed" and "post-unpark hook 10-notify exited with status 3" in w["message"]


def test_a_pre_hook_does_not_outlive_a_sigkilled_staticpodctl(layout, make_hook, tmp_path, gone):
    # Found by a newcomer (stop 16): `staticpodctl park` SIGKILLed while its pre-hook ran left the
    # hook (and its children) running for a verb that no longer existed.
    import subprocess
    import sys
    import time

    from spd_testlib import REPO, small_pod

    (layout.manifest_dir / "web.yaml").write_text(small_pod("web"))
    pids = tmp_path / "pids"
    make_hook("pre", "park", "10-slow", f"sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    ctl = subprocess.Popen([sys.executable, "-m", "staticpodd.cli", "park", "web", "--root", str(layout.root)],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (pids.exists() and len(pids.read_text().split()) == 2):
        assert time.monotonic() < deadline, "the pre-hook never started"
        time.sleep(0.05)
    time.sleep(0.3)  # the watcher beside the hook is up
    ctl.kill()
    ctl.wait()
    for pid in (int(p) for p in pids.read_text().split()):
        assert gone(pid), f"process {pid} of the pre-hook outlived staticpodctl"
    assert (layout.manifest_dir / "web.yaml").exists()  # the park never happened


def _ctl_in(layout):
    import subprocess
    import sys

    from spd_testlib import REPO

    def ctl(*args):
        env = dict(os.environ, PYTHONPATH=str(REPO))
        return subprocess.run([sys.executable, "-m", "staticpodd.cli", *args, "--root", str(layout.root)],
                              env=env, capture_output=True, text=True, timeout=60)

    return ctl


def test_a_twin_a_pre_apply_hook_writes_is_refused_and_nothing_changes(layout, make_hook, corpus, tmp_path):
    """A pre-hook is a wait: what was judged before it (no other file defines the pod) is judged
    again after it, so a hook that copies the manifest to a .bak (a second file for the pod, which
    the kubelet would run instead) stops the apply before the rename."""
    live = layout.manifest_dir / "kube-scheduler.yaml"
    live.write_bytes((corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml").read_bytes())
    os.chmod(live, 0o600)
    make_hook("pre", "apply", "10-backup", 'cp "$STATICPODD_MANIFEST_DIR/kube-scheduler.yaml" '
                                           '"$STATICPODD_MANIFEST_DIR/kube-scheduler.yaml.bak"')
    new = tmp_path / "new.yaml"
    new.write_bytes(live.read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false"))
    before = live.read_bytes()
    r = _ctl_in(layout)("apply", str(new), "--as", "kube-scheduler")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "kube-scheduler.yaml.bak" in r.stderr
    assert live.read_bytes() == before


def test_a_twin_a_pre_park_hook_writes_is_refused_and_nothing_is_parked(layout, make_hook, corpus):
    live = layout.manifest_dir / "kube-scheduler.yaml"
    live.write_bytes((corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml").read_bytes())
    os.chmod(live, 0o600)
    make_hook("pre", "park", "10-copy", 'cp "$STATICPODD_MANIFEST_DIR/kube-scheduler.yaml" '
                                        '"$STATICPODD_MANIFEST_DIR/kube-scheduler-copy.yaml"')
    r = _ctl_in(layout)("park", "kube-scheduler")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "kube-scheduler-copy.yaml" in r.stderr
    assert live.exists() and not (layout.manifest_dir / ".staticpodd/parked/kube-scheduler.yaml").exists()


def test_a_twin_a_pre_unpark_hook_writes_is_refused_and_the_park_stands(layout, make_hook, corpus):
    live = layout.manifest_dir / "kube-scheduler.yaml"
    live.write_bytes((corpus / "manifests" / "03-zetaoss-kubeadm-kube-scheduler.yaml").read_bytes())
    os.chmod(live, 0o600)
    ctl = _ctl_in(layout)
    assert ctl("park", "kube-scheduler").returncode == 0
    make_hook("pre", "unpark", "10-copy", 'cp "$STATICPODD_MANIFEST_DIR/.staticpodd/parked/kube-scheduler.yaml" '
                                          '"$STATICPODD_MANIFEST_DIR/ks-copy.yaml"')
    r = ctl("unpark", "kube-scheduler")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "ks-copy.yaml" in r.stderr
    assert not live.exists() and (layout.manifest_dir / ".staticpodd/parked/kube-scheduler.yaml").exists()
