"""The ordered list of file-level rules (layers 3-6); each is ``rule(ctx: Context) -> None``."""

from __future__ import annotations

FILE_RULES: list = []
