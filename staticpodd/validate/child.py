"""The child process of :mod:`staticpodd.validate.isolated`: judges one big file and exits.

Run as ``python -I -c "...main(ROOT)"`` with the parent's package directory ``ROOT``: reads
``(data, display, options)`` (pickled) on stdin, writes
:func:`staticpodd.validate.directory.judge_all`'s ``(findings, own, facts)`` (pickled) on stdout.
"""

from __future__ import annotations

import pickle
import sys

from staticpodd.validate import _validate
from staticpodd.validate.directory import judge_all
from staticpodd.validate.isolated import package_root


def main(root: str) -> int:
    """Judge what stdin holds; exit 0. Exit 3, answering nothing, when this code is not the one
    under ``root`` (the parent's: another ``staticpodd`` came first on the path): a verdict comes
    from the parent's own code or from none."""
    if package_root() != root:
        return 3
    data, display, options = pickle.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(pickle.dumps(judge_all(data, display, options, _validate),
                                         protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0
