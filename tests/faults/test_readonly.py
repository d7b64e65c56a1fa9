"""Read-only filesystems and permission errors (EROFS, EACCES).

A fault seen before: with a read-only version store even ``status`` and ``history`` failed. Now the
store is opened read-only (``mode=ro``, else ``immutable=1``) when it cannot be written: the read
verbs (status, history, show, diff, validate) work, the write verbs give a clean ``store-error``
saying it is read-only, and nothing changes. A read-only manifest directory gives a clean
``fs-error`` (EROFS) from every write verb. (What ``doctor`` reports about it belongs to doctor.)

Real tmpfs mounts remounted read-only (``mount -o remount,ro``), real processes; the EACCES
cases run staticpodctl as the real unprivileged user ``nobody``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultlib import REPO, Tmpfs, assert_no_traceback, recorded, run_ctl, sha
from spd_testlib import small_pod

MDIR = "etc/kubernetes/manifests"


def _populate(root: Path, tmp: Path) -> None:
    (root / MDIR / "web.yaml").write_text(small_pod("web"))
    (root / MDIR / "db.yaml").write_text(small_pod("db"))
    assert run_ctl(root, "recover").returncode == 0
    new = tmp / "web.yaml"
    new.write_text(small_pod("web", image="nginx:1.28"))
    assert run_ctl(root, "apply", str(new)).returncode == 0, "web@2"
    assert run_ctl(root, "park", "db").returncode == 0


def _state(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root / MDIR):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def ro_store(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    (root / MDIR).mkdir(parents=True)
    fs = Tmpfs(root / "var/lib/staticpodd", 4 * 1024 * 1024)
    os.chmod(fs.path, 0o700)
    try:
        _populate(root, tmp_path)
        fs.remount("ro")
        yield root
    finally:
        fs.close()


def test_read_verbs_work_from_a_read_only_store(ro_store: Path) -> None:
    root = ro_store
    versions = recorded(root, "web")
    st = run_ctl(root, "status", "--json")
    assert st.returncode == 0, st.stderr
    comps = {c["component"]: c for c in json.loads(st.stdout)["components"]}
    assert comps["web"]["version"] == 2 and comps["db"]["state"] == "parked"
    hist = run_ctl(root, "history", "web", "--json")
    assert hist.returncode == 0, hist.stderr
    assert [v["seq"] for v in json.loads(hist.stdout)["versions"]] == [v[1] for v in versions]
    show = subprocess.run([sys.executable, "-m", "staticpodd.cli", "show", "web@1", "--root", str(root)],
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert show.returncode == 0 and sha(show.stdout) == sha(versions[0][4])
    diff = run_ctl(root, "diff", "web", "1", "2")
    assert diff.returncode == 0 and "+    image: nginx:1.28" in diff.stdout
    val = run_ctl(root, "validate", str(root / MDIR))
    assert val.returncode == 0, val.stdout + val.stderr
    for r in (st, hist, diff, val):
        assert_no_traceback(r.stdout, r.stderr)


def test_write_verbs_on_a_read_only_store_fail_cleanly_and_change_nothing(ro_store: Path, tmp_path: Path) -> None:
    root = ro_store
    before = _state(root)
    n_versions = len(recorded(root))
    new = tmp_path / "web.yaml"
    new.write_text(small_pod("web", image="nginx:1.29"))
    for verb in (("apply", str(new)), ("park", "web"), ("unpark", "db"), ("rollback", "web")):
        res = run_ctl(root, *verb, "--json")
        assert_no_traceback(res.stdout, res.stderr)
        assert res.returncode == 1, (verb, res.stdout, res.stderr)
        err = json.loads(res.stdout.splitlines()[-1])["error"]
        assert err["code"] == "store-error" and "read-only" in err["message"], err
        # a newcomer (stop 17): the message said "unable to open database file" and the hint sent the
        # operator to the database file ("never delete it blindly"), not to the read-only mount
        assert "read-only filesystem" in err["message"] and "remount" in err["hint"], err
        assert err["details"]["reached_kubelet"] is False
        assert _state(root) == before, verb
    assert len(recorded(root)) == n_versions


@pytest.fixture
def ro_manifests(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    fs = Tmpfs(root / MDIR, 1024 * 1024)
    try:
        _populate(root, tmp_path)
        fs.remount("ro")
        yield root
    finally:
        fs.close()


def test_write_verbs_on_a_read_only_manifest_directory_give_erofs_and_change_nothing(
        ro_manifests: Path, tmp_path: Path) -> None:
    root = ro_manifests
    before = _state(root)
    n_versions = len(recorded(root))
    new = tmp_path / "web.yaml"
    new.write_text(small_pod("web", image="nginx:1.29"))
    for verb in (("apply", str(new)), ("park", "web"), ("unpark", "db"), ("rollback", "web")):
        res = run_ctl(root, *verb, "--json")
        assert_no_traceback(res.stdout, res.stderr)
        assert res.returncode == 1, (verb, res.stdout, res.stderr)
        err = json.loads(res.stdout.splitlines()[-1])["error"]
        assert err["code"] == "fs-error" and "Read-only file system" in err["message"], err
        assert "nothing was changed" in err["message"]
        assert _state(root) == before, verb
    assert len(recorded(root)) == n_versions
    st = run_ctl(root, "status")
    assert st.returncode == 0 and "web" in st.stdout


@pytest.fixture
def open_root() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="spd-eacces-", dir="/tmp"))
    os.chmod(base, 0o755)
    root = base / "root"
    (root / MDIR).mkdir(parents=True)
    for p in (root, root / "etc", root / "etc/kubernetes", root / MDIR):
        os.chmod(p, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _python_for_nobody() -> str:
    """An interpreter ``nobody`` may run: this one, or the system's (a pyenv under /root is 0700)."""
    for exe in (sys.executable, "/usr/bin/python3"):
        ok = subprocess.run(["runuser", "-u", "nobody", "--", exe, "-c", "import yaml"], capture_output=True)
        if ok.returncode == 0:
            return exe
    pytest.fail("no Python interpreter (with PyYAML) that the user nobody can run: install python3-yaml")


