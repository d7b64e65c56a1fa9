"""Loading what every verb starts from: the layout, the configuration and the engine.

The configuration is read as the daemon reads it (``--manifest-dir``, then the config's
``manifest_dir``, then the kubelet's ``staticPodPath``); a config whose bytes were already checked
comes from a small JSON cache so that the fast verbs import neither YAML nor JSON Schema. The
verbs in :data:`TOLERATE_BAD_CONFIG` go on with defaults when it is invalid, and the problems seen
are kept in :data:`config_problems` for ``doctor``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from .. import __version__
from ..errors import ConfigError, StaticpodError
from ..termsafe import safe
from .output import PROG

TYPE_CHECKING = False  # typing is for mypy: importing it costs every verb's start-up
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def build_layout(args: argparse.Namespace) -> Any:
    """The Layout the verb acts on: --manifest-dir, else the configuration's manifest_dir, else
    the kubelet's staticPodPath, else the default (as the daemon decides)."""
    from ..layout import Layout

    root = getattr(args, "root", None) or "/"
    mdir = getattr(args, "manifest_dir", None)
    if mdir is not None:
        return Layout.build(root, mdir)
    # Same precedence as the daemon: --manifest-dir, then the configuration's manifest_dir (the
    # default config file too, not only --config), then the kubelet's staticPodPath, then the default.
    default = Layout.build(root)
    if getattr(args, "config", None) is None and not default.config_path.exists():
        return default
    try:
        cfg = checked_config(args, default)
    except ConfigError:
        if getattr(args, "command", None) not in TOLERATE_BAD_CONFIG:
            raise
        # The engine's loader warns and goes on with default settings; but which directory to
        # act on is not a setting to guess: use manifest_dir if it can still be read, refuse if not.
        mdir = salvage_manifest_dir(getattr(args, "config", None) or str(default.config_path))
        if mdir is None:
            return default
        from ..layout import under_root

        return Layout.build(root, under_root(default.root, mdir))
    mdir = getattr(cfg, "manifest_dir", None)
    if mdir:
        from ..layout import under_root

        return Layout.build(root, under_root(default.root, mdir))
    return default


