#!/usr/bin/env python3
"""Group staticpodd's flat modules into packages: ``git mv`` each file and rewrite every reference.

Run it from anywhere inside a clean checkout (stdlib only; needs git)::

    python3 tools/regroup.py            # moves, rewrites, checks; prints what it did
    python3 tools/regroup.py --dry-run  # prints what it would do, changes nothing

then sort the imports the rewrite put out of order, and check::

    .venv/bin/ruff check --fix --select I staticpodd tests tools packaging
    .venv/bin/ruff check staticpodd tests && .venv/bin/mypy staticpodd
    .venv/bin/python -m pytest -m fast -q

It is deterministic (the same tree gives the same result) and idempotent: a module already at its
new place is left alone, so a second run changes nothing. A tree that changed since the map was
written is fine: a flat module the map does not know stays where it is and is reported, a new
package keeps its place, and every reference to a moved module is rewritten wherever it is.
Lines of the package or the tools that the rewrite makes longer than ruff's limit are listed. It
stops, before changing anything, on what it cannot rewrite safely (a dirty tree, a moved module
that finds files through ``__file__``, a relative ``importlib.import_module`` of a moved module,
a target that already exists), and after the rewrite it checks that every ``staticpodd`` import
in the package, the tests, the tools and the packaging resolves, and that no dotted or path
reference to an old place is left; it exits 1 naming each file and line it could not fix.

What it rewrites, in every file git tracks (except CHANGELOG.md, whose entries are history,
``.git-blame-ignore-revs``, this script, a file that holds the words ``regroup: keep-file`` (a
fixture maker run with an older commit's code) and a line that holds ``regroup: keep`` (code a
test runs with an older commit's code, from ``git archive``)):

- Python imports, by their syntax tree: ``from .fsops import x`` (relative imports are recomputed
  from the file's new package, also for the files that move), ``from staticpodd import decoding``
  and ``from . import store`` (the bound name is kept with ``as`` when the module's name changes).
- Dotted names anywhere: ``import staticpodd.store``, ``staticpodd.store.VersionStore`` (monkeypatch
  targets), ``:mod:`staticpodd.fsops```, ``python -m staticpodd.x``, ``staticpodd.x:main`` (entry
  points), mypy overrides.
- ``from staticpodd import migrations`` on a line of its own in a string (code a test runs in a
  subprocess); one that is not alone on its line (``-c "...; from staticpodd import x"``) is
  reported instead.
- Paths: ``staticpodd/fsops.py`` (docs, ruff per-file-ignores, packaging lists).
- A file name alone in quotes or backticks, ``"positions.py"`` or ```store.py```: the path under
  ``staticpodd/`` (``"manifest/positions.py"``), as the code joins it to the package directory
  (resources._DECODER, tests) and as the docs' code map names files. Each such rewrite is listed.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = "staticpodd"

#: old module (under staticpodd/) -> new dotted name (under staticpodd/). Sorted by new place.
MOVES: dict[str, str] = {
    # the node's system calls: the only writer, the flock, sd_notify, write leases, the systemd
    # sandbox, file trust, inotify, the directory fingerprint
    "fsops": "node.fsops",
    "lock": "node.lock",
    "notify": "node.notify",
    "writelease": "node.writelease",
    "sandbox": "node.sandbox",
    "trust": "node.trust",
    "watch": "node.watch",
    "dirprint": "node.dirprint",
    # bytes -> document as the kubelet decodes them, and what is read of a file's name and pod
    "decoded": "manifest.decoded",
    "decoding": "manifest.decoding",
    "jsondecode": "manifest.jsondecode",
    "yamldecode": "manifest.yamldecode",
    "yamlresolve": "manifest.yamlresolve",
    "yamlsafe": "manifest.yamlsafe",
    "positions": "manifest.positions",
    "cmpatterns": "manifest.cmpatterns",
    "hostclaims": "manifest.hostclaims",
    # the SQLite version store
    "store": "store.versions",
    "storerows": "store.rows",
    "blobcodec": "store.blobcodec",
    "migrations": "store.migrations",
    "retention": "store.retention",
    "tallies": "store.tallies",
    # modules with one user, beside it
    "refused": "validate.refused",
    "hooks": "engine.hooks",
    "metrics": "daemon.metrics",
}

#: flat modules that stay where a reader expects them (cross-cutting, or the entry point)
STAY = frozenset({
    "__init__", "cli", "config", "errors", "hashes", "journal", "layout", "reconcile", "record",
    "resources", "termsafe",
})

#: docstrings of the packages the move creates (an existing __init__.py is kept as it is)
PACKAGE_DOCS: dict[str, str] = {
    "node": (
        "The node's system calls: the only writer inside the manifest directory (``fsops``), the\n"
        "flock (``lock``), sd_notify (``notify``), write leases (``writelease``), the systemd sandbox\n"
        "(``sandbox``), whether a file may be trusted (``trust``), inotify hints (``watch``) and the\n"
        "directory's fingerprint (``dirprint``). Imports nothing above the configuration layer.\n"
    ),
    "manifest": (
        "Bytes -> document as the kubelet decodes them (go-yaml v2, Go's encoding/json), with source\n"
        "positions: ``decoding`` (:func:`~staticpodd.manifest.decoding.decode`), ``yamldecode``,\n"
        "``yamlresolve``, ``jsondecode``, ``decoded``, ``positions``; PyYAML's bounded safe loader for\n"
        "the files read with PyYAML (``yamlsafe``); what a file's name says (``cmpatterns``) and which\n"
        "host-port claims clash (``hostclaims``). Pure; imports nothing of the validator.\n"
    ),
    "store": (
        "The version store: ``versions`` (:class:`~staticpodd.store.versions.VersionStore` over\n"
        "SQLite), its rows (``rows``), compressed blobs (``blobcodec``), schema upgrades\n"
        "(``migrations``), pruning (``retention``) and the alert counters read from its rows\n"
        "(``tallies``).\n"
    ),
}

#: ruff's line-length (pyproject.toml): lines the rewrite makes longer are listed
LINE_LIMIT = 120

#: a line holding KEEP is left as it is (a reference meant for older code, which a test runs from
#: ``git archive``); a file holding KEEP_FILE is left whole (a fixture maker run with older code)
KEEP = "regroup: keep"
KEEP_FILE = "regroup: keep-file"

#: files never rewritten: history, the blame list, this script (its tables name the old places)
SKIP_FILES = frozenset({"CHANGELOG.md", ".git-blame-ignore-revs", "tools/regroup.py"})

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"

#: stands for "staticpodd" in the absolute names the import pass writes, until the dotted-name pass
#: is done: ``from staticpodd import store`` becomes ``from staticpodd.store import versions as store``,
#: which that pass must not read as the old ``staticpodd.store`` once more
_SENTINEL = "\0staticpodd-moved\0"


class Problem(Exception):
    """Something the script cannot rewrite safely; the message says where."""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def repo_root() -> Path:
    here = Path(__file__).resolve().parent
    out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True)
    if out.returncode != 0:
        raise Problem(f"{here} is not inside a git checkout")
    return Path(out.stdout.strip())


# --- the plan ---------------------------------------------------------------------------------


def plan(root: Path) -> tuple[dict[str, str], list[str], list[str]]:
    """``(pending, unknown, notes)``: the moves still to make (old dotted -> new dotted, both with
    the ``staticpodd.`` prefix), flat modules the map does not know, and what was already done."""
    pkg = root / PACKAGE
    pending: dict[str, str] = {}
    notes: list[str] = []
    for old, new in sorted(MOVES.items()):
        src = pkg / f"{old}.py"
        dst = pkg / (new.replace(".", "/") + ".py")
        if src.exists() and dst.exists():
            raise Problem(f"both {src.relative_to(root)} and {dst.relative_to(root)} exist: merge them by hand")
        if src.exists():
            if (pkg / old).is_dir() and not new.startswith(old + "."):
                raise Problem(f"{src.relative_to(root)} has a package of its name beside it")
            text = src.read_text(encoding="utf-8")
            if "__file__" in text:
                raise Problem(f"{src.relative_to(root)} uses __file__: after the move its paths would be wrong")
            pending[f"{PACKAGE}.{old}"] = f"{PACKAGE}.{new}"
        elif dst.exists():
            notes.append(f"already moved: {PACKAGE}/{old}.py -> {dst.relative_to(root)}")
        else:
            notes.append(f"gone from the tree, skipped: {PACKAGE}/{old}.py")
    for pkg_name in sorted({n.split(".")[0] for n in MOVES.values()}):
        if (pkg / f"{pkg_name}.py").exists() and f"{PACKAGE}.{pkg_name}" not in pending:
            raise Problem(f"{PACKAGE}/{pkg_name}.py would be shadowed by the package {PACKAGE}/{pkg_name}/")
    unknown = sorted(
        p.stem for p in pkg.glob("*.py") if p.stem not in MOVES and p.stem not in STAY
    )
    for name in sorted(p.name for p in pkg.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if name not in {n.split(".")[0] for n in MOVES.values()} | {"commands", "daemon", "engine", "pin",
                                                                    "proof", "validate"}:
            notes.append(f"a package the map does not know keeps its place: {PACKAGE}/{name}/")
    return pending, unknown, notes


# --- module names of the tree ---------------------------------------------------------------------


def module_of(rel: str) -> str | None:
    """Dotted module name of a tracked path under staticpodd/ (``staticpodd/a/b.py`` -> ``staticpodd.a.b``)."""
    if not (rel.startswith(PACKAGE + "/") and rel.endswith(".py")):
        return None
    parts = rel[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def new_name(name: str, pending: dict[str, str]) -> str:
    """``name`` (a dotted module, or a dotted name inside one) with its old module replaced."""
    parts = name.split(".")
    for i in range(len(parts), 1, -1):
        head = ".".join(parts[:i])
        if head in pending:
            return ".".join([pending[head], *parts[i:]])
    return name


def relative(from_package: str, target: str) -> tuple[int, str]:
    """``(level, module)`` of the shortest relative import of ``target`` from ``from_package``."""
    a, b = from_package.split("."), target.split(".")
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    if common == 0:
        raise Problem(f"{target} is outside {from_package}'s tree")
    return len(a) - common + 1, ".".join(b[common:])


# --- Python imports -------------------------------------------------------------------------------

_FROM = re.compile(r"from(\s+)(\.*\s*[\w.]*)(\s+)import\b")


def rewrite_imports(text: str, rel: str, pending: dict[str, str]) -> str:
    """``text`` (a Python file at ``rel`` before the move) with every ``from`` import of a staticpodd
    module pointed at its new place; relative imports are recomputed from the file's new package."""
    old_mod = module_of(rel)
    is_init = rel.endswith("/__init__.py")
    old_pkg = new_pkg = PACKAGE
    if old_mod is not None:
        old_pkg = old_mod if is_init else old_mod.rpartition(".")[0]
        new_mod = pending.get(old_mod, old_mod)
        new_pkg = new_mod if is_init else new_mod.rpartition(".")[0]
    try:
        tree = ast.parse(text, filename=rel)
    except SyntaxError as exc:
        raise Problem(f"{rel}:{exc.lineno}: cannot parse: {exc.msg}") from None
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and any(KEEP in lines[i] for i in range(node.lineno - 1, node.end_lineno or 0)):
            continue
        if isinstance(node, ast.Call) and _is_import_module(node):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("."):
                if old_mod is None or old_mod in pending:
                    raise Problem(f"{rel}:{node.lineno}: relative import_module({arg.value!r}) in a moved file")
                level = len(arg.value) - len(arg.value.lstrip("."))
                base = ".".join(old_pkg.split(".")[: len(old_pkg.split(".")) - level + 1])
                target = f"{base}.{arg.value.lstrip('.')}"
                if new_name(target, pending) != target:
                    raise Problem(f"{rel}:{node.lineno}: import_module({arg.value!r}) names a moved module")
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if old_mod is None:
                continue  # a relative import outside the package (tests' own helpers)
            parts = old_pkg.split(".")
            base_parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(base_parts + ([node.module] if node.module else []))
        elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
            base = node.module
        else:
            continue
        # names that are modules moving on their own ("from staticpodd import decoding")
        moved_subs = [a for a in node.names if f"{base}.{a.name}" in pending]
        target = new_name(base, pending)
        stays = [a for a in node.names if a not in moved_subs]
        file_moves = old_mod is not None and old_mod in pending
        if not moved_subs and (not node.level or (target == base and not file_moves)):
            continue  # absolute "from staticpodd.store import X": the dotted-name pass rewrites it
        statements: list[str] = []

        if stays:
            if not moved_subs:  # only the module part changes: keep the statement's own layout
                seg = _segment(text, offsets, node)
                m = _FROM.match(seg)
                if m is None:
                    raise Problem(f"{rel}:{node.lineno}: cannot read this import statement")
                spelt = _spell(target, bool(node.level), new_pkg)
                new_seg = f"from{m.group(1)}{spelt}{m.group(3)}import" + seg[m.end():]
                edits.append((_start(offsets, node), _end(offsets, node), new_seg))
                continue
            statements.append(f"from {_spell(target, bool(node.level), new_pkg)} import {_names(stays)}")
        for alias in moved_subs:
            full = pending[f"{base}.{alias.name}"]
            parent, _, leaf = full.rpartition(".")
            bound = alias.asname or alias.name
            spelt = _spell(parent, bool(node.level), new_pkg)
            statements.append(f"from {spelt} import {leaf}" + (f" as {bound}" if bound != leaf else ""))
        indent = " " * node.col_offset
        edits.append((_start(offsets, node), _end(offsets, node), ("\n" + indent).join(statements)))
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _spell(module: str, relative_form: bool, from_package: str) -> str:
    """``module`` as an import names it: relative to ``from_package`` when the statement was relative."""
    if not relative_form:
        return _SENTINEL + module[len(PACKAGE):]
    level, rest = relative(from_package, module) if module != from_package else (1, "")
    return "." * level + rest


