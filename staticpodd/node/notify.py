"""sd_notify(3): tell systemd that staticpodd is ready, reloading, stopping, alive.

Uses systemd-python's ``systemd.daemon.notify`` when it imports, else a small stdlib
implementation of the protocol: one datagram of newline-separated ``KEY=VALUE`` assignments to
the AF_UNIX socket named by ``$NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract socket).
Without ``$NOTIFY_SOCKET`` (not run by systemd) every call is a no-op returning False.

The watchdog interval follows sd_watchdog_enabled(3): ``$WATCHDOG_USEC`` applies only when
``$WATCHDOG_PID`` is unset or names this process; the daemon pings at half of it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping

Sender = Callable[[str], bool]


def _stdlib_sender(address: str) -> Sender:
    """A sender that writes one datagram per message to ``address`` (``@`` = abstract)."""
    if address.startswith("@"):
        target: str | bytes = b"\0" + address[1:].encode()
    else:
        target = address

    def send(message: str) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                # never block the daemon on a receiver that does not read (systemd always does)
                sock.sendto(message.encode(), socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL, target)
            return True
        except OSError:
            return False

    return send


def _systemd_sender() -> Sender | None:
    """systemd-python's notify, or None when the module is not installed."""
    try:
        from systemd import daemon as sd_daemon  # type: ignore[import-not-found,attr-defined,unused-ignore]
    except ImportError:
        return None

    def send(message: str) -> bool:
        try:
            return bool(sd_daemon.notify(message))
        except (OSError, ValueError):
            return False

    return send


class Notifier:
    """Sends sd_notify messages for this process.

    ``env``: the environment to read (default ``os.environ``). ``impl``: ``"auto"`` (systemd-python
    when importable, else stdlib), ``"systemd"`` or ``"stdlib"``. ``enabled`` is False without a
    ``NOTIFY_SOCKET``; then every method returns False and sends nothing.
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, impl: str = "auto") -> None:
        env = os.environ if env is None else env
        self.address = env.get("NOTIFY_SOCKET") or None
        self.impl = "none"
        self._send: Sender | None = None
        if self.address:
            # libsystemd reads $NOTIFY_SOCKET from the process environment itself
            same_env = os.environ.get("NOTIFY_SOCKET") == self.address
            if impl in ("auto", "systemd") and same_env:
                self._send = _systemd_sender()
                if self._send is not None:
                    self.impl = "systemd"
            if self._send is None and impl == "systemd":
                raise RuntimeError("systemd-python is not installed, or env is not the process environment")
            if self._send is None:
                self._send = _stdlib_sender(self.address)
                self.impl = "stdlib"
        self.watchdog_usec = _watchdog_usec(env)

    @property
    def enabled(self) -> bool:
        """True when systemd (or a test) gave us a notification socket."""
        return self._send is not None

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=VALUE`` assignments in one datagram. Returns True when it was delivered.

        Newlines inside a value are replaced by spaces (the protocol is line-based).
        """
        if self._send is None or not assignments:
            return False
        lines = []
        for a in assignments:
            key, sep, value = a.partition("=")
            lines.append(key + sep + value.replace("\n", " "))
        return self._send("\n".join(lines))

    def ready(self, status: str | None = None) -> bool:
        """``READY=1`` (start-up or reload finished), with ``STATUS=`` when given."""
        return self.send("READY=1", *([f"STATUS={status}"] if status is not None else []))

    def status(self, status: str) -> bool:
        """``STATUS=`` one-line summary shown by ``systemctl status``."""
        return self.send(f"STATUS={status}")

    def reloading(self) -> bool:
        """``RELOADING=1`` with ``MONOTONIC_USEC=`` (required by ``Type=notify-reload``)."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1`` at the start of a clean shutdown."""
        return self.send("STOPPING=1", *([f"STATUS={status}"] if status is not None else []))

    def watchdog(self) -> bool:
        """``WATCHDOG=1`` keep-alive ping."""
        return self.send("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        """Seconds between keep-alive pings (half of ``WATCHDOG_USEC``), or None when not asked for."""
        if self.watchdog_usec is None or not self.enabled:
            return None
        return self.watchdog_usec / 2 / 1_000_000


def _watchdog_usec(env: Mapping[str, str]) -> int | None:
    """``$WATCHDOG_USEC`` when it applies to this process (sd_watchdog_enabled(3)), else None."""
    raw = env.get("WATCHDOG_USEC")
    if not raw:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid:
        try:
            if int(pid) != os.getpid():
                return None
        except ValueError:
            return None
    try:
        usec = int(raw)
    except ValueError:
        return None
    return usec if usec > 0 else None
