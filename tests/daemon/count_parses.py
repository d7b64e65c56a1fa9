#!/usr/bin/env python3
"""Run the real staticpodd daemon (``python -m staticpodd.daemon`` ARGS) with every YAML parse,
JSON manifest decode and validation call counted: each call appends ``<kind> <epoch>`` to the
file named by $STATICPODD_COUNT_PARSES. For tests/daemon/test_rescan_cost.py (issue 14: a full
rescan of an unchanged directory does no YAML parsing or validation).

The counters wrap the module-level functions before anything else imports them, so every
``from .manifest import …`` in the daemon binds to the counting wrapper.
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


import staticpodd.jsondecode  # noqa: E402
import staticpodd.validate  # noqa: E402
import staticpodd.yamldecode  # noqa: E402

_count(staticpodd.yamldecode, "_compose_first", "yaml")
_count(staticpodd.jsondecode, "decode_json", "json")
_count(staticpodd.validate, "_validate", "validate")
_count(staticpodd.validate, "validate_directory", "validate-directory")

if os.environ.get("STATICPODD_COUNT_SCANS"):  # every Engine.scan too (a quiet periodic rescan makes none)
    import staticpodd.engine.scan  # noqa: E402

    _scans = open(os.environ["STATICPODD_COUNT_SCANS"], "a", buffering=1)  # noqa: SIM115
    _scan = staticpodd.engine.scan.ScanVerbs.scan

    @functools.wraps(_scan)
    def _counted_scan(self: Any, *args: Any, **kwargs: Any) -> Any:
        _scans.write(f"scan {time.time():.6f}\n")
        return _scan(self, *args, **kwargs)

    staticpodd.engine.scan.ScanVerbs.scan = _counted_scan  # type: ignore[method-assign]

from staticpodd.daemon import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
