"""``python -m staticpodd.validate [validate] PATH...`` -- the validate verb without staticpodctl."""

from __future__ import annotations

import sys

from staticpodd.validate.cli import main

sys.exit(main())