def salvage_manifest_dir(path: str) -> str | None:
    """``manifest_dir`` from a configuration file that failed its schema check (another key is
    wrong): the absolute path it names, or None when it names none. Raises ConfigError when the
    file mentions manifest_dir but it cannot be read as an absolute path: acting on the default
    directory then could park or change the wrong files."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return None
    if b"manifest_dir" not in raw:
        return None
    try:

        from ..manifest.yamlsafe import safe_load

        doc = safe_load(raw)
    except Exception:  # noqa: BLE001 - any YAML problem: read the one top-level line instead
        return _manifest_dir_line(path, raw)
    value = doc.get("manifest_dir") if isinstance(doc, dict) else None
    if value is None and isinstance(doc, dict) and "manifest_dir" not in doc:
        return None
    if value is None and isinstance(doc, dict):
        return None  # manifest_dir: null, the default
    if not isinstance(value, str) or not value.startswith("/"):
        raise ConfigError(
            "the configuration is invalid and its manifest_dir cannot be read, so it is not clear which "
            "directory to act on",
            path=path,
            hint="fix the configuration (staticpodd --check-config), or pass --manifest-dir",
        )
    return value


_MANIFEST_DIR_LINE = re.compile(rb"^manifest_dir[ \t]*:[ \t]*(.*?)[ \t]*(?:#.*)?$", re.MULTILINE)


def _manifest_dir_line(path: str, raw: bytes) -> str | None:
    """``manifest_dir`` of a configuration that is not even YAML, from its top-level line (a
    commented-out ``#manifest_dir: null``, as in the shipped example, sets nothing). None when no
    such line sets it (or sets null); raises ConfigError, naming the line, when one sets it to
    something that is not an absolute path, or when two lines set it."""
    found = list(_MANIFEST_DIR_LINE.finditer(raw))
    if not found:
        return None
    value = found[0].group(1).strip().strip(b"'\"")
    line = raw.count(b"\n", 0, found[0].start()) + 1
    if len(found) == 1 and value in (b"", b"null", b"~", b"Null", b"NULL"):
        return None
    if len(found) == 1 and value.startswith(b"/"):
        return value.decode("utf-8", "surrogateescape")
    raise ConfigError(
        "the configuration is not valid YAML and its manifest_dir cannot be read, so it is not clear which "
        "directory to act on",
        path=path, line=line, field="manifest_dir",
        hint="fix the configuration (staticpodd --check-config), or pass --manifest-dir",
    )


_config_cache: dict[str, Any] = {}


def checked_config(args: argparse.Namespace, layout: Any) -> Any:
    """The configuration, schema-checked. A config whose bytes were already checked is read
    from a small JSON cache under /run/staticpodd keyed by its sha256, so the fast verbs do not
    import YAML and JSON Schema on every run."""
    key = f"{layout.root}|{getattr(args, 'config', None)}"
    if key in _config_cache:
        return _config_cache[key]
    import hashlib
    from pathlib import Path

    from ..node.trust import check_path, ensure_dir, read_trusted, write_file

    explicit = getattr(args, "config", None)
    path = explicit if explicit else str(layout.config_path)
    cache_path = layout.run_dir / "config-checked.json"
    cfg = None
    from ..config import read_config_bytes

    try:
        digest = hashlib.sha256(read_config_bytes(Path(path))).hexdigest()
    except FileNotFoundError:
        if not explicit:  # no config file: all documented defaults
            from ..config import Config

            _config_cache[key] = Config.default()
            return _config_cache[key]
        digest = None
    except ConfigError:
        digest = None  # load_config below says what is wrong, the same way the daemon does
    if digest is not None:
        try:
            # The cache decides what root runs (wait.crictl): read it only when root or we wrote
            # it and no one else could have (a file left by a umask 000 run is passed over).
            cached = json.loads(read_trusted(cache_path, "checked-configuration cache").decode("utf-8"))
            if (cached.get("digest") == digest and cached.get("path") == os.path.abspath(path)
                    and cached.get("checked_by") == __version__):  # a new release may check more
                from ..config import Config

                cfg = Config.from_dict(cached["config"], source=path, digest=digest)
        except (OSError, ValueError, KeyError, TypeError, StaticpodError):
            cfg = None
    if cfg is None:
        from ..config import load_config

        cfg = load_config(layout, path=explicit)
        if digest is not None:
            try:
                ensure_dir(layout.run_dir, 0o755, "run directory")
                check_path(layout.run_dir, "run directory")
                write_file(cache_path, json.dumps({"path": os.path.abspath(path), "digest": digest,
                                                   "checked_by": __version__, "config": cfg.to_dict()}
                                                  ).encode("utf-8"), 0o644)
            except (OSError, StaticpodError):
                pass  # only a cache: the next run checks the configuration again
    _config_cache[key] = cfg
    return cfg


#: Verbs that go on with default settings (and a warning) when staticpodd.yaml is invalid.
TOLERATE_BAD_CONFIG = ("status", "history", "show", "diff", "park", "unpark", "recover", "doctor")
config_problems: list[StaticpodError] = []


def build_engine(args: argparse.Namespace, *, verbs: str = "all") -> Any:
    """The Engine for this run: its layout, the caller as Actor, the journal, the configuration
    (loaded once, when first asked; when invalid: the defaults and a warning for the verbs in
    TOLERATE_BAD_CONFIG, else ConfigError) and the lock timeout.

    ``verbs`` picks how much of the engine is imported: ``"all"`` (:class:`~staticpodd.engine.Engine`),
    ``"read"`` (:class:`~staticpodd.engine.Reader`: status, history, show, diff) or ``"gate"``
    (:class:`~staticpodd.engine.gate.Gatekeeper` over an :class:`~staticpodd.engine.core.EngineCore`:
    the validation options and gate, nothing that changes the directory). The smaller ones import
    a fraction of the engine."""
    from ..engine.model import Actor

    cls: Callable[..., Any]
    if verbs == "read":
        from ..engine.reader import Reader as cls
    elif verbs == "gate":
        from ..engine.core import EngineCore
        from ..engine.gate import Gatekeeper

        def cls(*args: Any, **kwargs: Any) -> Any:
            return Gatekeeper(EngineCore(*args, **kwargs))
    else:
        from ..engine.full import Engine as cls
    from ..journal import Journal

    layout = build_layout(args)
    loaded: list[Any] = []

    def loader() -> Any:  # loads (and warns) once, however often it is asked
        if not loaded:
            loaded.append(_load())
        return loaded[0]

    def _load() -> Any:
        try:
            return checked_config(args, layout)
        except ConfigError as exc:
            if getattr(args, "command", None) not in TOLERATE_BAD_CONFIG:
                raise
            # At 3 a.m. a typo in staticpodd.yaml must not block unpark or status: say so, go on
            # with the documented defaults. Verbs that validate (apply, edit, rollback) refuse.
            config_problems.append(exc)
            if not getattr(args, "json", False):
                print(safe(f"{PROG}: warning: ignoring the invalid configuration, using defaults: {exc}"),
                      file=sys.stderr)
            from ..config import Config

            return Config.default()

    lock_timeout = getattr(args, "lock_timeout", None)
    if lock_timeout is None and (getattr(args, "config", None) or layout.config_path.exists()):
        lock_timeout = getattr(loader(), "lock_timeout", None)
    journal = Journal(PROG, str(layout.root))
    if verbs == "all":  # the verbs that park, unpark, restore or quarantine: the cluster is told
        # no configuration file: nothing to publish (and no configuration loaded for it)
        configured = bool(getattr(args, "config", None)) or layout.config_path.exists()
        attach_cluster_hook(args, journal, lambda: layout, lambda: loader() if configured else None)
    return cls(layout, actor=Actor.current(), journal=journal, config_loader=loader, lock_timeout=lock_timeout)


def attach_cluster_hook(args: argparse.Namespace, journal: Any, layout: Any, config: Any) -> None:
    """Observe ``journal`` for the cluster view (:class:`staticpodd.cluster.hook.ClusterHook`;
    ``layout``/``config`` are callables). The hook is kept as ``args.cluster_hook``, where
    :meth:`Out.finish` asks it what to say ("published" or "queued")."""
    from ..cluster.hook import ClusterHook

    hook = ClusterHook(layout, config)
    journal.observers.append(hook)
    args.cluster_hook = hook
