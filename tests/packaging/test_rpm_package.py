"""The RPM spec parses, builds with rpmbuild from a clean copy of the tracked tree, and its payload
runs when unpacked into a temporary root.

Real tools: rpmspec, rpmbuild, rpm. On Debian (whose `rpm` package has neither
pyproject-rpm-macros nor systemd-rpm-macros) packaging/build-rpm.sh loads the stand-ins in
packaging/rpm/fallback.macros and skips rpm's build-dependency check (the build dependencies are
Debian packages); on Fedora/RHEL the real macros are used. The RPM cannot be installed on the
host here (no rpm database of the system): it is unpacked with `rpm --root <tmp> --nodeps
--noscripts` and its staticpodctl is run from there.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from staticpodd import __version__

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "packaging/rpm/staticpodd.spec"
FALLBACK = REPO / "packaging/rpm/fallback.macros"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = pytest.mark.skipif(shutil.which("rpmbuild") is None, reason="rpmbuild not installed (apt: rpm)")


def run(*cmd: str, cwd: Path | str = "/", check: bool = True, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "HOME": os.environ.get("HOME", "/root"), **(env or {})}
    r = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, env=full_env, timeout=600)
    if check:
        assert r.returncode == 0, f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    return r


def macro_args() -> list[str]:
    """--load the fallback macros where the real ones are missing, as build-rpm.sh does."""
    if run("rpm", "--eval", "%{?pyproject_wheel:yes}").stdout.strip() != "yes":
        return ["--load", str(FALLBACK)]
    return []


def test_spec_parses_and_uses_the_pyproject_and_systemd_macros() -> None:
    text = SPEC.read_text()
    for macro in ("%pyproject_wheel", "%pyproject_install", "%pyproject_save_files", "%systemd_post",
                  "%systemd_preun", "%systemd_postun_with_restart"):
        assert macro in text, macro
    parsed = run("rpmspec", *macro_args(), "-P", str(SPEC)).stdout
    assert re.search(rf"^Version:\s+{re.escape(__version__)}$", parsed, re.M), "spec Version != staticpodd.__version__"
    assert "%config(noreplace) /etc/staticpodd/staticpodd.yaml" in parsed
    if shutil.which("rpmlint"):
        r = run("rpmlint", str(SPEC), check=False)
        assert " 0 errors" in r.stdout, r.stdout


@pytest.mark.slow
def test_rpm_builds_and_its_payload_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run("bash", str(REPO / "packaging/build-rpm.sh"), cwd=REPO, env={"OUT": str(out)})
    rpms = list(out.glob(f"staticpodd-{__version__}-1*.noarch.rpm"))
    assert len(rpms) == 1
    rpm = str(rpms[0])
    files = run("rpm", "-qlp", rpm).stdout.split("\n")
    for expected in ("/usr/bin/staticpodctl", "/usr/bin/staticpodd", "/usr/lib/systemd/system/staticpodd.service",
                     "/usr/lib/systemd/catalog/staticpodd.catalog", "/usr/lib/tmpfiles.d/staticpodd.conf",
                     "/etc/staticpodd/staticpodd.yaml", "/usr/share/bash-completion/completions/staticpodctl",
                     "/usr/share/staticpodd/schemas/staticpodd-config.schema.json"):
        assert expected in files, expected
    for page in ("man8/staticpodctl.8", "man8/staticpodd.8", "man5/staticpodd.yaml.5", "man5/staticpodd-hooks.5"):
        assert any(re.fullmatch(r"/usr/share/man/" + re.escape(page) + r"(\.gz)?", f) for f in files), page
    assert not [f for f in files if f.startswith("/etc/kubernetes")]
    assert run("rpm", "-qp", "--configfiles", rpm).stdout.split() == ["/etc/staticpodd/staticpodd.yaml"]
    scripts = run("rpm", "-qp", "--scripts", rpm).stdout
    assert "preset staticpodd.service" in scripts
    assert "disable --now staticpodd.service" in scripts
    assert "try-restart staticpodd.service" in scripts
    # an erase while a component is parked is refused, as the .deb's prerm does
    assert "/usr/libexec/staticpodd/before-remove || exit 1" in scripts
    requires = run("rpm", "-qp", "--requires", rpm).stdout
    for dep in ("pyyaml", "jsonschema", "watchdog", "python3-systemd"):
        assert dep in requires, dep

    assert "/usr/lib/systemd/system-preset/50-staticpodd.preset" in files
    if shutil.which("rpmlint"):  # no errors (each filter in rpmlint-filters has its reason)
        r = run("rpmlint", "-r", str(REPO / "packaging/rpm/rpmlint-filters"), rpm, check=False)
        assert " 0 errors" in r.stdout, r.stdout
        assert "description-line-too-long" not in r.stdout and "summary-" not in r.stdout, r.stdout

    root = tmp_path / "root"
    run("rpm", f"--root={root}", f"--dbpath={tmp_path / 'rpmdb'}", "-i", "--nodeps", "--noscripts", rpm)
    # The preset enables the unit even under RHEL's default preset ("disable *"), as %post's
    # `systemctl preset` does on a real install (systemctl --root: the same code, offline).
    (root / "usr/lib/systemd/system-preset").mkdir(parents=True, exist_ok=True)
    (root / "usr/lib/systemd/system-preset/99-default.preset").write_text("disable *\n")
    (root / "usr/lib/systemd/system/multi-user.target").parent.mkdir(parents=True, exist_ok=True)
    run("systemctl", f"--root={root}", "preset", "staticpodd.service")
    assert run("systemctl", f"--root={root}", "is-enabled", "staticpodd.service", check=False).stdout.strip() == "enabled"
    sitelib = next(root.glob("usr/lib/python3*/site-packages"))
    env = {"PYTHONPATH": str(sitelib)}
    version = run("/usr/bin/python3", str(root / "usr/bin/staticpodctl"), "--version", cwd=tmp_path, env=env).stdout
    assert __version__ in version
    node = tmp_path / "node"
    (node / "etc/kubernetes/manifests").mkdir(parents=True)
    run("/usr/bin/python3", str(root / "usr/bin/staticpodctl"), "--root", str(node), "status", cwd=tmp_path, env=env)
