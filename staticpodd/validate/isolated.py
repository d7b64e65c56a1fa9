"""Judging a big file in a short-lived child process, so a long-lived process keeps no peak.

Decoding and validating a file near the kubelet's 10 MiB limit builds some 40 times its size in
Python objects (a 9.5 MB pod: about 400 MB for 4 s). Python frees them, but its allocator and
glibc's rarely give all of that back, and the daemon lives for months: one edit of such a file
left it at hundreds of MB. With :func:`enable` (the daemon calls it at start), a file over
:data:`ISOLATE_OVER` bytes is judged by a child process (``python -I``, this module) instead: the
child decodes and validates it, sends back only what the caller keeps (the findings, and the
:class:`~staticpodd.validate.podfacts.PodFacts` the checks across files need), and exits, taking
its heap with it. The verdict is the one the same code gives in-process (the child runs it);
when the child cannot give one (it was killed, e.g. out of memory), the file is judged
in-process, as without isolation: a verdict is never guessed.

The last few results are kept in memory by (digest, path, options): the daemon's drift scan
(:meth:`staticpodd.engine.gate.GateCore._verdict`) and its directory findings
(:func:`staticpodd.validate.directory.check_directory`) judge one edit once between them.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from collections.abc import Callable

    from staticpodd.validate.context import Options
    from staticpodd.validate.findings import Finding
    from staticpodd.validate.podfacts import PodFacts

    Judged = tuple[list[Finding], tuple[Finding, ...], PodFacts | None]

#: Files larger than this are judged in a child once :func:`enable` was called: staticpodd's
#: default ``max_manifest_bytes`` (1 MiB). A control-plane manifest is a few KB, so normal
#: passes never start a process; a file this big costs the child some 40 times its size.
ISOLATE_OVER = 1 << 20

#: How many results are kept (each is a few findings and facts, not the document).
KEEP = 4

_enabled = False
_kept: dict[tuple[str, str, Options], Judged] = {}


def enable(on: bool = True) -> None:
    """Judge files over :data:`ISOLATE_OVER` bytes in a child process from now on (the daemon)."""
    global _enabled
    _enabled = on
    _kept.clear()


def applies(data: bytes) -> bool:
    """Whether ``data`` is judged in a child (isolation enabled, and ``data`` is big enough)."""
    return _enabled and len(data) > ISOLATE_OVER


def judge(data: bytes, display: str, options: Options, here: Callable[[bytes, str, Options], Judged]) -> Judged:
    """``(findings, own, facts)`` of the live file ``display`` holding ``data``: what
    :func:`staticpodd.validate.validate_bytes` finds, and what
    :func:`staticpodd.validate.directory._judge_file` makes of it (its own findings with
    ``stray``; its pod's facts, None when it defines no pod), as
    :func:`staticpodd.validate.directory.judge_all` gives them. Judged in a child process
    (:mod:`staticpodd.validate.child`); by ``here`` (that function, in this process) when the
    child fails. Never raises for bad input."""
    import hashlib

    key = (hashlib.sha256(data).hexdigest(), display, options)
    found = _kept.get(key)
    if found is not None:
        return found
    found = _in_child(data, display, options)
    if found is None:
        found = here(data, display, options)
    while len(_kept) >= KEEP:
        del _kept[next(iter(_kept))]
    _kept[key] = found
    return found


#: The child's program: ``python -I`` (no PYTHONPATH, no current directory on the path: nothing
#: another user put there is imported), the directory this package was loaded from added last.
_CHILD = ("import sys; sys.path.append(sys.argv[1]); "
          "from staticpodd.validate.child import main; sys.exit(main(sys.argv[1]))")


def package_root() -> str:
    """The directory holding the ``staticpodd`` package this module was loaded from."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_child(data: bytes, display: str, options: Options) -> Judged | None:
    """:func:`staticpodd.validate.directory.judge_all` in a child process
    (:mod:`staticpodd.validate.child`), over pipes (nothing on disk another user could
    touch); None when the child did not answer, or did not run this very code (another
    ``staticpodd`` first on its path: it says so and exits 3)."""
    import pickle
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-I", "-c", _CHILD, package_root()],
                              input=pickle.dumps((data, display, options), protocol=pickle.HIGHEST_PROTOCOL),
                              capture_output=True, timeout=600, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    try:
        found = pickle.loads(done.stdout)  # our own child's answer, over a pipe only it holds
    except Exception:  # a truncated answer: judged here instead
        return None
    return found if isinstance(found, tuple) and len(found) == 3 else None
