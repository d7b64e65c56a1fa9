"""Command-line options for ``--wait`` and a terminal renderer for wait progress."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping

from ..record import FrozenRecord

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any, Final, TextIO

    from .prover import Progress

#: kubeadm's wait for a static pod after an upgrade (5 minutes).
DEFAULT_WAIT_TIMEOUT = 300.0


ROLLBACK_VERBS = ("apply", "edit", "rollback")

#: What a bare ``--wait`` stores: "the configured timeout" (config ``wait.timeout``, else 5m).
WAIT_DEFAULT = "default"


def parse_duration(text: str) -> float:
    """``90s``, ``5m``, ``1h30m``, ``1.5m``, ``500ms`` or bare seconds ``300`` -> seconds (float),
    read by :func:`staticpodd.engine.parse_duration`, and more than zero.

    Raises argparse.ArgumentTypeError (argparse prints it as a usage error, exit 2).
    """
    from ..engine import parse_duration as read_duration
    from ..errors import UsageError

    try:
        value = read_duration(text)
    except UsageError:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use e.g. 90s, 5m, 1h30m; to name a component after "
            "--wait write --wait=5m or put --wait after the component"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: must be more than zero")
    return value


def _wait_value(text: str) -> float | str:
    """argparse type of ``--wait``: a duration, or ``default`` (what a bare ``--wait`` stores;
    argparse passes a string ``const`` through ``type`` too)."""
    if str(text).strip().lower() == WAIT_DEFAULT:
        return WAIT_DEFAULT
    return parse_duration(text)


class _RollbackAction(argparse.BooleanOptionalAction):
    """``--rollback-on-failure`` also turns on ``--wait`` (with the configured timeout)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        if getattr(namespace, self.dest) and getattr(namespace, "wait", None) is None:
            namespace.wait = WAIT_DEFAULT


def _has_option(parser: argparse.ArgumentParser, option: str) -> bool:
    return option in parser._option_string_actions  # noqa: SLF001 - argparse has no public way


def add_wait_arguments(parser: argparse.ArgumentParser, *, verb: str) -> None:
    """Add the proof options of ``verb`` (park, unpark, apply, edit, rollback) to its subparser.

    - ``--wait[=TIMEOUT]`` (dest ``wait``: None = do not wait, seconds, or ``WAIT_DEFAULT`` for a
      bare ``--wait``: the config's ``wait.timeout``, else 5m, kubeadm's)
    - ``--rollback-on-failure`` / ``--no-rollback-on-failure`` (apply, edit, rollback; dest
      ``rollback_on_failure``: None = the config decides; implies ``--wait``)
    - ``--force`` (park only: park a component the kubelet's API connection depends on)
    - ``--crictl PATH``, ``--runtime-endpoint URL``, ``--kubeconfig PATH`` (optional mirror pod
      check), ``--node-name NAME`` (skipped when the parser already has it, e.g. as a global option).
    """
    group = parser.add_argument_group("proof (confirm what the kubelet did)")
    group.add_argument(
        "--wait",
        nargs="?",
        const=WAIT_DEFAULT,
        default=None,
        type=_wait_value,
        metavar="TIMEOUT",
        help="wait until the container runtime shows the pod "
        + ("stopped" if verb == "park" else "running with the new config.hash and its probes passing")
        + " (default: the config's wait.timeout, else 5m; e.g. --wait=90s); exit 6 if it does not happen",
    )
    if verb in ROLLBACK_VERBS:
        group.add_argument(
            "--rollback-on-failure",
            action=_RollbackAction,
            default=None,
            help="when the wait fails, put the previous version back atomically and record why (implies --wait)",
        )
    if verb == "park":
        group.add_argument(
            "--force",
            action="store_true",
            default=False,
            help="park even a component the kubelet's own connection to the apiserver depends on "
            "(local kube-apiserver/etcd, haproxy, nginx-proxy, kube-vip, keepalived), or one file of a pod "
            "that another file also defines (the pod keeps running from the other file)",
        )
    group.add_argument("--crictl", metavar="PATH", default=None, help="crictl executable (default: crictl on PATH)")
    group.add_argument(
        "--runtime-endpoint",
        metavar="URL",
        default=None,
        help="CRI endpoint, e.g. unix:///run/containerd/containerd.sock (default: crictl's own config)",
    )
    group.add_argument(
        "--kubeconfig",
        metavar="PATH",
        default=None,
        help="optional: also report the mirror pod's config.hash from the apiserver "
        "(e.g. /etc/kubernetes/kubelet.conf); never required, never decides",
    )
    if not _has_option(parser, "--node-name"):
        group.add_argument(
            "--node-name",
            metavar="NAME",
            default=None,
            help="the kubelet's node name; static pods run as <name>-<node name> (default: host name)",
        )


class WaitOptions(FrozenRecord):
    """The resolved proof settings of one command. ``timeout``: seconds, None = do not wait."""

    timeout: Final[float | None]
    rollback_on_failure: Final[bool]
    force: Final[bool]

    def __init__(self, timeout: float | None, rollback_on_failure: bool, force: bool) -> None:
        self.timeout = timeout
        self.rollback_on_failure = rollback_on_failure
        self.force = force

    @classmethod
    def from_args(cls, args: Any, config: Mapping[str, Any] | None = None) -> WaitOptions:
        """Command line first, then config values: ``wait_timeout`` (seconds, for a bare
        ``--wait``) and ``rollback_on_failure`` (bool; only for verbs that have the option).

        The config never turns waiting on by itself; ``--rollback-on-failure`` does (argparse
        stores ``WAIT_DEFAULT`` in ``wait`` then).
        """
        cfg = dict(config or {})
        raw = getattr(args, "wait", None)
        timeout: float | None
        if raw is None:
            timeout = None
        elif raw == WAIT_DEFAULT:
            timeout = float(cfg.get("wait_timeout") or DEFAULT_WAIT_TIMEOUT)
        else:
            timeout = float(raw)
        rollback = getattr(args, "rollback_on_failure", None)
        if rollback is None:
            rollback = hasattr(args, "rollback_on_failure") and bool(cfg.get("rollback_on_failure", False))
        return cls(timeout=timeout, rollback_on_failure=bool(rollback), force=bool(getattr(args, "force", False)))


class TerminalProgress:
    """Renders :class:`Progress` on a terminal: one line rewritten in place (``\\r``) on a TTY,
    one line per change of message otherwise. Call :meth:`close` if the wait may end by an
    exception (a final ``done`` progress closes it too). Do not use under ``--json``.
    """

    def __init__(self, stream: TextIO | None = None, *, min_interval: float = 0.25) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.min_interval = min_interval
        self._last_text = ""
        self._last_at = -1e9
        self._open = False

    def __call__(self, p: Progress) -> None:
        if p.done:
            self.close()
            return
        try:
            if self.tty:
                if p.elapsed - self._last_at < self.min_interval and p.message == self._last_text:
                    return
                line = f"{p.message} ({p.elapsed:.0f}s/{p.timeout:.0f}s)"
                self.stream.write("\r\x1b[2K" + line[:200])
                self.stream.flush()
                self._open = True
            elif p.message != self._last_text:
                self.stream.write(f"[{p.elapsed:5.1f}s] {p.message}\n")
                self.stream.flush()
        except (OSError, ValueError):
            return
        self._last_text = p.message
        self._last_at = p.elapsed

    def close(self) -> None:
        """End the rewritten line, if any."""
        if self._open:
            try:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._open = False
