"""journald logging with fixed MESSAGE_IDs and upper-case structured fields.

Every action and event staticpodd takes is one journal entry: a human ``MESSAGE`` plus fields
``MESSAGE_ID``, ``STATICPODD_EVENT``, ``COMPONENT``, ``VERSION``, ``DIGEST``, ``ACTOR``,
``REASON``, ``STATICPODD_ROOT`` (the ``--root``, so tests and multi-root hosts can filter) and
event-specific extras. Manifest contents, and values taken from a manifest's command line, are
never logged.

Entries go through systemd-python's ``sendv`` (the fields ``journal.send`` would give) when it imports and the journal
socket exists; otherwise one line per entry goes to stderr (a container, a CI box without
journald). ``systemd/staticpodd.catalog`` has an entry for every MESSAGE_ID below
(``journalctl -x`` explains them); a test keeps the two in step.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from enum import Enum

from .termsafe import one_line, printable_name

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from typing import Any

# syslog priorities (journald PRIORITY=)
ERR = 3
WARNING = 4
NOTICE = 5
INFO = 6
DEBUG = 7

JOURNAL_SOCKET = "/run/systemd/journal/socket"


class Event(Enum):
    """Each event staticpodd logs, with its fixed MESSAGE_ID (never change one once released)."""

    # operations (CLI or daemon)
    APPLIED = "524ba970296d4708b7585e1eaaa8df19"
    EDITED = "96a6f21cbcf248679e41806a5f48e257"
    ROLLED_BACK = "a1c2d1e3fdd44dbfbd389754516a00be"
    PARKED = "06f7ce549a1e4c6cbea0a51aff3ef7d3"
    UNPARKED = "4fe486f395094d829113646ba85609d6"
    UNCHANGED = "561c95b254924cd9bfa133749f753260"
    REFUSED_INVALID = "6104e67ce05d473281d65469df601835"
    DRIFT_RECORDED = "2c328a9a7f97477eae1c2dea2e1bbe30"
    RECOVERED = "35e1910e0c0348759c78fb8c4d0b3b99"
    STAGING_SWEPT = "7b446edc9e8c4bb4bc1c143efc27872f"
    PARKED_COPY_UPDATED = "4ffcb953a7a2475988b5121d689a0b09"
    # daemon: watching and policy
    EXTERNAL_CHANGE = "b5f9ddd873ff4feea608a00a8d8359e9"
    EXTERNAL_REMOVAL = "0bc918d3462449ffb632e7e62d121c32"
    INVALID_LIVE = "5837a5e152a744f78075f97eaf97e81a"
    RESTORED_LAST_GOOD = "0dd6f125a9e74380930a75b49cee0ffe"
    STRAY_FOUND = "28729c0fecff4e58b2607e83e23c4df5"
    STRAY_QUARANTINED = "15315a62fdfa4006b86e3cc6395e22e7"
    DUPLICATE_POD = "4db078e7330c4a88aed96ae3ab2f7566"
    DIRECTORY_PROBLEM = "b7b753fff28f4acfaa19353552463a24"
    PARK_EXPIRED = "2d190fb0768f451aadbc79b40694433b"
    PARK_BROKEN = "d41daa7333cf46578a5032a1c919958e"
    # daemon lifecycle
    DAEMON_STARTED = "56784f2f85df4587bb35596e079a41e4"
    DAEMON_STOPPING = "2ee61568794a42098f096829ba72df55"
    CONFIG_RELOADED = "18d48621531245c89032e783e5a364c8"
    CONFIG_INVALID = "575f2abe75374336ac52c8260ace30c5"
    DIRECTORY_REWATCHED = "cad73733cd8b494f8c72cce2af7e4027"
    DAEMON_START_FAILED = "18c12786dbe6409195ad4fc3da571ae6"
    DAEMON_ERROR = "6d2dc6cec7b048f7b7b793c3a4e96386"  # a running daemon's own failure (ERROR= code)
    POLICY_ACTION_FAILED = "134a972eb07c4c72bd0452357ca3e868"
    POLICY_ACTION_HELD = "e8c23810d76c44be8991094ae110216b"
    WRITER_INSPECTION_LIMITED = "95989de49b7a4bedaba91ba176819365"
    # hooks and proof
    HOOK_FAILED = "6267c9d140be4b8ba5eb7473da0a4c66"
    WAIT_CONFIRMED = "a37d32c2de2a43c6a9f5cc618a5b9afe"
    WAIT_FAILED = "9224c59c36874d54aef0b24e028cb763"
    AUTO_ROLLBACK = "2675447d355c437ab16d4122cb01331f"
    # retention
    PRUNED = "abe21babe36c4499a9f1bf7ed0f67d17"
    # pods placed by hand on a node (staticpodctl pin)
    PINNED = "2022d290f708425ab630eca4949ff3d8"
    PIN_FAILED = "2bd86c3b39ef411faf469e5398267e7b"
    # the cluster view (cluster.publish)
    CLUSTER_PUBLISH_FAILED = "b08895545a00436a86084629149b3c22"
    CLUSTER_PUBLISHED = "ad1f25e600ab4afb98813ffb0943bff6"

    @property
    def message_id(self) -> str:
        """The 32-hex-digit MESSAGE_ID."""
        return self.value


def journal_status(socket_path: str = JOURNAL_SOCKET) -> tuple[bool, str]:
    """Whether entries reach journald, as ``(ok, detail)`` for ``staticpodctl doctor``.

    ``ok`` is False only when entries would be lost from the journal unexpectedly: the socket is
    missing, or it is left over from a journald that is gone (connect() is refused; the file
    alone proves nothing), or systemd-python is not installed. ``STATICPODD_NO_JOURNAL=1`` is a
    deliberate choice and counts as ok. Never raises.
    """
    import socket

    if os.environ.get("STATICPODD_NO_JOURNAL") == "1":
        return True, "disabled by STATICPODD_NO_JOURNAL=1: entries go to stderr"
    try:
        from systemd import journal as _journal  # type: ignore[import-not-found,attr-defined]  # noqa: F401
    except ImportError:
        return False, "systemd-python is not installed: entries go to stderr, not to the journal"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.connect(socket_path)
    except OSError as exc:
        return False, (f"journald does not answer on {socket_path} ({exc.strerror or exc}): entries go to "
                       "stderr, not to the journal (is systemd-journald running?)")
    finally:
        sock.close()
    return True, f"journald answers on {socket_path}"


_sender: Callable[..., Any] | None = None
_sender_resolved = False


def _resolve_sender() -> Callable[..., Any] | None:
    """The function that sends one entry: systemd-python's ``sendv`` (what ``journal.send``
    calls) when the journal is there, else None (stderr). Imported at the first entry, and from
    systemd-python's C module alone: ``systemd.journal`` also imports logging, uuid, traceback
    and ctypes (8-16 ms), which every changing verb would pay for one entry."""
    global _sender, _sender_resolved
    if not _sender_resolved:
        _sender_resolved = True
        if os.environ.get("STATICPODD_NO_JOURNAL") != "1" and os.path.exists(JOURNAL_SOCKET):
            try:
                from systemd._journal import sendv  # type: ignore[import-not-found]

                _sender = sendv
            except ImportError:
                try:
                    from systemd import journal as _journal  # type: ignore[import-not-found,attr-defined]

                    _sender = _journal.sendv
                except (ImportError, AttributeError):
                    _sender = None
    return _sender


def _send(sender: Callable[..., Any], message: str, fields: dict[str, str]) -> None:
    """Send one entry through ``sender`` (``sendv``) with the fields ``systemd.journal.send``
    gives it: ``MESSAGE``, ``MESSAGE_ID``, the caller's ``CODE_FILE``/``CODE_LINE``/``CODE_FUNC``
    (the frame that called this), then ``fields``. Raises what sendv raises (OSError, ValueError)."""
    caller = sys._getframe(1)
    code = caller.f_code
    args = ["MESSAGE=" + message]
    rest = dict(fields)
    if "MESSAGE_ID" in rest:
        args.append("MESSAGE_ID=" + rest.pop("MESSAGE_ID"))
    args += [f"CODE_FILE={code.co_filename}", f"CODE_LINE={caller.f_lineno:d}", f"CODE_FUNC={code.co_name}"]
    args += [f"{key}={value}" for key, value in rest.items()]
    sender(*args)


class Journal:
    """Logs events for one process (``identifier``: ``staticpodctl`` or ``staticpodd``).

    ``root`` is recorded as ``STATICPODD_ROOT`` on every entry. ``observers`` are called after
    each entry is sent, as ``observer(event, message, priority, fields)`` (``fields`` as given,
    lower-case keys): the cluster view queues its Events that way (:mod:`staticpodd.cluster.hook`).
    An observer that raises is ignored.
    """

    def __init__(self, identifier: str, root: str) -> None:
        self.identifier = identifier
        self.root = root
        self.observers: list[Callable[..., Any]] = []

    def log(self, event: Event, message: str, *, priority: int = INFO, **fields: Any) -> None:
        """Send one entry. ``fields`` keys are upper-cased; None values are dropped.

        Never raises: a logging failure falls back to stderr.
        """
        out: dict[str, str] = {
            "MESSAGE_ID": event.message_id,
            "PRIORITY": str(priority),
            "SYSLOG_IDENTIFIER": self.identifier,
            "STATICPODD_EVENT": event.name,
            "STATICPODD_ROOT": self.root,
        }
        for key, value in fields.items():
            if value is None:
                continue
            out[key.upper()] = printable_name(str(value))  # a non-UTF-8 file name: \xNN, not an error
        text = one_line(message)  # one line: a newline in a file name must not forge an entry's text
        sender = _resolve_sender()
        sent = False
        if sender is not None:
            try:
                _send(sender, text, out)
                sent = True
            except (OSError, ValueError):  # ValueError: covers UnicodeError and a NUL in a field
                pass
        if not sent:
            extras = " ".join(
                f"{k}={one_line(v)}" for k, v in out.items() if k not in ("MESSAGE_ID", "PRIORITY", "SYSLOG_IDENTIFIER")
            )
            try:
                print(f"{self.identifier}: {text} [{extras}]", file=sys.stderr)
            except OSError:
                pass
        for observer in self.observers:
            try:
                observer(event, message, priority, fields)
            except Exception:  # noqa: BLE001 - an observer must never break logging
                pass
