"""A local user never gets root's hand: what root reads back and acts on (the configuration, its
checked cache, the state directories, parked copies) is refused when another user could have
written it, and created with explicit modes whatever the umask. The tests run as root and play
the other user as ``nobody`` (uid 65534) with real files and real staticpodctl runs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

NOBODY = 65534


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                          capture_output=True, text=True, timeout=30)


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
