"""SIGHUP: reload the configuration, keeping the old one when the new one is invalid.

:class:`ReloadMixin` re-reads the configuration (RELOADING=1, then READY=1 again), rebuilds the
engine and, when the manifest directory moved, the watch; a refused configuration is logged
(CONFIG_INVALID) and recorded in the heartbeat's ``reload`` for ``staticpodd --reload``.
"""

from __future__ import annotations

import time

from ..errors import ConfigError
from ..journal import ERR, NOTICE, Event
from ..node.watch import Watcher
from .status import StatusMixin
from .watching import WatchMixin


class ReloadMixin(StatusMixin, WatchMixin):
    """The configuration reload asked for by SIGHUP."""

    def _reload(self) -> None:
        target = self._hup_requests
        self.state = "reloading"
        self.backoff.due_now()  # a reload is a reason to try failed restores again, and at once
        self._valid_digests.clear()  # verdicts depend on kubernetes_version, max_manifest_bytes …
        # the directory findings too (their key covers the options; a reload is also how to have
        # what it cannot cover, such as a hostPath created since, looked at again), and every
        # file's: a reload judges the whole directory anew
        self.findings_cache.forget()
        self.notifier.reloading()
        self._heartbeat()
        try:
            cfg = self._load_config()
            layout = self._layout_for(cfg)
        except ConfigError as exc:
            self._say(f"reload refused, keeping the previous configuration: {exc}")
            self.log(
                Event.CONFIG_INVALID,
                f"new configuration refused, keeping the previous one (generation {self.config_generation}): {exc}",
                priority=ERR,
                config_path=exc.path,
                line=exc.line,
                field=exc.field,
                hint=exc.hint,
            )
            self.reload_state = {"seq": target, "status": "refused", "error": str(exc), "at": time.time()}
        else:
            old_dir = self.layout.manifest_dir
            self.config = cfg
            self.config_generation += 1
            self.config_loaded_at = time.time()
            assert self.hints is not None
            self.hints.set_debounce(cfg.debounce)
            if layout.manifest_dir != old_dir:
                assert self.watcher is not None
                self.watcher.stop()
                self.layout = layout
                self.watcher = Watcher(layout.manifest_dir, self.hints)
                self.finding_keys = set()
                self.invalid_live.clear()
                self.broken_parks.clear()
                self.names_taken.clear()
            else:
                self.layout = layout
            if hasattr(self.engine, "close"):
                try:
                    self.engine.close()
                except Exception:
                    pass
            self.engine = self._build_engine()
            self.publishing.configure(layout, cfg)
            if layout.manifest_dir != old_dir:
                self._check_watch(initial=True)
            self.log(
                Event.CONFIG_RELOADED,
                f"configuration reloaded (generation {self.config_generation})",
                priority=NOTICE,
                config_path=cfg.source,
                config_digest=cfg.digest,
                generation=self.config_generation,
            )
            self.reload_state = {"seq": target, "status": "ok", "error": None, "at": time.time()}
        self._hup_handled = target
        self.state = "running"
        status = self._status_line()
        self.notifier.ready(status)
        self._last_status = status
        self._heartbeat()
