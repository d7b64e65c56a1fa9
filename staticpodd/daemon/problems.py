"""The daemon's current problems: what is wrong now, as the heartbeat and the STATUS= line say it.

:class:`Problems` is the board the daemon's parts report to and clear from: runtime problems
keyed by what failed (``lock``, ``reconcile``, ``watch``, ``read-only``, ``prune``, ``metrics``,
``unpark:<component>``), invalid live files by file name, broken parks and live files named like
another file's component (both from the last ``engine.status()``), and the directory findings
that are errors or warnings. :meth:`Problems.listing` gives them all, in that order, as the
heartbeat's ``problems`` (:class:`~staticpodd.daemon.heartbeat.ProblemList`).

A problem is a dict ``{code, severity, path, component, message}`` (``component`` may be left
out of a runtime one). A problem is replaced when it changes, never edited in place: the
heartbeat encoder compares what it encoded last (:class:`~staticpodd.daemon.heartbeat.HeartbeatEncoder`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .heartbeat import ProblemList


class Problems:
    """Every current problem of the daemon, each kind behind its own methods."""

    def __init__(self) -> None:
        self._runtime: dict[str, dict[str, Any]] = {}  # e.g. lock timeout, watch error
        self._invalid_live: dict[str, dict[str, Any]] = {}  # file_name -> problem
        self._broken_parks: dict[str, dict[str, Any]] = {}
        self._names_taken: dict[str, dict[str, Any]] = {}  # live file named like another's component
        # the directory findings that are problems (errors, warnings), as findings: the heartbeat
        # makes its dicts only when it encodes them again (ProblemList)
        self._directory: list[Any] = []

    # runtime problems, keyed by what failed

    def set(self, key: str, problem: dict[str, Any]) -> None:
        """Report the runtime problem ``key`` (replacing the one it had)."""
        self._runtime[key] = problem

    def clear(self, key: str) -> None:
        """The runtime problem ``key`` is over (nothing when there was none)."""
        self._runtime.pop(key, None)

    def get(self, key: str) -> dict[str, Any] | None:
        """The runtime problem ``key``, or None."""
        return self._runtime.get(key)

    def __contains__(self, key: object) -> bool:
        """Whether the runtime problem ``key`` is current."""
        return key in self._runtime

    # invalid live files, by file name

    def set_invalid(self, file_name: str, problem: dict[str, Any]) -> None:
        """The live file ``file_name`` is invalid (``invalid-live``)."""
        self._invalid_live[file_name] = problem

    def clear_invalid(self, file_name: str) -> None:
        """The live file ``file_name`` is no longer an invalid-live problem."""
        self._invalid_live.pop(file_name, None)

    def is_invalid(self, file_name: str) -> bool:
        """Whether the live file ``file_name`` is an invalid-live problem now."""
        return file_name in self._invalid_live

    def invalid_names(self) -> list[str]:
        """The live files that are invalid-live problems now (a copy: safe to clear while read)."""
        return list(self._invalid_live)

    # what the last engine.status() says, and the directory's findings

    def set_from_status(self, *, broken_parks: dict[str, dict[str, Any]],
                        names_taken: dict[str, dict[str, Any]]) -> None:
        """The broken parks and the live files named like another file's component (not
        tracked), each by file name, as the last ``engine.status()`` found them."""
        self._broken_parks = broken_parks
        self._names_taken = names_taken

    def set_directory(self, findings: Iterable[Any]) -> None:
        """The directory's findings (dicts or objects with ``severity``): those that are errors
        or warnings are problems, until the next call."""
        self._directory = [f for f in findings if _get(f, "severity") in ("error", "warning")]

    def directory_gone(self) -> None:
        """The manifest directory is missing: no file in it, hence no problem about one."""
        self._invalid_live.clear()
        self._directory = []

    def directory_moved(self) -> None:
        """Another manifest directory is watched: what was found about files in the old one goes
        (the directory findings are replaced by the next pass)."""
        self._invalid_live.clear()
        self._broken_parks = {}
        self._names_taken = {}

    def listing(self) -> ProblemList:
        """Every current problem, as dicts: runtime, invalid live files, broken parks, live files
        named like another file's component, then the directory findings that are errors or
        warnings (made into dicts by :func:`problem_of` only when read)."""
        head = list(self._runtime.values())
        head += list(self._invalid_live.values())
        head += list(self._broken_parks.values())
        head += list(self._names_taken.values())
        return ProblemList(head, self._directory, problem_of)


def problem_of(finding: Any) -> dict[str, Any]:
    """A directory finding as a heartbeat problem; the message starts with the file it is about."""
    path = str(_get(finding, "path") or "")
    message = str(_get(finding, "message") or "")
    name = os.path.basename(path.rstrip("/"))
    return {
        "code": _get(finding, "code"),
        "severity": _get(finding, "severity"),
        "path": path or None,
        "component": None,
        "message": f"{name}: {message}" if name else message,
    }


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` of a dict, else the attribute ``name`` (``default`` when missing): findings
    and changes reach the daemon as either."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)
