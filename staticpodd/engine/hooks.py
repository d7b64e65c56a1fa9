"""hooks.d: operator executables run before and after each verb, run-parts style.

Layout (under ``Layout.hooks_dir``, ``/etc/staticpodd/hooks.d`` on a node)::

    hooks.d/pre-apply.d/10-drain-check      runs before an apply; non-zero aborts it
    hooks.d/post-apply.d/50-notify          runs after an apply; failure is logged only
    hooks.d/{pre,post}-{apply,park,unpark,rollback}.d/

Which entries run (documented contract; differs from Debian ``run-parts`` on purpose):

- Entries run in byte order of their names (``LC_ALL=C`` sort, as ``run-parts`` does).
- Skipped silently (reported as ``status="skipped"``, never run, never a failure): names that
  start with ``.``; names ending in ``~``; names containing ``.dpkg-`` (``.dpkg-old``,
  ``.dpkg-dist``, ``.dpkg-new``, ``.dpkg-tmp``) or ``.ucf-`` (``.ucf-old``, ``.ucf-dist``,
  ``.ucf-new``); names ending in ``.rpmsave``, ``.rpmnew`` or ``.rpmorig``; Emacs autosaves
  ``#name#``; ``*.swp``; subdirectories and other non-regular entries; regular files with no
  execute bit (``chmod -x`` is how an operator disables a hook). Unlike Debian ``run-parts``
  without ``--lsbsysinit``, names with dots such as ``10-drain.sh`` *do* run.
- Trusted (else ``status="refused"``): the hook file (after following a symlink) and the
  directories ``hooks.d/`` and ``hooks.d/<phase>-<verb>.d/`` are owned by ``trusted_uid``
  (root) and not group- or world-writable. Anyone who could write there could otherwise run
  code as root at the next apply.

Fail closed: a refused *pre*-hook is a failure and aborts the operation before any pre-hook
runs. A pre-hook exists because an operator wants a check before every change (drain, quorum,
maintenance window); silently skipping it because its mode is wrong would let the change through
with the check never made. A refused *post*-hook is logged and reported, and the others run.

Each hook runs with an empty environment except ``PATH`` (:data:`SAFE_PATH`), ``LANG=C.UTF-8``
and the ``STATICPODD_*`` variables in :data:`HOOK_ENV_KEYS`; stdin is ``/dev/null``; the
working directory is ``/``; it is the leader of a new session and process group. When it
exits, or when ``timeout`` expires, its whole process group is killed (SIGTERM, then SIGKILL
after ``kill_grace`` seconds), so a hook cannot leave background children behind (use
``setsid`` or ``systemd-run`` to start something that must outlive it). The same happens when
the process running the hooks dies (``staticpodctl`` SIGKILLed, the daemon killed by its
watchdog): a small watcher started beside each hook (:data:`_WATCHER`, in a session of its own)
gets SIGTERM from the kernel when its parent dies (``PR_SET_PDEATHSIG``) and kills the hook's
group the same way, so no pre-hook goes on running for a verb that no longer exists.
"""

from __future__ import annotations

import os
import re
import select
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from ..errors import HookFailed
from ..journal import ERR, WARNING, Event, Journal
from ..layout import Layout
from ..record import FrozenRecord, Record

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import IO, Any, Final

PHASES = ("pre", "post")
VERBS = ("apply", "park", "unpark", "rollback")

