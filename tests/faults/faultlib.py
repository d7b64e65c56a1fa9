"""Helpers for the fault suite (imported as ``faultlib``).

``recorded_digests``: every digest the version store holds for a component, read straight from
SQLite (read-only), so the tests check history without going through the code under test.
``Tmpfs``: a real small tmpfs mounted on a directory (the tests run as root), to fill to a
chosen level and to remount read-only.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def recorded(root: Path, component: str | None = None) -> list[tuple[str, int, str, str, bytes]]:
    """``(component, seq, action, actor, bytes)`` of every version, oldest first, read straight
    from ``<root>/var/lib/staticpodd/versions.sqlite3`` (read-only)."""
    db = root / "var/lib/staticpodd/versions.sqlite3"
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        con.execute("SELECT 1 FROM versions LIMIT 1").fetchall()
    except sqlite3.OperationalError:  # a read-only filesystem without a WAL index: no locking
        con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        q = ("SELECT v.component, v.seq, v.action, v.actor, b.data, b.codec FROM versions v JOIN blobs b "
             "ON b.digest = v.digest")
        args: tuple = ()
        if component is not None:
            q += " WHERE v.component = ?"
            args = (component,)
        from staticpodd.store.blobcodec import decode  # blobs are stored compressed (schema 3)

        return [(r[0], r[1], r[2], r[3], decode(r[5], r[4])) for r in con.execute(q + " ORDER BY v.id", args)]
    finally:
        con.close()


def recorded_digests(root: Path, component: str | None = None) -> set[str]:
    return {sha(r[4]) for r in recorded(root, component)}


def ctl_cmd(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "staticpodd.cli", *args, "--root", str(root)]


def ctl_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def run_ctl(root: Path, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    """staticpodctl as a real process on ``root``."""
    return subprocess.run(ctl_cmd(root, *args), env=ctl_env(**env), capture_output=True, text=True,
                          timeout=timeout)


def run_ctl_root_first(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """staticpodctl VERB --root ROOT ARGS…: for argument lists that end in ``-- NAME``."""
    verb, *rest = args
    return subprocess.run([sys.executable, "-m", "staticpodd.cli", verb, "--root", str(root), *rest], env=ctl_env(),
                          capture_output=True, text=True, timeout=timeout)


def assert_no_traceback(*texts: str) -> None:
    for t in texts:
        assert "Traceback" not in t, t
        assert "internal error" not in t, t


class Tmpfs:
    """A tmpfs of ``size`` bytes mounted on ``path`` (unmounted by :meth:`close`)."""

    def __init__(self, path: Path, size: int) -> None:
        if os.geteuid() != 0:
            pytest.fail("the fault suite mounts tmpfs and needs root (CI runs it as root)")
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True)

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill_to(self, free_bytes: int, name: str = ".ballast") -> None:
        """Leave about ``free_bytes`` free by growing (or shrinking) one ballast file."""
        ballast = self.path / name
        have = ballast.stat().st_size if ballast.exists() else 0
        target = max(0, have + self.free() - free_bytes)
        # one descriptor for the truncate and the writes: between a truncate and a reopen the
        # daemon under test can take the freed space, and the reopen then fails with ENOSPC
        with open(ballast, "ab") as fh:
            fh.truncate(0)
            chunk = b"\0" * 4096
            left = target
            try:
                while left > 0:
                    n = fh.write(chunk[: min(4096, left)])
                    left -= n
                fh.flush()
            except OSError:
                pass

    def unfill(self, name: str = ".ballast") -> None:
        try:
            os.unlink(self.path / name)
        except FileNotFoundError:
            pass

    def remount(self, opts: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{opts}", str(self.path)], check=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)