def _is_import_module(node: ast.Call) -> bool:
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
        isinstance(f, ast.Name) and f.id in ("import_module", "__import__")
    )


def _names(aliases: list[ast.alias]) -> str:
    return ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)


def _start(offsets: list[int], node: ast.stmt) -> int:
    return offsets[node.lineno - 1] + node.col_offset


def _end(offsets: list[int], node: ast.stmt) -> int:
    assert node.end_lineno is not None and node.end_col_offset is not None
    return offsets[node.end_lineno - 1] + node.end_col_offset


def _segment(text: str, offsets: list[int], node: ast.stmt) -> str:
    return text[_start(offsets, node):_end(offsets, node)]


# --- text: dotted names, paths, file names ------------------------------------------------------------


def rewrite_text(text: str, pending: dict[str, str], log: list[str], rel: str) -> str:
    """Dotted names (``staticpodd.store.X``), paths (``staticpodd/store.py``) and quoted file names
    (``"store.py"``, ```store.py```) of moved modules, pointed at their new places; a line holding
    :data:`KEEP` is left as it is."""
    lines = text.splitlines(keepends=True)
    out = []
    for n, line in enumerate(lines, 1):
        out.append(line if KEEP in line else _rewrite_line(line, pending, log, f"{rel}:{n}"))
    return "".join(out)