#: The only PATH a hook gets (the caller's PATH is never passed through).
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: Variables every hook sees (empty string when not known, e.g. STATICPODD_VERSION before the
#: first recorded version). STATICPODD_VERB, STATICPODD_PHASE, STATICPODD_MANIFEST_DIR and
#: STATICPODD_ROOT are set by :func:`run_hooks` itself.
HOOK_ENV_KEYS = (
    "STATICPODD_COMPONENT",  # e.g. kube-scheduler
    "STATICPODD_FILE",  # full path of the component's live manifest, e.g. /etc/.../kube-scheduler.yaml
    "STATICPODD_VERSION",  # version seq recorded by the operation ("" when not known yet, e.g. pre-apply)
    "STATICPODD_DIGEST",  # sha256 hex of those bytes ("" if none)
    "STATICPODD_ACTOR",  # who asked (user name, "staticpodd", "ansible", ...)
    "STATICPODD_REASON",  # free text given with --reason ("" if none)
    "STATICPODD_VERB",  # apply | park | unpark | rollback
    "STATICPODD_PHASE",  # pre | post
    "STATICPODD_MANIFEST_DIR",  # the kubelet's staticPodPath
    "STATICPODD_ROOT",  # --root ("/" on a node)
)

#: How many trailing stderr lines go into HookFailed and the journal.
STDERR_TAIL_LINES = 5

_READ_TAIL_BYTES = 64 * 1024

_SKIP_RE = re.compile(
    r"""~$             # editor backups
      | ^\#.*\#$       # Emacs autosave
      | \.dpkg-        # dpkg conffile leftovers
      | \.ucf-         # ucf conffile leftovers
      | \.rpm(?:save|new|orig)$
      | \.swp$
    """,
    re.VERBOSE,
)


def skip_reason(name: str) -> str | None:
    """Why run-parts rules skip a hook *name* (before looking at the file), or None to consider it.

    See the module docstring for the list; e.g. ``skip_reason("10-x.dpkg-old")`` is
    ``"package-manager or editor leftover"``, ``skip_reason("10-x.sh")`` is None.
    """
    if name.startswith("."):
        return "dot-file"
    if _SKIP_RE.search(name):
        return "package-manager or editor leftover"
    return None


class HookResult(FrozenRecord):
    """The outcome of one entry of a ``<phase>-<verb>.d`` directory.

    ``status``: ``ok`` (exit 0), ``failed`` (non-zero exit), ``signaled`` (killed by a signal
    not ours), ``timeout`` (killed by us after ``timeout`` seconds), ``refused`` (not trusted,
    never run), ``skipped`` (run-parts rules or no execute bit, never run).
    ``returncode``: exit status, or None. ``signal``: the signal number that ended it, or None.
    ``duration``: wall seconds (0.0 when not run). ``stderr_tail``/``stdout_tail``: the last
    :data:`STDERR_TAIL_LINES` lines. ``reason``: why it was refused or skipped.
    """

    name: Final[str]
    path: Final[Path]
    phase: Final[str]
    verb: Final[str]
    status: Final[str]
    returncode: Final[int | None]
    signal: Final[int | None]
    duration: Final[float]
    stderr_tail: Final[tuple[str, ...]]
    stdout_tail: Final[tuple[str, ...]]
    reason: Final[str | None]

    def __init__(self, name: str, path: Path, phase: str, verb: str, status: str, returncode: int | None = None,
                 signal: int | None = None, duration: float = 0.0, stderr_tail: tuple[str, ...] = (),
                 stdout_tail: tuple[str, ...] = (), reason: str | None = None) -> None:
        self.name = name
        self.path = path
        self.phase = phase
        self.verb = verb
        self.status = status
        self.returncode = returncode
        self.signal = signal
        self.duration = duration
        self.stderr_tail = stderr_tail
        self.stdout_tail = stdout_tail
        self.reason = reason

    @property
    def ok(self) -> bool:
        """True for ``ok`` and ``skipped``: nothing went wrong."""
        return self.status in ("ok", "skipped")

    def describe(self) -> str:
        """One clause for messages: ``exited with status 3``, ``was killed by SIGKILL`` …"""
        if self.status == "ok":
            return "succeeded"
        if self.status == "failed" and self.returncode is None:
            return f"could not be started ({self.reason})"
        if self.status == "failed":
            return f"exited with status {self.returncode}"
        if self.status == "signaled":
            return f"was killed by {_signame(self.signal)}"
        if self.status == "timeout":
            return f"timed out after {self.duration:.1f}s and its process group was killed"
        if self.status == "refused":
            return f"was refused ({self.reason})"
        return f"was skipped ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for ``--json`` replies (paths as strings)."""
        return {
            "name": self.name,
            "path": str(self.path),
            "phase": self.phase,
            "verb": self.verb,
            "status": self.status,
            "returncode": self.returncode,
            "signal": self.signal,
            "duration": round(self.duration, 3),
            "stderr_tail": list(self.stderr_tail),
            "stdout_tail": list(self.stdout_tail),
            "reason": self.reason,
        }


class _Candidate(Record):
    name: str
    path: Path
    skip: str | None
    refuse: str | None

    def __init__(self, name: str, path: Path, skip: str | None = None, refuse: str | None = None) -> None:
        self.name = name
        self.path = path
        self.skip = skip
        self.refuse = refuse


def _signame(signum: int | None) -> str:
    if signum is None:
        return "a signal"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def hook_env(
    layout: Layout,
    *,
    component: str,
    file_name: str,
    version: int | str | None = None,
    digest: str | None = None,
    actor: str | None = None,
    reason: str | None = None,
) -> dict[str, str]:
    """Build the ``env`` argument of :func:`run_hooks` from an operation's facts.

    ``file_name`` is the component's file name in the manifest directory (``STATICPODD_FILE`` is
    its full live path, also for a parked component: where it lives when live). ``version`` is
    the seq number; None values become ``""``.
    """
    return {
        "STATICPODD_COMPONENT": component,
        "STATICPODD_FILE": str(layout.live_path(file_name)),
        "STATICPODD_VERSION": "" if version is None else str(version),
        "STATICPODD_DIGEST": digest or "",
        "STATICPODD_ACTOR": actor or "",
        "STATICPODD_REASON": reason or "",
    }


def _trust_problem(st: os.stat_result, trusted_uid: int, what: str) -> str | None:
    if st.st_uid != trusted_uid:
        return f"{what} is owned by uid {st.st_uid}, not uid {trusted_uid}"
    if st.st_mode & stat.S_IWOTH:
        return f"{what} is world-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    if st.st_mode & stat.S_IWGRP:
        return f"{what} is group-writable (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _scan(phase_dir: Path, hooks_dir: Path, trusted_uid: int) -> list[_Candidate]:
    """List the entries of one phase directory with their skip/refuse verdicts."""
    try:
        dir_st = os.stat(phase_dir)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(dir_st.st_mode):
        return [_Candidate(phase_dir.name, phase_dir, refuse=f"{phase_dir} is not a directory")]
    dir_problem = _trust_problem(dir_st, trusted_uid, f"directory {phase_dir}")
    if dir_problem is None:
        try:
            dir_problem = _trust_problem(os.stat(hooks_dir), trusted_uid, f"directory {hooks_dir}")
        except OSError as exc:
            dir_problem = f"cannot stat {hooks_dir}: {exc.strerror}"
    names = sorted(os.listdir(phase_dir), key=os.fsencode)
    out: list[_Candidate] = []
    for name in names:
        path = phase_dir / name
        cand = _Candidate(name, path, skip=skip_reason(name))
        if cand.skip is None:
            try:
                st = os.stat(path)  # follows symlinks, as run-parts does
            except OSError as exc:
                cand.skip = f"cannot stat: {exc.strerror}"  # dangling symlink
            else:
                if not stat.S_ISREG(st.st_mode):
                    cand.skip = "not a regular file"
                elif not st.st_mode & 0o111:
                    cand.skip = "not executable"
                else:
                    cand.refuse = dir_problem or _trust_problem(st, trusted_uid, "hook")
        out.append(cand)
    return out


def _tail(fh: IO[bytes], lines: int) -> tuple[str, ...]:
    fh.flush()
    size = fh.seek(0, os.SEEK_END)
    fh.seek(max(0, size - _READ_TAIL_BYTES))
    data = fh.read().decode("utf-8", "replace")
    kept = [ln.rstrip("\r") for ln in data.splitlines() if ln.strip()]
    return tuple(kept[-lines:])


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until ``proc`` exits WITHOUT reaping it (so its pgid cannot be reused meanwhile).

    Returns False on timeout. Uses a pidfd (Linux >= 5.3); falls back to polling waitid(WNOWAIT).
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            return bool(poller.poll(max(0.0, timeout) * 1000.0))
        finally:
            os.close(pidfd)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if info is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


#: The watcher beside each hook: argv ``pgid parent_pid kill_grace``. On its parent's death the
#: kernel sends it SIGTERM (prctl PR_SET_PDEATHSIG, Linux); it then kills the hook's process group
#: (SIGTERM, ``kill_grace`` seconds, SIGKILL) and exits. The parent kills it (SIGKILL) as soon as
#: the hook has exited, before the hook is reaped, so the pgid it holds is never a reused one.
_WATCHER = r"""
import ctypes, os, signal, sys, time
pgid, parent, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
def end(*_):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except OSError:
            break
        if sig == signal.SIGTERM:
            time.sleep(grace)
    os._exit(0)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGINT, signal.SIG_IGN)
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
if os.getppid() != parent:
    end()
while True:
    signal.pause()
"""


def _start_watcher(pgid: int, kill_grace: float) -> subprocess.Popen[bytes] | None:
    """The :data:`_WATCHER` for the hook whose process group is ``pgid``; None when it cannot be
    started (the hook then runs unwatched, as before: a failure here must not fail the verb)."""
    import sys

    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHER, str(pgid), str(os.getpid()), repr(kill_grace)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", start_new_session=True, close_fds=True,
        )
    except OSError:
        return None


