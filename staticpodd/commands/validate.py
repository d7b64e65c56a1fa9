"""``staticpodctl validate``: the validator's own verb (:mod:`staticpodd.validate.cli`) with the
configuration's defaults."""

from __future__ import annotations

import argparse
import os
import sys

from ..termsafe import note_names
from .loading import build_engine
from .output import Out


def cmd_validate(args: argparse.Namespace, out: Out) -> int:
    """Run staticpodd.validate.cli.run_validate with the configuration as base options; exit 0, 1 or 2."""
    from ..validate.cli import run_validate

    eng = build_engine(args, verbs="gate")
    args.base_options = eng.validate_options()  # config defaults; flags win
    if not getattr(args, "paths", None):  # no PATH: the directory the kubelet reads, under --root
        args.paths = [str(eng.core.layout.manifest_dir)]
    # names with a newline are shown escaped (termsafe.safe)
    for p in getattr(args, "paths", None) or getattr(args, "path", None) or []:
        note_names([os.path.basename(p)])
        try:
            note_names(os.listdir(p) if os.path.isdir(p) else [])
        except OSError:
            pass
    return int(run_validate(args, sys.stdout))