def _rewrite_line(text: str, pending: dict[str, str], log: list[str], where: str) -> str:
    flat = {old.split(".", 1)[1]: new.split(".", 1)[1] for old, new in pending.items()}
    if not flat:
        return text
    alt = "|".join(sorted(flat, key=lambda n: (-len(n), n)))

    def dotted(m: re.Match[str]) -> str:
        return f"{PACKAGE}.{flat[m.group(1)]}"

    text = re.sub(rf"(?<![\w.]){PACKAGE}\.({alt})(?![\w])", dotted, text)

    def from_package(m: re.Match[str]) -> str:  # "from staticpodd import a, b" inside a string
        indent, names = m.group(1), [n.strip() for n in m.group(2).split(",")]
        if not any(n.split(" as ")[0].strip() in flat for n in names):
            return m.group(0)
        out, stays = [], []
        for n in names:
            name, _, alias = (x.strip() for x in n.partition(" as "))
            if name not in flat:
                stays.append(n)
                continue
            parent, _, leaf = flat[name].rpartition(".")
            bound = alias or name
            out.append(f"from {_SENTINEL}.{parent} import {leaf}" + (f" as {bound}" if bound != leaf else ""))
        if stays:
            out.insert(0, f"from {_SENTINEL} import {', '.join(stays)}")
        return indent + ("\n" + indent).join(out)

    text = re.sub(rf"(?m)^([ \t]*)from {PACKAGE} import ((?:{IDENT}(?: as {IDENT})?, )*{IDENT}(?: as {IDENT})?)[ \t]*$",
                  from_package, text)

    def path(m: re.Match[str]) -> str:
        return f"{PACKAGE}/{flat[m.group(1)].replace('.', '/')}.py"

    text = re.sub(rf"(?<![\w.-]){PACKAGE}/({alt})\.py(?![\w])", path, text)

    def quoted(m: re.Match[str]) -> str:
        new = flat[m.group(1)].replace(".", "/") + ".py"
        log.append(f"  {where}: {m.group(1)}.py -> {new}")
        return new

    return re.sub(rf"(?<=[`'\"])({alt})\.py(?=[`'\"])", quoted, text)


