"""The .deb builds from a clean copy of the tracked tree, installs with dpkg, runs, and purges.

Real tools end to end: packaging/build-deb.sh (dpkg-buildpackage, debhelper, pybuild), dpkg -i
(apt-get install -f for missing Depends), the installed /usr/bin/staticpodctl and python3 modules
under /usr/lib/python3/dist-packages, systemd-analyze on the installed unit, man, bash
completion, journald with the installed catalog (journalctl -x). The package is purged at the
end so the machine is left as it was. Needs root and dpkg-buildpackage; refuses to run (skips)
when staticpodd is already installed on this machine, because it would purge it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from spd_testlib import journald_alive

from staticpodd import __version__

REPO = Path(__file__).resolve().parents[2]
PKG = "staticpodd"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="installs a .deb: needs root"),
    pytest.mark.skipif(shutil.which("dpkg-buildpackage") is None, reason="dpkg-buildpackage not installed"),
]


def run(*cmd: str, cwd: Path | str = "/", check: bool = True, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run with the system PATH (not the test virtualenv) from a neutral directory, so the
    installed package, not the source tree, is what gets imported."""
    full_env = {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "HOME": os.environ.get("HOME", "/root"), **(env or {})}
    r = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{' '.join(cmd)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def installed() -> bool:
    r = run("dpkg-query", "-W", "-f=${Status}", PKG, check=False)
    return r.returncode == 0 and "install ok installed" in r.stdout


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if installed():
        pytest.skip("staticpodd is already installed on this machine: this test installs and purges it")
    out = tmp_path_factory.mktemp("deb-out")
    r = run("bash", str(REPO / "packaging/build-deb.sh"), cwd=REPO, env={"OUT": str(out)}, check=False)
    assert r.returncode == 0, f"build-deb.sh failed:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    debs = list(out.glob(f"{PKG}_*_all.deb"))
    assert len(debs) == 1, r.stdout
    return debs[0]


@pytest.fixture(scope="module")
def installed_pkg(deb: Path) -> Iterator[Path]:
    run_dir_existed = Path("/run/staticpodd").exists()
    state_dir_existed = Path("/var/lib/staticpodd").exists()
    r = run("dpkg", "-i", str(deb), check=False, env={"DEBIAN_FRONTEND": "noninteractive"})
    if r.returncode != 0:  # missing Depends: let apt fetch them and finish the configuration
        run("apt-get", "install", "-f", "-y", "-q", env={"DEBIAN_FRONTEND": "noninteractive"})
    assert installed(), r.stdout + r.stderr
    try:
        yield deb
    finally:
        if installed():
            run("dpkg", "--purge", PKG, check=False)
        if not run_dir_existed:
            shutil.rmtree("/run/staticpodd", ignore_errors=True)
        if not state_dir_existed and Path("/var/lib/staticpodd").is_dir():
            try:
                Path("/var/lib/staticpodd").rmdir()
            except OSError:
                pass


def test_the_deb_is_built_from_tracked_files_only(deb: Path) -> None:
    """The version is the source's, and its payload holds no untracked module."""
    assert deb.name == f"{PKG}_{__version__}_all.deb"
    payload = run("dpkg-deb", "-c", str(deb)).stdout
    tracked = set(run("git", "ls-files", "staticpodd", cwd=REPO).stdout.split())
    shipped = {
        "staticpodd/" + m.group(1)
        for m in re.finditer(r"\./usr/lib/python3/dist-packages/staticpodd/(\S+\.py)$", payload, re.M)
    }
    assert shipped and shipped <= tracked, shipped - tracked


@pytest.mark.skipif(shutil.which("lintian") is None, reason="lintian not installed (apt: lintian)")
def test_lintian_finds_no_error_or_warning(deb: Path) -> None:
    """The maintainer scripts (prerm calling /usr/lib/staticpodd/before-remove, postrm) and the
    payload pass Debian's own checker."""
    r = run("lintian", "--fail-on", "error,warning", str(deb), check=False, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_depends_on_the_distro_python_libraries(deb: Path) -> None:
    depends = run("dpkg-deb", "-f", str(deb), "Depends").stdout
    for dep in ("python3-yaml", "python3-jsonschema", "python3-watchdog", "python3-systemd"):
        assert re.search(rf"(^|[ ,]){dep}([ ,(]|$)", depends), depends


def test_installed_staticpodctl_runs(installed_pkg: Path, tmp_path: Path) -> None:
    version = run("/usr/bin/staticpodctl", "--version", cwd=tmp_path).stdout
    assert __version__ in version
    where = run("/usr/bin/python3", "-c", "import staticpodd; print(staticpodd.__file__)", cwd=tmp_path).stdout
    assert where.startswith("/usr/lib/python3/dist-packages/staticpodd/"), where
    root = tmp_path / "node"
    (root / "etc/kubernetes/manifests").mkdir(parents=True)
    r = run("/usr/bin/staticpodctl", "--root", str(root), "status", cwd=tmp_path)
    assert "etc/kubernetes/manifests" in r.stdout
    status = json.loads(run("/usr/bin/staticpodctl", "--root", str(root), "status", "--json", cwd=tmp_path).stdout)
    assert isinstance(status, dict)
    run("/usr/bin/staticpodd", "--version", cwd=tmp_path)


def test_installed_validate_uses_the_shipped_pod_schemas(installed_pkg: Path, tmp_path: Path) -> None:
    """A type error only the Pod schema catches (`hostNetwork: "true"`) is refused by the
    installed staticpodctl: the schemas under /usr/share/staticpodd/schemas are found."""
    bad = tmp_path / "kube-apiserver.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\n  namespace: kube-system\n"
        "spec:\n  hostNetwork: \"true\"\n  containers:\n  - name: kube-apiserver\n"
        "    image: registry.k8s.io/kube-apiserver:v1.34.1\n"
    )
    r = run("/usr/bin/staticpodctl", "validate", str(bad), cwd=tmp_path, check=False)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "hostNetwork" in r.stdout + r.stderr


def test_nothing_is_shipped_in_the_manifest_directory(installed_pkg: Path) -> None:
    files = run("dpkg", "-L", PKG).stdout.split("\n")
    assert not [f for f in files if f.startswith("/etc/kubernetes")]


def test_the_config_file_is_a_conffile_with_the_documented_defaults(installed_pkg: Path, tmp_path: Path) -> None:
    conffiles = run("dpkg-query", "-W", "-f=${Conffiles}", PKG).stdout
    assert "/etc/staticpodd/staticpodd.yaml" in conffiles
    shipped = Path("/etc/staticpodd/staticpodd.yaml").read_bytes()
    assert shipped == (REPO / "schemas/staticpodd.example.yaml").read_bytes()
    code = (
        "from staticpodd.config import Config, load_config\n"
        "assert load_config('/etc/staticpodd/staticpodd.yaml') == Config(), 'not the defaults'\n"
    )
    run("/usr/bin/python3", "-c", code, cwd=tmp_path)


def test_installed_unit_verifies_with_real_binaries_and_man_pages(installed_pkg: Path, tmp_path: Path) -> None:
    unit = "/lib/systemd/system/staticpodd.service"
    assert Path(unit).is_file()
    r = run("systemd-analyze", "verify", unit, cwd=tmp_path, check=False)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    r = run("systemd-analyze", "security", "--offline=yes", "--threshold=15", unit, cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stdout
    assert Path("/etc/systemd/system/multi-user.target.wants/staticpodd.service").is_symlink()
    assert Path("/usr/lib/tmpfiles.d/staticpodd.conf").is_file()
    assert Path("/run/staticpodd").is_dir() and Path("/var/lib/staticpodd").is_dir()
    assert oct(Path("/var/lib/staticpodd").stat().st_mode & 0o777) == "0o700"


def test_man_pages_and_completion_are_installed(installed_pkg: Path, tmp_path: Path) -> None:
    for page, section in (("staticpodctl", 8), ("staticpodd", 8), ("staticpodd.yaml", 5), ("staticpodd-hooks", 5)):
        path = run("man", "-w", str(section), page, cwd=tmp_path).stdout.strip()
        assert path == f"/usr/share/man/man{section}/{page}.{section}.gz"
    text = run("man", "8", "staticpodctl", cwd=tmp_path, env={"MANWIDTH": "200", "MANPAGER": "cat"}).stdout
    for verb in ("park", "unpark", "apply", "rollback", "history", "status"):
        assert f"staticpodctl {verb}" in text, verb
    code = (
        "source /usr/share/bash-completion/completions/staticpodctl; "
        'COMP_WORDS=(staticpodctl par); COMP_CWORD=1; _staticpodctl; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    assert run("bash", "-c", code, cwd=tmp_path).stdout.split() == ["park"]


@pytest.mark.skipif(not journald_alive(), reason="journald is not running (.ci/setup starts it)")
def test_journalctl_x_explains_an_event_with_the_installed_catalog(installed_pkg: Path, tmp_path: Path) -> None:
    assert "staticpodd: " in run("journalctl", "--list-catalog").stdout
    marker = f"/pkgtest-{uuid.uuid4().hex}"
    code = (
        "from staticpodd.journal import Journal, Event\n"
        f"Journal('staticpodctl', {marker!r}).log(Event.PARKED, 'parked kube-scheduler', component='kube-scheduler')\n"
    )
    run("/usr/bin/python3", "-c", code, cwd=tmp_path)
    out = ""
    for _ in range(50):  # journald writes asynchronously: wait until the entry is readable
        out = run("journalctl", "-x", "--no-pager", f"STATICPODD_ROOT={marker}", check=False).stdout
        if "Subject:" in out:
            break
        time.sleep(0.1)
    assert "parked kube-scheduler" in out
    assert "Subject: Component parked: its static pod will be stopped" in out
    assert "staticpodctl unpark COMPONENT" in out


#: A kubeadm-style kube-scheduler manifest (trimmed), valid for every supported minor.
KUBE_SCHEDULER = """\
apiVersion: v1
kind: Pod
metadata:
  labels:
    component: kube-scheduler
    tier: control-plane
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-scheduler
    - --authentication-kubeconfig=/etc/kubernetes/scheduler.conf
    - --authorization-kubeconfig=/etc/kubernetes/scheduler.conf
    - --bind-address=127.0.0.1
    - --kubeconfig=/etc/kubernetes/scheduler.conf
    - --leader-elect=true
    image: registry.k8s.io/kube-scheduler:v1.34.1
    imagePullPolicy: IfNotPresent
    name: kube-scheduler
    resources:
      requests:
        cpu: 100m
    volumeMounts:
    - mountPath: /etc/kubernetes/scheduler.conf
      name: kubeconfig
      readOnly: true
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: /etc/kubernetes/scheduler.conf
      type: FileOrCreate
    name: kubeconfig
"""

E2E_UNIT = """\
[Unit]
Description=staticpodd end-to-end check (tests/packaging)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/bash /e2e-out/e2e_in_container.sh
ExecStopPost=/bin/systemctl --no-block poweroff
"""


@pytest.mark.skipif(shutil.which("systemd-nspawn") is None, reason="systemd-nspawn not installed (apt: systemd-container)")
def test_service_runs_under_systemd(installed_pkg: Path, tmp_path: Path) -> None:
    """The installed unit, with its whole sandbox, under a real systemd 252 as PID 1.

    This machine does not boot systemd, so a container is booted with systemd-nspawn: its /usr is
    the host's (read-only, with the package installed), its /etc a copy of the host's. A oneshot
    unit runs e2e_in_container.sh there: start (READY), reload, the daemon quarantining a stray
    and restoring an invalid edit inside its sandbox (renames within the ReadWritePaths= mount),
    park/unpark beside it, a refused reload, exit 78 without restart, a clean stop.
    """
    ct = tmp_path / "ct"
    for d in ("usr", "dev", "proc", "sys", "run", "tmp", "var/lib", "var/log", "var/tmp", "root", "e2e-out"):
        (ct / d).mkdir(parents=True)
    for link in ("bin", "sbin", "lib", "lib64"):
        if Path("/", link).is_symlink():
            (ct / link).symlink_to(f"usr/{link}")
    shutil.copytree("/etc", ct / "etc", symlinks=True, ignore_dangling_symlinks=True)
    shutil.rmtree(ct / "etc/kubernetes", ignore_errors=True)
    (ct / "etc/os-release").unlink()
    shutil.copy2("/usr/lib/os-release", ct / "etc/os-release")  # nspawn checks it before binding /usr
    (ct / "etc/machine-id").write_text("")
    (ct / "etc/systemd/system/staticpodd-e2e.service").write_text(E2E_UNIT)
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy2(Path(__file__).with_name("e2e_in_container.sh"), out)
    (out / "kube-scheduler.yaml").write_text(KUBE_SCHEDULER)
    r = run(
        "systemd-nspawn", "-q", "-D", str(ct), "--register=no", "--keep-unit", "--bind-ro=/usr",
        f"--bind={out}:/e2e-out", "-M", f"spd{uuid.uuid4().hex[:8]}", "-b", "systemd.wants=staticpodd-e2e.service",
        check=False, timeout=300,
    )
    log = (out / "log").read_text() if (out / "log").exists() else ""
    assert (out / "results").exists(), f"the container did not run the check:\n{r.stdout[-4000:]}{r.stderr[-4000:]}"
    results = dict(line.split("=", 1) for line in (out / "results").read_text().splitlines())
    context = f"{results}\n--- log ---\n{log[-6000:]}"
    assert results.get("done") == "1", context
    assert results["start_rc"] == "0" and results["active"] == "active", context
    assert results["status_text"], context  # STATUS= from the daemon
    assert results["ctl_status_rc"] == "0", context
    assert "daemon: running" in (out / "status.txt").read_text(), context
    assert results["reload_rc"] == "0", context
    assert results["stray_moved_out"] == "0" and "kube-scheduler.yaml.bak" in results["quarantined"], context
    assert results["invalid_edit_differs"] == "1" and results["invalid_edit_restored"] == "0", context
    assert results["park_rc"] == "0" and results["unpark_rc"] == "0", context
    assert results["bad_reload_rc"] != "0" and results["active_after_bad_reload"] == "active", context
    assert results["bad_start_rc"] != "0", context
    assert results["bad_start_state"] == "failed" and results["bad_start_status"] == "78", context
    assert results["bad_start_restarts"] == "0", context
    assert results["fixed_start_rc"] == "0", context
    assert results["stop_result"] == "success" and results["stop_status"] == "0", context
    journal = (out / "journal-x.txt").read_text()
    assert "Subject: staticpodd configuration refused" in journal, journal[-4000:]


def test_purge_leaves_the_machine_clean(installed_pkg: Path) -> None:
    run("dpkg", "--purge", PKG)
    assert not installed()
    for path in ("/lib/systemd/system/staticpodd.service", "/usr/bin/staticpodctl", "/etc/staticpodd",
                 "/usr/lib/systemd/catalog/staticpodd.catalog", "/run/staticpodd",
                 "/etc/systemd/system/multi-user.target.wants/staticpodd.service"):
        assert not os.path.lexists(path), path
    assert "staticpodd: " not in run("journalctl", "--list-catalog").stdout
