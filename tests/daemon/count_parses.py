#!/usr/bin/env python3
"""Run the real staticpodd daemon (``python -m staticpodd.daemon`` ARGS) with every YAML parse,
JSON manifest decode and validation call counted: each call appends ``<kind> <epoch>`` to the
file named by $STATICPODD_COUNT_PARSES. For tests/daemon/test_rescan_cost.py (a full
rescan of an unchanged directory does no YAML parsing or validation). With
$STATICPODD_COUNT_ORDER, each restore (``restore``) and each memory trim (``trim``) is appended
to that file too, in the order the daemon makes them, and at each rename of a restore on a
writer's close, how many modules were imported since the close was looked at
(``imported-before-rename N``).

The counters wrap the module-level functions before anything else imports them, so every
``from .decoding import …`` in the daemon binds to the counting wrapper.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from typing import Any

out = open(os.environ["STATICPODD_COUNT_PARSES"], "a", buffering=1)  # noqa: SIM115 - for the process's life


def _count(module: Any, name: str, kind: str) -> None:
    fn = getattr(module, name)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out.write(f"{kind} {time.time():.6f}\n")
        return fn(*args, **kwargs)

    setattr(module, name, wrapper)


import staticpodd.manifest.jsondecode  # noqa: E402
import staticpodd.manifest.yamldecode  # noqa: E402
import staticpodd.validate  # noqa: E402

_count(staticpodd.manifest.yamldecode, "_compose_first", "yaml")
_count(staticpodd.manifest.jsondecode, "decode_json", "json")
_count(staticpodd.validate, "_validate", "validate")
_count(staticpodd.validate, "validate_directory", "validate-directory")

if os.environ.get("STATICPODD_COUNT_SCANS"):  # every Engine.scan too (a quiet periodic rescan makes none)
    import staticpodd.engine.scan  # noqa: E402

    _scans = open(os.environ["STATICPODD_COUNT_SCANS"], "a", buffering=1)  # noqa: SIM115
    _scan = staticpodd.engine.scan.Scanner.scan

    @functools.wraps(_scan)
    def _counted_scan(self: Any, *args: Any, **kwargs: Any) -> Any:
        _scans.write(f"scan {time.time():.6f}\n")
        return _scan(self, *args, **kwargs)

    staticpodd.engine.scan.Scanner.scan = _counted_scan  # type: ignore[method-assign]

from staticpodd.daemon import main  # noqa: E402

if os.environ.get("STATICPODD_COUNT_ORDER"):  # each restore and each memory trim, in the daemon's order
    import staticpodd.daemon.lifecycle  # noqa: E402
    import staticpodd.daemon.loop  # noqa: E402
    import staticpodd.engine.swap  # noqa: E402

    _order = open(os.environ["STATICPODD_COUNT_ORDER"], "a", buffering=1)  # noqa: SIM115

    def _noting(what: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            _order.write(f"{what} {time.time():.6f}\n")
            return fn(*args, **kwargs)

        return wrapper

    for _mod in (staticpodd.daemon.loop, staticpodd.daemon.lifecycle):  # the name each module calls
        if hasattr(_mod, "release_memory"):
            _mod.release_memory = _noting("trim", _mod.release_memory)  # type: ignore[attr-defined]
    _swap = staticpodd.engine.swap.Swapper
    _swap.restore_last_good = _noting("restore", _swap.restore_last_good)  # type: ignore[method-assign]

    # modules imported between a writer's close being looked at and the restore's rename
    import staticpodd.node.fsops  # noqa: E402

    _seen_close: list[int] = []
    _loop = staticpodd.daemon.loop.LoopMixin
    _on_close = _loop._refused_on_close

    @functools.wraps(_on_close)
    def _counted_close(self: Any) -> Any:
        _seen_close[:] = [len(sys.modules)]
        try:
            return _on_close(self)
        finally:
            _seen_close.clear()

    _loop._refused_on_close = _counted_close  # type: ignore[method-assign]
    _replace = staticpodd.node.fsops.replace

    @functools.wraps(_replace)
    def _counted_replace(*args: Any, **kwargs: Any) -> Any:
        if _seen_close:
            _order.write(f"imported-before-rename {len(sys.modules) - _seen_close[0]}\n")
        return _replace(*args, **kwargs)

    staticpodd.node.fsops.replace = _counted_replace  # type: ignore[assignment]

sys.exit(main(sys.argv[1:]))