# --- after the move: does everything resolve? ---------------------------------------------------------


def check(root: Path, pending: dict[str, str], files: list[str]) -> list[str]:
    """Problems left after the rewrite: imports of staticpodd modules that do not resolve, and
    dotted or path references to a moved module's old place."""
    pkg = root / PACKAGE
    modules = {module_of(p.relative_to(root).as_posix()) for p in pkg.rglob("*.py")}
    olds = {old.split(".", 1)[1] for old in pending}
    problems: list[str] = []
    dotted = re.compile(rf"(?<![\w.]){PACKAGE}((?:\.{IDENT})+)")
    for rel in files:
        path = root / rel
        if rel in SKIP_FILES or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if KEEP_FILE in text:
            continue
        orig = text
        text = "".join(line if KEEP not in line else "\n" for line in text.splitlines(keepends=True))
        for m in dotted.finditer(text):
            parts = m.group(1).split(".")[1:]
            first = parts[0]
            if first not in olds:
                continue
            left = f"{PACKAGE}.{first}" not in modules
            if not left and len(parts) > 1 and f"{PACKAGE}.{first}.{parts[1]}" not in modules:
                # the old module's name is now a package's: is the next name one of its own?
                left = parts[1] not in _top_names(pkg / first / "__init__.py")
            if left:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: still names {PACKAGE}.{'.'.join(parts)} "
                                f"({PACKAGE}.{first} moved to {pending[f'{PACKAGE}.{first}']})")
        for m in re.finditer(rf"\bfrom {PACKAGE} import ([\w ,]+)", text):
            left_names = [n for n in (x.strip().split(" ")[0] for x in m.group(1).split(",")) if n in olds]
            if any(f"{PACKAGE}.{n}" not in modules for n in left_names):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: still imports {left_names} from {PACKAGE} (in a string?)")
        for m in re.finditer(rf"(?<![\w.-]){PACKAGE}/({IDENT})\.py\b", text):
            if m.group(1) in olds:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: still names {PACKAGE}/{m.group(1)}.py")
        if rel.endswith(".py"):
            problems += _unresolved(rel, orig, modules)
    return problems


