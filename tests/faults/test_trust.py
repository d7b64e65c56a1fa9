"""A local user never gets root's hand: what root reads back and acts on (the configuration, its
checked cache, the state directories, parked copies) is refused when another user could have
written it, and created with explicit modes whatever the umask. The tests run as root and play
the other user as ``nobody`` (uid 65534) with real files and real staticpodctl runs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

NOBODY = 65534


def write_config(sandbox, text: str, mode: int = 0o644) -> Path:
    cfg = sandbox.root / "etc/staticpodd/staticpodd.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(text)
    os.chmod(cfg, mode)
    return cfg


def test_the_config_cache_is_written_0644_even_under_umask_000(sandbox, ctl):
    write_config(sandbox, "rescan_interval: 30\n")
    old = os.umask(0)
    try:
        assert ctl("status").rc == 0
    finally:
        os.umask(old)
    cache = sandbox.root / "run/staticpodd/config-checked.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o644
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o755


def test_a_config_cache_another_user_wrote_is_not_believed(sandbox):
    from types import SimpleNamespace

    from staticpodd.commands import loading
    from staticpodd.layout import Layout

    cfg = write_config(sandbox, "rescan_interval: 30\n")
    layout = Layout.build(sandbox.root)
    cache = sandbox.root / "run/staticpodd/config-checked.json"
    cache.parent.mkdir(parents=True)
    digest = hashlib.sha256(cfg.read_bytes()).hexdigest()
    from staticpodd import __version__
    from staticpodd.config import Config

    forged = Config.default().to_dict()
    forged["wait"]["crictl"] = "/tmp/the-users-program"
    cache.write_text(json.dumps({"path": str(cfg), "digest": digest, "checked_by": __version__,
                                 "config": forged}))
    os.chown(cache, NOBODY, NOBODY)
    loading._config_cache.clear()
    got = loading.checked_config(SimpleNamespace(config=None), layout)
    assert got.wait.crictl == "crictl"
    assert got.rescan_interval == 30


@pytest.mark.parametrize("how", ["owned by nobody", "mode 0666"])
def test_a_configuration_another_user_could_write_is_refused(sandbox, ctl, how):
    cfg = write_config(sandbox, "wait:\n  crictl: /tmp/the-users-program\n")
    if how == "owned by nobody":
        os.chown(cfg, NOBODY, NOBODY)
    else:
        os.chmod(cfg, 0o666)
    run = ctl("doctor")
    assert str(cfg) in run.out + run.err
    assert "another user could have written it" in run.out + run.err
    from staticpodd.config import load_config
    from staticpodd.errors import ConfigError

    with pytest.raises(ConfigError, match="owned by uid 65534|world-writable"):
        load_config(cfg)


def test_a_configuration_with_three_mistakes_names_all_three_with_line_and_field(sandbox, ctl):
    cfg = write_config(sandbox, "rescan_interval: -1\nlock_timeout: soon\non_stray: shrug\n")
    from staticpodd.config import load_config
    from staticpodd.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        load_config(cfg)
    text = str(caught.value)
    for line, field in ((1, "rescan_interval"), (2, "lock_timeout"), (3, "on_stray")):
        assert f"{cfg}:{line}:" in text and field in text
    assert sorted(p["line"] for p in caught.value.details["problems"]) == [1, 2, 3]
    doctor = ctl("doctor")
    assert "on_stray" in doctor.out + doctor.err and "rescan_interval" in doctor.out + doctor.err


def test_a_configuration_over_one_mib_is_refused_not_read_for_seconds_or_cut_short(sandbox):
    """A newcomer's try: 20 MB of comment took 22 s and was "configuration OK"; past the read
    limit the file was cut short and what was left parsed."""
    from staticpodd.config import load_config
    from staticpodd.errors import ConfigError

    cfg = write_config(sandbox, "rescan_interval: 30\n" + "#" * 80 + "\n")
    with cfg.open("a") as f:
        f.write("# padding\n" * 120_000)  # about 1.2 MB of comment
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config(cfg)


def test_a_parked_copy_swapped_through_a_0777_parked_directory_is_not_started(kubeadm, ctl):
    assert ctl("park", "kube-scheduler", "--reason", "drill").rc == 0
    private = kubeadm.manifests / ".staticpodd"
    parked = private / "parked"
    for d in (private, parked):
        os.chmod(d, 0o777)  # left so by a hand or an older release
    doctor = ctl("doctor")
    assert doctor.rc == 1 and f"{parked} is group- and world-writable" in doctor.out
    copy = parked / "kube-scheduler.yaml"
    # What nobody did through the 0777 directory: a new file of theirs renamed over the parked copy
    # (written here as root and handed over: pytest's tmp_path is not searchable by nobody).
    theirs = parked / ".theirs"
    theirs.write_bytes(copy.read_bytes() + b"# and now privileged\n")
    os.chown(theirs, NOBODY, NOBODY)
    os.replace(theirs, copy)
    run = ctl("unpark", "kube-scheduler")
    assert run.rc != 0, run.out
    assert f"{copy}" in run.err and "owned by uid 65534" in run.err
    assert not (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_our_own_0777_state_directories_are_tightened_and_a_readable_store_is_reported(kubeadm, ctl):
    assert ctl("park", "kube-scheduler").rc == 0
    private = kubeadm.manifests / ".staticpodd"
    state = kubeadm.root / "var/lib/staticpodd"
    db = state / "versions.sqlite3"
    for d in (private, private / "parked", state):
        os.chmod(d, 0o777)
    os.chmod(db, 0o644)
    doctor = ctl("doctor")
    assert doctor.rc == 1
    assert f"{state} is group- and world-writable" in doctor.out
    assert f"{db} has mode 0644, readable by other users" in doctor.out
    assert ctl("unpark", "kube-scheduler").rc == 0
    for d in (private, private / "parked", state):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert "no problems found" in ctl("doctor").out


def test_a_state_directory_another_user_owns_is_refused(kubeadm, ctl):
    state = kubeadm.root / "var/lib/staticpodd"
    state.mkdir(parents=True)
    os.chown(state, NOBODY, NOBODY)
    run = ctl("park", "kube-scheduler")
    assert run.rc != 0
    assert str(state) in run.err and "owned by uid 65534" in run.err
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()


def test_show_of_a_symlink_to_a_secret_says_what_it_is_and_prints_no_byte_of_it(sandbox, ctl):
    secret = sandbox.root / "etc/secret-key"
    secret.write_text("THE-SECRET-BYTES\n")
    os.chmod(secret, 0o600)
    (sandbox.manifests / "leak.yaml").symlink_to(secret)
    for verb in (("show", "leak"), ("diff", "leak")):
        run = ctl(*verb)
        assert "THE-SECRET-BYTES" not in run.out + run.err, verb
    run = ctl("show", "leak")
    assert run.rc != 0
    assert f"is a symlink to {secret}, outside the manifest directory" in run.err


FORGED = "drill\nkube-apiserver: parked by root, all good"


def test_a_reason_with_a_newline_or_past_the_cap_is_refused_and_changes_nothing(kubeadm, ctl):
    run = ctl("park", "kube-scheduler", "--reason", FORGED)
    assert run.rc == 2 and "one line without control characters" in run.err
    run = ctl("park", "kube-scheduler", "--reason", "x" * 501)
    assert run.rc == 2 and "at most 500" in run.err
    assert (kubeadm.manifests / "kube-scheduler.yaml").exists()
    assert ctl("park", "kube-scheduler", "--reason", "y" * 500).rc == 0


def test_a_reason_stored_with_a_newline_is_shown_escaped_on_one_line(kubeadm, ctl):
    import sqlite3

    assert ctl("park", "kube-scheduler", "--reason", "drill").rc == 0
    con = sqlite3.connect(kubeadm.root / "var/lib/staticpodd/versions.sqlite3")
    with con:
        con.execute("UPDATE parks SET reason = ?", (FORGED,))
        con.execute("UPDATE versions SET reason = ?", (FORGED,))
    con.close()
    for verb in (("status",), ("history", "kube-scheduler")):
        out = ctl(*verb).out
        assert "\nkube-apiserver: parked by root" not in out, verb
        assert "drill\\nkube-apiserver: parked by root, all good" in out, verb


def test_lock_timeout_bounds_the_wait_for_another_sqlite_connection(kubeadm, ctl):
    import sqlite3

    assert ctl("park", "kube-scheduler").rc == 0
    other = sqlite3.connect(kubeadm.root / "var/lib/staticpodd/versions.sqlite3", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # a sqlite3 shell or a backup holding the store
    try:
        run = ctl("unpark", "kube-scheduler", "--lock-timeout", "1", "--json")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert run.rc == 5, run.out + run.err
    assert json.loads(run.out)["error"]["code"] == "lock-timeout"
    assert "gave up after 1 s" in json.loads(run.out)["error"]["message"]  # not SQLite's own 30 s


def test_a_metrics_textfile_dir_that_is_the_manifest_directory_is_refused(sandbox):
    from staticpodd.config import load_config
    from staticpodd.errors import ConfigError
    from staticpodd.layout import Layout

    cfg = write_config(sandbox, "metrics:\n  enabled: true\n  textfile_dir: /etc/kubernetes/manifests/\n")
    with pytest.raises(ConfigError) as caught:
        load_config(Layout.build(sandbox.root))
    assert caught.value.line == 3 and caught.value.field == "metrics.textfile_dir"
    assert "the kubelet would read the metrics file there as a pod" in str(caught.value)
    assert str(cfg) in str(caught.value)


def test_a_metrics_textfile_dir_that_is_a_file_is_refused_and_a_missing_one_passes(sandbox):
    from staticpodd.config import load_config
    from staticpodd.errors import ConfigError
    from staticpodd.layout import Layout

    (sandbox.root / "etc").mkdir(exist_ok=True)
    (sandbox.root / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    cfg = write_config(sandbox, "metrics:\n  enabled: true\n  textfile_dir: /etc/passwd\n")
    with pytest.raises(ConfigError) as caught:
        load_config(Layout.build(sandbox.root))
    assert caught.value.line == 3 and caught.value.field == "metrics.textfile_dir"
    assert "exists and is not a directory" in str(caught.value) and str(cfg) in str(caught.value)
    assert (sandbox.root / "etc/passwd").read_text() == "root:x:0:0::/root:/bin/sh\n"
    write_config(sandbox, "metrics:\n  enabled: true\n  textfile_dir: /var/lib/not-yet\n")
    assert load_config(Layout.build(sandbox.root)).metrics.textfile_dir == "/var/lib/not-yet"


def engine_for(root: Path):
    from staticpodd.engine import Engine
    from staticpodd.engine.model import Actor
    from staticpodd.journal import Journal
    from staticpodd.layout import Layout

    return Engine(Layout.build(root), actor=Actor("test", 0), journal=Journal("staticpodd", str(root)))


def test_the_quarantine_does_not_follow_a_symlinked_quarantine_directory_out(kubeadm, tmp_path):
    from staticpodd.errors import FsError

    eng = engine_for(kubeadm.root)
    eng.scan()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    quarantine = kubeadm.manifests / ".staticpodd/quarantine"
    quarantine.parent.mkdir(mode=0o700, exist_ok=True)
    quarantine.symlink_to(outside)
    stray = kubeadm.manifests / "notes.yaml.bak"
    stray.write_text("not a pod\n")
    with pytest.raises(FsError, match="not a directory \\(a symlink or a file\\)"):
        eng.quarantine("notes.yaml.bak", reason="stray")
    assert stray.exists() and list(outside.iterdir()) == []


def test_a_symlinked_state_directory_is_refused_with_a_hint_that_does_not_chmod_its_target(kubeadm, ctl,
                                                                                              tmp_path):
    """``.staticpodd`` a symlink: refused; the hint must not say chown/chmod, which follow the
    link and change the target (a newcomer's try)."""
    outside = tmp_path / "elsewhere"
    outside.mkdir(mode=0o755)
    private = kubeadm.manifests / ".staticpodd"
    if private.exists():
        import shutil

        shutil.rmtree(private)
    private.symlink_to(outside)
    r = ctl("park", "kube-scheduler", "--json")
    assert r.rc != 0 and "Traceback" not in r.err
    err = r.json()["error"]
    assert "not a directory" in err["message"] and "another user could have written" not in err["message"]
    assert "put a directory there" in err["hint"] and "chmod" not in err["hint"], err
    assert oct(outside.stat().st_mode & 0o777) == "0o755" and (kubeadm.manifests / "kube-scheduler.yaml").exists()
