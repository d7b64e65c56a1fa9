"""``python -m staticpodd.daemon``: the same as the ``staticpodd`` console script."""

from __future__ import annotations

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
