"""Small readers for the shipped systemd files, shared by the tests in this directory."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYSTEMD_DIR = REPO / "systemd"
UNIT = SYSTEMD_DIR / "staticpodd.service"
CATALOG = SYSTEMD_DIR / "staticpodd.catalog"
TMPFILES = SYSTEMD_DIR / "staticpodd.tmpfiles"

#: The host's unit tree, copied into a temporary --root so that `systemd-analyze verify --root`
#: finds sysinit.target & co. (Debian 12 is merged-/usr: /lib is /usr/lib.)
HOST_UNIT_DIR = Path("/usr/lib/systemd/system")


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """Parse a systemd unit file: {section: {key: [values in order]}}.

    Repeated keys accumulate (as systemd does for list settings); comments (# and ;) and
    backslash continuation lines are handled. An empty assignment is kept as "".
    """
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        m = re.fullmatch(r"\[([^\]]+)\]", line)
        if m:
            current = sections.setdefault(m.group(1), {})
            continue
        assert current is not None, f"{path}: assignment outside a section: {line!r}"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def words(values: list[str]) -> list[str]:
    """All space-separated words of a list setting, in order."""
    return [w for v in values for w in v.split()]


def verify_root(tmp_path: Path, unit: Path = UNIT) -> Path:
    """A temporary root for `systemd-analyze verify --root`: the host's unit tree, ``unit``
    installed unchanged in etc/systemd/system, and stand-in executables at the paths the unit
    names (the real ones exist only once the package is installed)."""
    root = tmp_path / "root"
    shutil.copytree(HOST_UNIT_DIR, root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy2(unit, root / "etc/systemd/system" / unit.name)
    for key in ("ExecStart", "ExecReload", "ExecStartPre", "ExecStartPost", "ExecStop"):
        for value in parse_unit(unit).get("Service", {}).get(key, []):
            exe = value.lstrip("-@:+!").split()[0]
            stub = root / exe.lstrip("/")
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text("#!/bin/sh\nexit 0\n")
            stub.chmod(0o755)
    return root
