"""Adversarial daemon tests: crashes mid-restore, restart, on_invalid=restore + on_stray=quarantine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spd_testlib import REPO


def _start(root: Path, env_extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("STATICPODD_TEST_CRASHPOINT", None)
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "staticpodd.daemon", "--root", str(root)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_heartbeat(root: Path, after: float = 0.0) -> None:
    hb = root / "run" / "staticpodd" / "daemon.json"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if hb.exists() and hb.stat().st_mtime > after:
            return
        time.sleep(0.1)
    raise AssertionError("no heartbeat")


def _wait_adopted(root: Path, component: str) -> None:
    """Wait until the daemon's first scan has recorded ``component`` (a write racing the adoption
    of a fresh store is adopted as version 1: there is nothing earlier to restore)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("STATICPODD_TEST_CRASHPOINT", None)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        p = subprocess.run([sys.executable, "-m", "staticpodd.cli", "history", component, "--json", "--root", str(root)],
                           capture_output=True, text=True, env=env)
        if p.returncode == 0 and json.loads(p.stdout).get("versions"):
            return
        time.sleep(0.2)
    raise AssertionError(f"{component} never recorded")


@pytest.mark.parametrize("on_stray", ["quarantine", "alert"])
@pytest.mark.parametrize("crashpoint", ["swap:staged", "swap:intent"])
# Regression (found by adversarial testing, fixed in the working tree meanwhile): after the daemon dies
#   mid-restore, the restarted daemon never restores the already-recorded invalid file; with
#   on_stray=quarantine it even moves the component's own live file (etcd.yaml) into quarantine as a 'stray'
def test_restart_after_crash_mid_restore_restores(kubeadm, on_stray, crashpoint):
    root = kubeadm.root
    cfg = root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(f"on_invalid: restore\non_stray: {on_stray}\nrescan_interval: 1\ndebounce: 0.2\n")
    live = kubeadm.manifests / "etcd.yaml"
    good = live.read_bytes()
    d = _start(root, {"STATICPODD_TEST_CRASHPOINT": crashpoint})
    try:
        _wait_heartbeat(root)
        _wait_adopted(root, "etcd")
        live.write_bytes(b"kind: Pod\n")  # an invalid external write (e.g. a truncated kubeadm write)
        assert d.wait(timeout=20) == -9  # died in the middle of restoring it
    finally:
        if d.poll() is None:
            d.kill()
            d.wait()
    t0 = time.time()
    d = _start(root)
    try:
        _wait_heartbeat(root, after=t0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if live.exists() and live.read_bytes() == good:
                break
            time.sleep(0.2)
        assert live.exists(), f"etcd.yaml is gone: {kubeadm.visible()}"
        assert live.read_bytes() == good, "the invalid bytes are still live"
    finally:
        d.kill()
        d.wait()


# Regression (found by adversarial testing, fixed in the working tree meanwhile): on_invalid=restore +
#   on_stray=quarantine: when a rescan (not an inotify hint) finds an invalid write, one plan holds restore
#   AND quarantine of the same file: the good restored etcd.yaml is then moved into quarantine, the component
#   leaves the kubelet's directory
def test_restore_then_quarantine_same_file(tmp_path, corpus):
    root = tmp_path / "root"
    real = root / "etc" / "kubernetes" / "real-manifests"
    real.mkdir(parents=True)
    # staticPodPath is a symlink to a directory: the daemon's inotify hints do not fire through it,
    # so the invalid write below is found by the periodic rescan (as after an inotify overflow)
    os.symlink("real-manifests", root / "etc" / "kubernetes" / "manifests")
    good = (corpus / "manifests" / "04-zetaoss-kubeadm-etcd.yaml").read_bytes()
    (real / "etcd.yaml").write_bytes(good)
    os.chmod(real / "etcd.yaml", 0o600)
    cfg = root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("on_invalid: restore\non_stray: quarantine\nrescan_interval: 1\n")
    d = _start(root)
    try:
        _wait_heartbeat(root)
        time.sleep(0.5)
        (real / "etcd.yaml").write_bytes(b"kind: Pod\n")
        time.sleep(4)
        assert (real / "etcd.yaml").exists(), \
            f"etcd.yaml was quarantined: {os.listdir(real / '.staticpodd' / 'quarantine')}"
        assert (real / "etcd.yaml").read_bytes() == good
    finally:
        d.kill()
        d.wait()


# Regression (found by adversarial testing, fixed in the working tree meanwhile): when staticPodPath is a
#   symlink to a directory the daemon gets no inotify hints: an invalid write stays live until the next full
#   rescan (20 s by default)
def test_symlinked_manifest_dir_gets_hints(tmp_path, corpus):
    root = tmp_path / "root"
    real = root / "etc" / "kubernetes" / "real-manifests"
    real.mkdir(parents=True)
    os.symlink("real-manifests", root / "etc" / "kubernetes" / "manifests")
    good = (corpus / "manifests" / "04-zetaoss-kubeadm-etcd.yaml").read_bytes()
    (real / "etcd.yaml").write_bytes(good)
    os.chmod(real / "etcd.yaml", 0o600)
    cfg = root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("on_invalid: restore\nrescan_interval: 60\ndebounce: 0.2\n")
    d = _start(root)
    try:
        _wait_heartbeat(root)
        time.sleep(0.5)
        (real / "etcd.yaml").write_bytes(b"kind: Pod\n")
        time.sleep(4)
        assert (real / "etcd.yaml").read_bytes() == good
    finally:
        d.kill()
        d.wait()


# Regression (found by adversarial testing, fixed in the working tree meanwhile): the daemon's
#   RESTORED_LAST_GOOD journal entry says 'version None' and has no VERSION/DIGEST fields (daemon._execute
#   reads .seq off the engine's Result, not its Version)
def test_restore_journal_entry_names_version(kubeadm):
    from spd_testlib import journal_entries

    root = kubeadm.root
    cfg = root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("on_invalid: restore\ndebounce: 0.2\n")
    d = _start(root)
    try:
        _wait_heartbeat(root)
        time.sleep(0.5)
        (kubeadm.manifests / "etcd.yaml").write_bytes(b"kind: Pod\n")

        def restored(entries):
            return [e for e in entries if "restored the last good version" in str(e.get("MESSAGE", ""))]

        entries = restored(journal_entries(root, want=lambda es: bool(restored(es)), timeout=15))
        assert entries, "no RESTORED_LAST_GOOD entry"
        e = entries[-1]
        assert "version None" not in e["MESSAGE"], e["MESSAGE"]
        assert e.get("VERSION") and e.get("DIGEST"), e
    finally:
        d.kill()
        d.wait()


def test_empty_component_manifest_is_not_a_stray(sandbox):
    root = sandbox.root
    sandbox.write("etcd.yaml", b"")
    cfg = root / "etc" / "staticpodd" / "staticpodd.yaml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("on_invalid: restore\non_stray: quarantine\nrescan_interval: 1\n")
    d = _start(root)
    try:
        _wait_heartbeat(root)
        time.sleep(3)
        assert (sandbox.manifests / "etcd.yaml").exists(), "etcd.yaml was quarantined"
    finally:
        d.kill()
        d.wait()


def test_a_sed_temp_file_renamed_into_place_is_not_left_as_a_removed_component(kubeadm):
    """GNU sed -i writes sedXXXXXX in the directory, then renames it over the file (seen with
    strace, cmpatterns.SED_TEMPFILE). Made slow here so the daemon sees the temp file exist."""
    from spd_testlib import journal_entries

    from staticpodd.manifest.cmpatterns import identify

    assert identify("seddwNQmZ") is not None and identify("seddwNQmZ").pattern.tool == "sed"
    root = kubeadm.root
    mdir = kubeadm.manifests
    d = _start(root)
    try:
        _wait_adopted(root, "kube-scheduler")
        new = (mdir / "kube-scheduler.yaml").read_bytes().replace(b"--leader-elect=true", b"--leader-elect=false")
        tmp = mdir / "sedK3xQ9a"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, new)
        os.close(fd)
        time.sleep(1.5)  # the daemon records the temp file as it would any new file
        os.rename(tmp, mdir / "kube-scheduler.yaml")
        entries = journal_entries(root, want=lambda es: any("sedK3xQ9a, a sed temp file, is gone" in str(e.get("MESSAGE"))
                                                            for e in es), timeout=15)
        assert any("sedK3xQ9a, a sed temp file, is gone" in str(e.get("MESSAGE")) for e in entries)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        st = json.loads(subprocess.run([sys.executable, "-m", "staticpodd.cli", "status", "--json", "--root", str(root)],
                                       env=env, capture_output=True, text=True).stdout)
        names = {c["component"] for c in st["components"]}
        assert "sedK3xQ9a" not in names
        assert (mdir / "kube-scheduler.yaml").read_bytes() == new
    finally:
        d.terminate()
        d.wait(timeout=20)
