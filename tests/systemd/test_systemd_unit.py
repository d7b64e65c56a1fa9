"""staticpodd.service: `systemd-analyze verify` is clean, the exposure is at most 1.5, and the unit
says what the daemon relies on (Type=notify, watchdog, reload, exit 78, sandbox).

Real tools: systemd-analyze from the installed systemd. The executables the unit names exist
only once the package is installed, so `verify` runs against a temporary --root holding the
host's unit tree, the unit file unchanged, and stand-in executables at /usr/bin/staticpodd
(tests/packaging verifies the installed unit with the real ones and the real man pages).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from systemd_files import REPO, UNIT, parse_unit, verify_root, words

from staticpodd.layout import DEFAULT_MANIFEST_DIR, Layout

pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")

MAX_EXPOSURE = 1.5


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["systemd-analyze", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def unit() -> dict[str, dict[str, list[str]]]:
    return parse_unit(UNIT)


def test_verify_is_clean(tmp_path: Path) -> None:
    root = verify_root(tmp_path)
    r = analyze("verify", f"--root={root}", "--man=no", "staticpodd.service")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", f"systemd-analyze verify complained:\n{r.stderr}"


def test_verify_would_report_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: an unknown key and a missing executable are both reported."""
    broken = tmp_path / "staticpodd.service"
    broken.write_text(re.sub(r"^\[Service\]$", "[Service]\nNotifyAcess=main", UNIT.read_text(), flags=re.M))
    root = verify_root(tmp_path, broken)
    (root / "usr/bin/staticpodd").unlink()
    r = analyze("verify", f"--root={root}", "--man=no", "staticpodd.service")
    assert "NotifyAcess" in r.stderr
    assert "/usr/bin/staticpodd" in r.stderr


def test_exposure_is_at_most_1_5() -> None:
    r = analyze("security", "--offline=yes", f"--threshold={int(MAX_EXPOSURE * 10)}", str(UNIT))
    m = re.search(r"Overall exposure level for staticpodd\.service: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    exposure = float(m.group(1))
    print(f"systemd-analyze security: exposure {exposure} (limit {MAX_EXPOSURE})")
    assert exposure <= MAX_EXPOSURE, r.stdout
    assert r.returncode == 0, r.stdout + r.stderr


def test_type_notify_with_watchdog_and_restart_policy(unit) -> None:
    svc = unit["Service"]
    assert svc["Type"] == ["notify"]
    assert svc["NotifyAccess"] == ["main"]
    assert svc["WatchdogSec"] and svc["WatchdogSec"][-1] not in ("0", "infinity")
    assert svc["Restart"] == ["on-failure"]
    # A refused configuration (EX_CONFIG) is not retried in a loop.
    from staticpodd.errors import EXIT_CONFIG

    assert str(EXIT_CONFIG) in words(svc["RestartPreventExitStatus"])


def test_commands_are_the_installed_entry_points(unit) -> None:
    """ExecStart/ExecReload run the console script pyproject installs, with options its parser
    accepts; `--reload` waits for the daemon's answer (systemd 252 has no Type=notify-reload)."""
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^staticpodd = "staticpodd\.daemon:main"$', pyproject, re.M)
    svc = unit["Service"]
    start = shlex.split(svc["ExecStart"][-1])
    reload = shlex.split(svc["ExecReload"][-1])
    # "+": the reload helper runs outside the sandbox, to bind a textfile directory created later
    assert reload[0] == "+/usr/bin/staticpodd"
    reload[0] = reload[0][1:]
    assert start[0] == reload[0] == "/usr/bin/staticpodd"
    daemon = pytest.importorskip("staticpodd.daemon", reason="staticpodd/daemon.py not there yet")
    parser = daemon.build_parser()
    parser.parse_args(start[1:])
    args = parser.parse_args(reload[1:])
    assert args.reload is True
    assert args.unit == "%n"  # systemd's specifier for the unit's own name
    # systemd bounds ExecReload= by TimeoutStartSec=: the daemon's own wait must end first.
    timeout_start = float(svc["TimeoutStartSec"][-1].rstrip("s"))
    assert args.timeout < timeout_start


def test_ordered_before_the_kubelet_never_a_dependency_of_it(unit) -> None:
    u = unit["Unit"]
    assert "kubelet.service" in words(u.get("Before", []))
    for key in ("Requires", "Wants", "Requisite", "BindsTo", "PartOf", "Upholds", "After", "Conflicts"):
        assert "kubelet.service" not in words(u.get(key, [])), key
    install = unit.get("Install", {})
    for key in ("RequiredBy", "WantedBy", "UpheldBy"):
        assert "kubelet.service" not in words(install.get(key, [])), key


def test_state_and_runtime_directories_are_the_layouts(unit) -> None:
    svc = unit["Service"]
    layout = Layout.build("/", manifest_dir=DEFAULT_MANIFEST_DIR)
    assert Path("/var/lib", svc["StateDirectory"][-1]) == layout.state_dir
    assert Path("/run", svc["RuntimeDirectory"][-1]) == layout.run_dir
    assert Path("/etc", svc["ConfigurationDirectory"][-1]) == layout.config_dir
    # staticpodctl takes the same flock while the daemon is stopped: the lock must survive a stop.
    assert svc["RuntimeDirectoryPreserve"] == ["yes"]
    assert svc["StateDirectoryMode"] == ["0700"]


def test_sandbox_writes_the_manifest_directory_and_nothing_else(unit) -> None:
    """ProtectSystem=strict plus exactly the manifest directory as one bind mount: nothing inside
    it is mounted separately (a rename across a bind mount fails with EXDEV: docs/kubelet-contract.md
    consequence 3), no parent of it is granted, and there is no network."""
    svc = unit["Service"]
    assert svc["ProtectSystem"] == ["strict"]
    manifest_dir = Path(DEFAULT_MANIFEST_DIR)
    granted = [Path(w.lstrip("-")) for w in words(svc.get("ReadWritePaths", []))]
    assert manifest_dir in granted
    from staticpodd.config import MetricsConfig

    allowed = {manifest_dir, Path(MetricsConfig().textfile_dir or "/nonexistent")}
    assert set(granted) <= allowed, f"unexpected writable paths: {set(granted) - allowed}"
    for key in ("ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "BindPaths", "BindReadOnlyPaths",
                "TemporaryFileSystem"):
        for w in words(svc.get(key, [])):
            p = Path(w.lstrip("-+").split(":")[0])
            assert p == manifest_dir or manifest_dir not in p.parents, f"{key}={w} splits the manifest mount"
    # Optional ("-"): a node baked before `kubeadm init` has no directory yet, and a missing
    # ReadWritePaths= target fails the start with 226/NAMESPACE. Nothing creates it
    # either: kubeadm's preflight wants it absent or empty.
    assert f"-{manifest_dir}" in words(svc["ReadWritePaths"])
    assert not any(str(manifest_dir) in c for c in svc.get("ExecStartPre", []))
    assert svc["PrivateNetwork"] == ["yes"]
    assert words(svc["RestrictAddressFamilies"]) == ["AF_UNIX"]
    assert svc["NoNewPrivileges"] == ["yes"]
    assert "CAP_SYS_ADMIN" not in words(svc["CapabilityBoundingSet"])
