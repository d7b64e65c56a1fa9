"""Go fixtures that the test command builds in the background while the tiers needing none run.

On a new machine the Go builds (the control-plane set, the second kubelet minor, containerd 2)
take about 20 min of wall time on 2 cores. ``.ci/test`` starts them under ``nice`` before pytest
and the collection orders the tiers that need them last
(tests/conftest.py), so the half hour of other tiers hides them. Those tiers are handed
``wait:STATE/NAME`` where a directory would go (``STATICPODD_CP_BIN``, ``STATICPODD_E2E_BIN``):
:func:`resolve` waits for the build's outcome.

The builder writes, for each build NAME in its STATE directory:

- ``NAME.dir``: the directory the build printed (written when it succeeded, by rename: whole);
- ``NAME.failed``: its exit status (it failed), with its output in ``NAME.log``;
- ``builder.pid``: the builder's PID, so that a builder that died leaves no one waiting forever.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from lab_host import LabError, _alive

WAIT = "wait:"


class BuildFailed(LabError):
    """A background build failed or stopped; the message carries the end of its log (a LabError:
    the labs' ``bin_dir`` passes it on as their own failure)."""


def _builder_alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return True  # not written yet: the builder is starting
    return _alive(pid)


def _log_tail(base: Path, chars: int = 3000) -> str:
    try:
        return base.with_suffix(".log").read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"


def resolve(value: str, *, timeout: float = 3600.0, poll: float = 1.0) -> Path:
    """The directory named by ``value``: itself, or for ``wait:STATE/NAME`` the directory the
    background build NAME produced, once it has (blocks up to ``timeout`` seconds, checking every
    ``poll`` seconds; a line on stderr each minute says what is awaited).

    Raises BuildFailed when the build failed, its builder died without a result, or ``timeout``
    passed; the message names the build and carries the end of its log.
    """
    if not value.startswith(WAIT):
        return Path(value)
    base = Path(value[len(WAIT):])
    done, failed, pid_file = base.with_suffix(".dir"), base.with_suffix(".failed"), base.parent / "builder.pid"
    start = last_note = time.monotonic()
    while True:
        if done.exists():
            return Path(done.read_text().strip())
        if failed.exists():
            raise BuildFailed(f"the background build {base.name} failed ({failed.read_text().strip()}); "
                              f"its log ({base.with_suffix('.log')}) ends:\n{_log_tail(base)}")
        if not _builder_alive(pid_file):
            if done.exists() or failed.exists():  # finished between the two looks
                continue
            raise BuildFailed(f"the background builder ({pid_file}) stopped without a result for {base.name}; "
                              f"its log ends:\n{_log_tail(base)}")
        now = time.monotonic()
        if now - start > timeout:
            raise BuildFailed(f"the background build {base.name} has not finished after {timeout:.0f} s; "
                              f"its log ends:\n{_log_tail(base)}")
        if now - last_note >= 60:
            print(f"waiting for the background build {base.name} ({now - start:.0f} s so far)", file=sys.stderr)
            last_note = now
        time.sleep(poll)
