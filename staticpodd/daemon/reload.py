"""SIGHUP: reload the configuration, keeping the old one when the new one is invalid.

:class:`Reloader` is one part of the daemon: it counts the SIGHUPs asked for and handled, and on
the loop's turn re-reads the configuration (RELOADING=1, then READY=1 again) and has the daemon
install it (engine and, when the manifest directory moved, the watch); a refused configuration
is logged (CONFIG_INVALID) and recorded in the heartbeat's ``reload`` (:attr:`Reloader.state`)
for ``staticpodd --reload``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..errors import ConfigError
from ..journal import ERR, NOTICE, Event
from ..layout import Layout
from ..node.notify import Notifier
from .status import LogFn, StatusReporter


class Reloader:
    """The configuration reload asked for by SIGHUP.

    Collaborators: ``load`` reads the configuration and the layout it names (raises
    :class:`~staticpodd.errors.ConfigError` when invalid); ``install`` makes them the daemon's
    (new engine, watch moved when the manifest directory did; the generation counted);
    ``forget`` drops what was judged under the old configuration (called whether or not the
    new one is taken); ``set_state`` sets the daemon's ``state`` (``reloading``, ``running``);
    ``generation`` is the current configuration generation; ``reporter`` writes the heartbeat
    and says READY=1; ``notifier`` says RELOADING=1; ``log`` a journal entry; ``say`` a stderr line.
    """

    def __init__(self, *, load: Callable[[], tuple[Config, Layout]], install: Callable[[Config, Layout], None],
                 forget: Callable[[], None], set_state: Callable[[str], None], generation: Callable[[], int],
                 reporter: StatusReporter, notifier: Notifier, log: LogFn, say: Callable[[str], None]) -> None:
        self._load = load
        self._install = install
        self._forget = forget
        self._set_state = set_state
        self._generation = generation
        self._reporter = reporter
        self._notifier = notifier
        self._log = log
        self._say = say
        self._requests = 0  # SIGHUPs received (counted by the signal handler)
        self._handled = 0  # the count the last reload answered
        #: the heartbeat's ``reload``: ``seq`` (the SIGHUP count answered), ``status`` (``ok``,
        #: ``refused``, None before the first), ``error`` (why refused), ``at`` (epoch seconds)
        self.state: dict[str, Any] = {"seq": 0, "status": None, "error": None, "at": None}

    def request(self) -> None:
        """A SIGHUP came (called from the signal handler: counts it, nothing else)."""
        self._requests += 1

    def pending(self) -> bool:
        """Whether a SIGHUP came since the last reload."""
        return self._requests != self._handled

    def reload(self) -> None:
        """RELOADING=1, re-read the configuration and install it, or keep the old one when it is
        invalid (CONFIG_INVALID); READY=1 again either way. Answers every SIGHUP counted so far."""
        target = self._requests
        self._set_state("reloading")
        self._forget()
        self._notifier.reloading()
        self._reporter.heartbeat()
        try:
            cfg, layout = self._load()
        except ConfigError as exc:
            self._say(f"reload refused, keeping the previous configuration: {exc}")
            self._log(
                Event.CONFIG_INVALID,
                f"new configuration refused, keeping the previous one (generation {self._generation()}): {exc}",
                priority=ERR,
                config_path=exc.path,
                line=exc.line,
                field=exc.field,
                hint=exc.hint,
            )
            self.state = {"seq": target, "status": "refused", "error": str(exc), "at": time.time()}
        else:
            self._install(cfg, layout)
            generation = self._generation()
            self._log(
                Event.CONFIG_RELOADED,
                f"configuration reloaded (generation {generation})",
                priority=NOTICE,
                config_path=cfg.source,
                config_digest=cfg.digest,
                generation=generation,
            )
            self.state = {"seq": target, "status": "ok", "error": None, "at": time.time()}
        self._handled = target
        self._set_state("running")
        self._reporter.ready(self._reporter.status_line())
        self._reporter.heartbeat()
