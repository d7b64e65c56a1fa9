"""No one in: a local user never gets root's hand through a file staticpodd reads back.

Every file or directory read back with authority (the configuration and its cache, the parked
copies and their directory, the version store) is created with explicit modes whatever the umask,
and refused when another user owns it or could have written it. Tested with the real user
``nobody`` (util-linux ``runuser``); staticpodctl runs as root, as on a node.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from faultlib import REPO, assert_no_traceback, ctl_env

NOBODY = 65534


def _as_nobody(*cmd: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("runuser") is None:
        pytest.fail("runuser (util-linux, .ci/apt-packages.txt) is needed")
    return subprocess.run(["runuser", "-u", "nobody", "--", *cmd], capture_output=True, text=True, timeout=30)


def _ctl(root, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    def pre() -> None:
        os.umask(umask)

    return subprocess.run([sys.executable, "-m", "staticpodd.cli", *args, "--root", str(root)], env=ctl_env(),
                          capture_output=True, text=True, timeout=60, cwd=str(REPO), preexec_fn=pre)


def _config(root, text: str = "lock_timeout: 20\n", mode: int = 0o644):
    conf = root / "etc/staticpodd/staticpodd.yaml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(text)
    os.chmod(conf, mode)
    return conf


def test_the_config_cache_is_0600_under_umask_000_and_a_forged_one_runs_nothing(kubeadm, tmp_path) -> None:
    # Found by testers: root ran staticpodctl under umask 000, a user set wait.crictl in the cache,
    # and root's `park --wait` ran the user's program as uid 0.
    root = kubeadm.root
    _config(root)
    assert _ctl(root, "status", umask=0).returncode == 0
    cache = root / "run/staticpodd/config-checked.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600, oct(cache.stat().st_mode)
    assert not stat.S_IMODE((root / "run/staticpodd").stat().st_mode) & 0o022
    # a user who could write the cache sets a program of theirs as crictl
    marker = tmp_path / "ran-as-root"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    evil.chmod(0o755)
    forged = json.loads(cache.read_text())
    forged["config"].setdefault("wait", {})["crictl"] = str(evil)
    cache.write_text(json.dumps(forged))
    os.chown(cache, NOBODY, NOBODY)
    os.chmod(cache, 0o666)
    p = _ctl(root, "park", "kube-scheduler", "--wait=2s")
    assert_no_traceback(p.stderr)
    assert not marker.exists(), "root ran a program named in a cache another user could write"


def test_a_configuration_another_user_owns_or_may_write_is_refused(kubeadm) -> None:
    root = kubeadm.root
    conf = _config(root, mode=0o666)
    p = subprocess.run([sys.executable, "-m", "staticpodd.daemon", "--check-config", "--root", str(root)],
                       env=ctl_env(), capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert p.returncode == 78 and "writable by every user" in p.stderr, p.stderr
    os.chmod(conf, 0o644)
    os.chown(conf, NOBODY, NOBODY)
    p = _ctl(root, "apply", str(kubeadm.manifests / "kube-scheduler.yaml"))
    assert p.returncode != 0 and "owned by uid 65534" in p.stderr, p.stderr
    assert_no_traceback(p.stderr)


def test_a_parked_copy_swapped_through_an_open_directory_is_never_started(kubeadm) -> None:
    # Found by testers: a 0777 parked directory was used as it was; a user swapped the parked copy
    # for a privileged pod and root's `unpark` started it; doctor said "no problems".
    root = kubeadm.root
    assert _ctl(root, "park", "kube-scheduler").returncode == 0
    parked_dir = kubeadm.manifests / ".staticpodd/parked"
    for d in (parked_dir, parked_dir.parent):  # left open, as the testers found them
        os.chmod(d, 0o777)
    for d in kubeadm.manifests.parents:  # and the way there (pytest's tmp_path is 0700)
        if str(d) == "/tmp":
            break
        os.chmod(d, os.stat(d).st_mode | 0o011)
    doctor = _ctl(root, "doctor", "--json")
    codes = {p["code"] for p in json.loads(doctor.stdout)["problems"]}
    assert "writable-by-others" in codes, doctor.stdout
    evil = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-scheduler\n  namespace: kube-system\nspec:\n" \
           b"  hostPID: true\n  containers:\n  - name: x\n    image: busybox\n    securityContext:\n      privileged: true\n"
    target = parked_dir / "kube-scheduler.yaml"
    r = _as_nobody("/usr/bin/python3", "-c", f"import os; p={str(target)!r}; os.unlink(p); open(p, 'wb').write({evil!r})")
    assert r.returncode == 0, r.stderr
    p = _ctl(root, "unpark", "kube-scheduler")
    assert p.returncode != 0 and "another user could have written it" in p.stderr, p.stderr
    assert not (kubeadm.manifests / "kube-scheduler.yaml").exists()
    assert not stat.S_IMODE(parked_dir.stat().st_mode) & 0o077  # ours: tightened


def test_a_private_directory_another_user_owns_or_a_symlinked_one_is_refused(kubeadm, tmp_path) -> None:
    root = kubeadm.root
    assert _ctl(root, "park", "kube-scheduler").returncode == 0
    assert _ctl(root, "unpark", "kube-scheduler").returncode == 0
    quarantine = kubeadm.manifests / ".staticpodd/quarantine"
    quarantine.rmdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    quarantine.symlink_to(outside)  # would lead quarantined files out of the manifest directory
    p = _ctl(root, "park", "kube-scheduler")
    assert p.returncode != 0 and "is a symlink" in p.stderr, p.stderr
    assert list(outside.iterdir()) == []
    quarantine.unlink()
    quarantine.mkdir()
    os.chown(quarantine, NOBODY, NOBODY)
    p = _ctl(root, "park", "kube-scheduler")
    assert p.returncode != 0 and "owned by uid 65534" in p.stderr, p.stderr
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_a_world_readable_version_store_is_reported_and_tightened(kubeadm) -> None:
    root = kubeadm.root
    assert _ctl(root, "park", "kube-scheduler").returncode == 0
    assert _ctl(root, "unpark", "kube-scheduler").returncode == 0
    db = root / "var/lib/staticpodd/versions.sqlite3"
    os.chmod(db, 0o644)
    doctor = _ctl(root, "doctor", "--json")
    codes = {p["code"] for p in json.loads(doctor.stdout)["problems"]}
    assert "store-readable" in codes, doctor.stdout
    assert _ctl(root, "park", "kube-scheduler").returncode == 0
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
