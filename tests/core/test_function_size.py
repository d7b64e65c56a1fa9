"""No function in staticpodd is longer than 100 lines unless it says at its top why.

A long function is hard to take over: a reader has to hold all of it in mind to change any of
it. Most are better as named steps. Some are clearer whole (one poll loop whose state every
branch shares, a linear checklist read top to bottom); those say so where a reader starts, so
the next maintainer knows the length was chosen, not grown.

The convention: a paragraph of the function's docstring that starts with ``Long because:``
followed by the reason. Every function and method under ``staticpodd/`` is parsed with
:mod:`ast` (nothing is imported); its length is ``end_lineno - lineno + 1`` (the ``def`` line
to the last line of its body, decorators not counted).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "staticpodd"
MAX_LINES = 100
REASON_MARK = "Long because:"


def long_functions(package_dir: Path = PACKAGE_DIR) -> list[tuple[str, str, int]]:
    """``(where, qualified name, lines)`` for each function over MAX_LINES without a reason."""
    found: list[tuple[str, str, int]] = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(package_dir.parent)
        for func, name in _functions(tree, ""):
            lines = (func.end_lineno or func.lineno) - func.lineno + 1
            if lines > MAX_LINES and not has_reason(func):
                found.append((f"{rel}:{func.lineno}", name, lines))
    return found


def _functions(node: ast.AST, prefix: str) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """Every function and method under ``node`` (nested ones too), with its dotted name."""
    out: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((child, prefix + child.name))
            out.extend(_functions(child, prefix + child.name + "."))
        elif isinstance(child, ast.ClassDef):
            out.extend(_functions(child, prefix + child.name + "."))
        else:
            out.extend(_functions(child, prefix))
    return out


def has_reason(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when a paragraph of the docstring starts with REASON_MARK."""
    doc = ast.get_docstring(func) or ""
    return any(para.strip().startswith(REASON_MARK) for para in doc.split("\n\n"))


def test_no_function_is_over_100_lines_without_a_reason_at_its_top() -> None:
    offenders = long_functions()
    listing = "\n".join(f"  {where}  {name}  {lines} lines" for where, name, lines in offenders)
    assert not offenders, (
        f"functions over {MAX_LINES} lines: split them into named steps, or start a paragraph of "
        f"the docstring with {REASON_MARK!r} and say why one long function is clearer here:\n{listing}"
    )


def test_the_guard_sees_a_long_function_and_accepts_a_written_reason(tmp_path: Path) -> None:
    pkg = tmp_path / "staticpodd"
    pkg.mkdir()
    lines_of = "".join(f"        x{i} = {i}\n" for i in range(MAX_LINES))
    (pkg / "m.py").write_text(
        "class C:\n"
        "    def long(self):\n" + lines_of + "\n"
        "    def explained(self):\n"
        '        """Do it.\n\n        Long because: one checklist, read top to bottom.\n        """\n' + lines_of,
        encoding="utf-8",
    )
    assert [(name, lines) for _, name, lines in long_functions(pkg)] == [("C.long", MAX_LINES + 1)]