def _stop_watcher(watcher: subprocess.Popen[bytes] | None) -> None:
    if watcher is None:
        return
    try:
        watcher.kill()
    except OSError:
        pass
    watcher.wait()


def _run_one(
    cand: _Candidate, phase: str, verb: str, env: dict[str, str], timeout: float, kill_grace: float
) -> HookResult:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [str(cand.path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                cwd="/",
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:  # ENOEXEC (no #! line), EACCES (noexec mount) ...
            return HookResult(
                cand.name,
                cand.path,
                phase,
                verb,
                "failed",
                returncode=None,
                stderr_tail=(f"cannot execute: {exc.strerror}",),
                reason=f"cannot execute: {exc.strerror}",
            )
        watcher = _start_watcher(proc.pid, kill_grace)
        try:
            timed_out = not _wait_exit(proc, timeout)
            if timed_out:
                _killpg(proc.pid, signal.SIGTERM)
                _wait_exit(proc, kill_grace)
        finally:
            _stop_watcher(watcher)
        # The leader has exited (or is about to be killed) but is not reaped yet, so its pgid is
        # still ours: SIGKILL whatever is left in its group (children that ignored SIGTERM, or
        # that a hook which exited normally left behind).
        _killpg(proc.pid, signal.SIGKILL)
        rc = proc.wait()
        duration = time.monotonic() - start
        stderr_tail = _tail(err, STDERR_TAIL_LINES)
        stdout_tail = _tail(out, STDERR_TAIL_LINES)
    if timed_out:
        status, code, sig = "timeout", None, (-rc if rc < 0 else None)
    elif rc < 0:
        status, code, sig = "signaled", None, -rc
    else:
        status, code, sig = ("ok" if rc == 0 else "failed"), rc, None
    return HookResult(
        cand.name,
        cand.path,
        phase,
        verb,
        status,
        returncode=code,
        signal=sig,
        duration=duration,
        stderr_tail=stderr_tail,
        stdout_tail=stdout_tail,
    )


def _log_failure(journal: Journal | None, result: HookResult, env: Mapping[str, str], fatal: bool) -> None:
    if journal is None:
        return
    what = "aborted the operation" if fatal else "failed; the operation was already done"
    from ..node.sandbox import NO_NETWORK_NOTE, network_available

    offline = not network_available()  # e.g. run by the daemon in its sandbox: say so
    journal.log(
        Event.HOOK_FAILED,
        f"{result.phase}-{result.verb} hook {result.name} {result.describe()}; {what}"
        + (f" ({NO_NETWORK_NOTE})" if offline else ""),
        hook_network="none" if offline else None,
        priority=ERR if fatal else WARNING,
        hook=str(result.path),
        hook_phase=result.phase,
        hook_verb=result.verb,
        hook_status=result.status,
        exit_status=result.returncode,
        signal=result.signal,
        hook_reason=result.reason,
        hook_stderr="\n".join(result.stderr_tail) or None,
        component=env.get("STATICPODD_COMPONENT") or None,
        version=env.get("STATICPODD_VERSION") or None,
        digest=env.get("STATICPODD_DIGEST") or None,
        actor=env.get("STATICPODD_ACTOR") or None,
        reason=env.get("STATICPODD_REASON") or None,
    )


def _raise_failed(result: HookResult) -> None:
    tail = result.stderr_tail
    msg = f"{result.phase}-{result.verb} hook {result.name} {result.describe()}"
    if tail:
        msg += "; its stderr ended with: " + " | ".join(tail)
    msg += "; nothing was changed"
    raise HookFailed(
        msg,
        path=str(result.path),
        hint=(
            "fix or remove the hook (chmod -x disables it), then run the command again"
            if result.status != "refused"
            else "make the hook and its directories owned by root and not group/world-writable"
        ),
        details={"hook": result.to_dict()},
    )


def run_hooks(
    layout: Layout,
    phase: str,
    verb: str,
    env: Mapping[str, str],
    *,
    timeout: float,
    journal: Journal | None,
    trusted_uid: int = 0,
    kill_grace: float = 2.0,
) -> list[HookResult]:
    """Run ``<layout.hooks_dir>/<phase>-<verb>.d/*`` in name order; see the module docstring.

    ``phase``: ``"pre"`` or ``"post"``; ``verb``: ``"apply"``, ``"park"``, ``"unpark"`` or
    ``"rollback"``. ``env``: ``STATICPODD_*`` variables, normally from :func:`hook_env`; keys
    outside that prefix are a programming error (ValueError). ``timeout``: seconds per hook (>0).
    ``journal``: where failures are logged as ``Event.HOOK_FAILED`` (None: not logged).
    ``trusted_uid``: the owner hooks and their directories must have (0 on a node; tests pass
    their own uid). ``kill_grace``: seconds between SIGTERM and SIGKILL after a timeout.

    Returns one :class:`HookResult` per directory entry (skipped ones included), in run order;
    ``[]`` when the directory does not exist.

    pre: every entry is checked before any runs; the first refused or failing hook (non-zero
    exit, signal, timeout) raises ``errors.HookFailed`` naming the hook, how it failed and the
    last lines of its stderr (``details["hook"]`` is its ``to_dict()``); later pre-hooks do not
    run. The caller must then change nothing.
    post: every hook runs; failures and refusals are logged (WARNING) and returned, never raised.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, not {phase!r}")
    if verb not in VERBS:
        raise ValueError(f"verb must be one of {VERBS}, not {verb!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
    for key, value in env.items():
        if not key.startswith("STATICPODD_"):
            raise ValueError(f"hook environment key {key!r} does not start with STATICPODD_")
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"hook environment value for {key} must be a str without NUL")

    child_env = {key: "" for key in HOOK_ENV_KEYS}
    child_env.update(env)
    child_env.update(
        PATH=SAFE_PATH,
        LANG="C.UTF-8",
        STATICPODD_VERB=verb,
        STATICPODD_PHASE=phase,
        STATICPODD_MANIFEST_DIR=str(layout.manifest_dir),
        STATICPODD_ROOT=str(layout.root),
    )

    phase_dir = layout.hooks_dir / f"{phase}-{verb}.d"
    candidates = _scan(phase_dir, layout.hooks_dir, trusted_uid)
    fatal = phase == "pre"

    if fatal:
        for cand in candidates:
            if cand.skip is None and cand.refuse is not None:
                refused = HookResult(cand.name, cand.path, phase, verb, "refused", reason=cand.refuse)
                _log_failure(journal, refused, child_env, fatal=True)
                _raise_failed(refused)

    results: list[HookResult] = []
    for cand in candidates:
        if cand.skip is not None:
            results.append(HookResult(cand.name, cand.path, phase, verb, "skipped", reason=cand.skip))
            continue
        if cand.refuse is not None:
            result = HookResult(cand.name, cand.path, phase, verb, "refused", reason=cand.refuse)
        else:
            result = _run_one(cand, phase, verb, child_env, timeout, kill_grace)
        results.append(result)
        if not result.ok:
            _log_failure(journal, result, child_env, fatal=fatal)
            if fatal:
                _raise_failed(result)
    return results