def _top_names(init: Path) -> set[str]:
    """The names a package's ``__init__.py`` defines or imports at its top level."""
    if not init.exists():
        return set()
    names: set[str] = set()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _unresolved(rel: str, text: str, modules: set[str | None]) -> list[str]:
    try:
        tree = ast.parse(text, filename=rel)
    except SyntaxError as exc:
        return [f"{rel}:{exc.lineno}: does not parse after the rewrite: {exc.msg}"]
    mod = module_of(rel)
    lines = text.splitlines()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and any(KEEP in lines[i] for i in range(node.lineno - 1, node.end_lineno or 0)):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if mod is None:
                    continue
                parts = (mod if rel.endswith("__init__.py") else mod.rpartition(".")[0]).split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == PACKAGE:
                base = node.module
            else:
                continue
            names = [base]
        else:
            continue
        for name in names:
            if name not in modules:
                out.append(f"{rel}:{node.lineno}: imports {name}, which is no module")
    return out


# --- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the rewrites; change nothing")
    parser.add_argument("--allow-dirty", action="store_true", help="run on a tree with uncommitted changes")
    args = parser.parse_args(argv)
    try:
        root = repo_root()
        if not args.allow_dirty and git(root, "status", "--porcelain", "--untracked-files=no").strip():
            raise Problem("the tree has uncommitted changes: commit or stash them (or --allow-dirty)")
        pending, unknown, notes = plan(root)
        for note in notes:
            print(note)
        for name in unknown:
            print(f"not in the map, left in place: {PACKAGE}/{name}.py")
        if not pending:
            print("nothing to move: the modules are already grouped")
            return 0
        for old, new in pending.items():
            print(f"move {old.replace('.', '/')}.py -> {new.replace('.', '/')}.py")
        files = [f for f in git(root, "ls-files", "-z").split("\0") if f]
        log: list[str] = []
        changed: dict[str, str] = {}
        for rel in files:
            path = root / rel
            if rel in SKIP_FILES or not path.is_file() or path.is_symlink():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue  # binary
            if KEEP_FILE in text:
                print(f"left whole ({KEEP_FILE}): {rel}")
                continue
            new = rewrite_imports(text, rel, pending) if rel.endswith(".py") else text
            new = rewrite_text(new, pending, log, rel).replace(_SENTINEL, PACKAGE)
            if new != text:
                changed[rel] = new
        print(f"rewrite {len(changed)} files")
        long_lines = [
            f"  {rel}:{n}: {len(line)} characters"
            for rel, new in sorted(changed.items()) if rel.endswith(".py") and not rel.startswith("tests/")
            for n, line in enumerate(new.splitlines(), 1)
            if len(line) > LINE_LIMIT and line not in files_text(root, rel)
        ]
        if long_lines:
            print(f"lines the rewrite made longer than {LINE_LIMIT} (ruff E501; wrap them by hand):")
            print("\n".join(long_lines))
        if log:
            print("file names rewritten as paths under staticpodd/ (check each is joined to the package directory):")
            print("\n".join(log))
        if args.dry_run:
            for rel in sorted(changed):
                print(f"  would rewrite {rel}")
            return 0
        for rel, text in changed.items():
            (root / rel).write_text(text, encoding="utf-8")
        for old, new in pending.items():
            dst = root / (new.replace(".", "/") + ".py")
            _ensure_package(root, dst.parent)
            git(root, "mv", old.replace(".", "/") + ".py", dst.relative_to(root).as_posix())
        problems = check(root, pending, [f for f in git(root, "ls-files", "-z").split("\0") if f])
        if problems:
            print("\nleft for a human (the tree is moved and rewritten; `git reset --hard` undoes it):")
            print("\n".join(problems))
            return 1
        print("done; now: ruff check --fix --select I staticpodd tests tools packaging; ruff check; mypy; tests")
        return 0
    except Problem as exc:
        print(f"regroup: {exc}", file=sys.stderr)
        return 1


def files_text(root: Path, rel: str) -> str:
    """The text of ``rel`` as it is on disk (before the rewrite is written)."""
    return (root / rel).read_text(encoding="utf-8")


def _ensure_package(root: Path, directory: Path) -> None:
    """Make ``directory`` a package (with its docstring) unless it is one; ``git add`` what it makes."""
    init = directory / "__init__.py"
    if init.exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    doc = PACKAGE_DOCS.get(directory.name)
    if doc is None:
        raise Problem(f"{directory.relative_to(root)} is a new package without a docstring in PACKAGE_DOCS")
    init.write_text(f'"""{doc}"""\n', encoding="utf-8")
    git(root, "add", init.relative_to(root).as_posix())


if __name__ == "__main__":
    sys.exit(main())