def test_an_unprivileged_user_gets_clean_permission_errors(open_root: Path, tmp_path: Path) -> None:
    root = open_root
    _populate(root, tmp_path)
    before = _state(root)
    n_versions = len(recorded(root))
    src = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        os.chmod(src, 0o755)
        new = src / "web.yaml"
        new.write_text(small_pod("web", image="nginx:1.30"))
        os.chmod(new, 0o644)
        # nobody imports a copy of the code: the clone may sit under a 0700 directory (mktemp -d)
        code = src / "code"
        for part in ("staticpodd", "schemas"):
            shutil.copytree(REPO / part, code / part, ignore=shutil.ignore_patterns("__pycache__"))
        for d, _, files in os.walk(src):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        env = {**os.environ, "PYTHONPATH": str(code), "HOME": "/tmp"}
        python = _python_for_nobody()
        for verb in (("status",), ("history", "web"), ("apply", str(new)), ("park", "web"), ("unpark", "db")):
            res = subprocess.run(["runuser", "-u", "nobody", "--", python, "-m", "staticpodd.cli", *verb,
                                  "--root", str(root), "--json"], capture_output=True, text=True, env=env,
                                 cwd="/tmp", timeout=60)
            assert_no_traceback(res.stdout, res.stderr)
            assert res.returncode == 1, (verb, res.stdout, res.stderr)
            err = json.loads(res.stdout.splitlines()[-1])["error"]
            assert err["code"] in ("fs-error", "store-error"), err
            assert "ermission denied" in err["message"] or "permission denied" in err["message"], err
        assert _state(root) == before
        assert len(recorded(root)) == n_versions
    finally:
        shutil.rmtree(src, ignore_errors=True)
