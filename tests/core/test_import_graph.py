"""No import circles inside the staticpodd package, and every import runs down the layers.

Every module under ``staticpodd/`` is parsed with :mod:`ast` (nothing is imported), and each
``import``/``from … import`` of a staticpodd module becomes an edge of a graph: top-level imports
*and* the lazy ones inside functions and methods, because a lazy import that leads back to its
module is still a circle a newcomer has to untangle (it only moves the failure from import time
to the first call). Imports under ``if TYPE_CHECKING:`` never run and are left out.

Importing ``staticpodd.a.b`` from outside the package ``staticpodd.a`` first runs
``staticpodd/a/__init__.py``, so such an import is an edge to the package too; a package's own
modules importing each other (or the package importing its modules) is not.

The layer contracts (:data:`LAYERS`) say which part may import which: a module imports only its own
part and the parts of the layers below; two parts of one layer import neither each other. The
``kubernetes`` client is imported only by the cluster-facing modules (a ``cluster`` in the name).
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "staticpodd"
PACKAGE = "staticpodd"


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``path:line``; ``lazy`` when inside a function."""

    source: str
    target: str
    path: str
    line: int
    lazy: bool

    def describe(self) -> str:
        where = "inside a function" if self.lazy else "at top level"
        return f"{self.source} -> {self.target}    ({self.path}:{self.line}, {where})"


def module_names(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the package."""
    out: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with ``lazy`` (inside a function), skipping TYPE_CHECKING blocks."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit_one(other, lazy)
                continue
            visit_one(child, lazy)

    def visit_one(child: ast.AST, lazy: bool) -> None:
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append((child, lazy))
        visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def edges(modules: dict[str, Path] | None = None) -> list[Edge]:
    """The staticpodd-internal import edges of every module."""
    modules = module_names() if modules is None else modules
    out: list[Edge] = []
    root = modules[PACKAGE].parent.parent if PACKAGE in modules else PACKAGE_DIR.parent
    for source, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own_package = _package_of(source, path)
        for node, lazy in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = own_package.split(".")
                    if node.level > 1:
                        base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from pkg import mod`` imports the module pkg.mod; ``from pkg import name`` needs
                # pkg/__init__ to have run far enough to define ``name``
                subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            for target in targets:
                if target not in modules or target == source:
                    continue
                out.append(Edge(source, target, str(path.relative_to(root)), node.lineno, lazy))
                # importing a.b.c from outside package a.b runs a/b/__init__.py (and a/__init__.py) first
                chain = target.split(".")
                for i in range(len(chain) - 1, 1, -1):
                    parent = ".".join(chain[:i])
                    if parent in modules and parent != source and not (
                        own_package == parent or own_package.startswith(parent + ".")
                    ):
                        out.append(Edge(source, parent, str(path.relative_to(root)), node.lineno, lazy))
    return out


def cycles(all_edges: list[Edge]) -> list[list[Edge]]:
    """The circles among the modules, as edges: for each strongly connected group (Tarjan), the
    shortest circle through each of its modules, without repeats."""
    graph: dict[str, dict[str, Edge]] = {}
    for e in all_edges:
        graph.setdefault(e.source, {}).setdefault(e.target, e)
        graph.setdefault(e.target, {})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # recursion depth is bounded by the number of modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)

    out: list[list[Edge]] = []
    seen: set[frozenset[tuple[str, str]]] = set()
    for group in sorted(groups, key=min):
        for start in sorted(group):  # the shortest circle through each module of the group
            circle = _shortest_circle(graph, group, start)
            key = frozenset((e.source, e.target) for e in circle)
            if key not in seen:
                seen.add(key)
                out.append(circle)
    return out


def _shortest_circle(graph: dict[str, dict[str, Edge]], group: set[str], start: str) -> list[Edge]:
    """Breadth-first: the shortest way from ``start`` back to itself through ``group``."""
    paths: dict[str, list[Edge]] = {start: []}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w not in group:
                continue
            if w == start:
                return paths[v] + [graph[v][w]]
            if w not in paths:
                paths[w] = paths[v] + [graph[v][w]]
                queue.append(w)
    raise AssertionError(f"{start} is in a strongly connected group but on no circle")


def format_cycles(found: list[list[Edge]]) -> str:
    lines = [f"{len(found)} import circle(s) among staticpodd modules (lazy imports count too):"]
    for n, circle in enumerate(found, 1):
        names = " -> ".join([circle[0].source] + [e.target for e in circle])
        lines.append(f"\n  circle {n}: {names}")
        lines += [f"    {e.describe()}" for e in circle]
    lines.append(
        "\nBreak each circle by moving what both sides need into a smaller module that imports neither "
        "(e.g. source positions, records), or by moving the function that needs the upper layer into it."
    )
    return "\n".join(lines)


def test_the_package_has_no_import_circle() -> None:
    found = cycles(edges())
    assert not found, format_cycles(found)


def test_the_checker_sees_a_lazy_circle_and_a_package_init(tmp_path: Path) -> None:
    pkg = tmp_path / "staticpodd"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from staticpodd.sub.b import g\n")
    (pkg / "sub" / "__init__.py").write_text("from staticpodd.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from staticpodd import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import staticpodd.a\n")
    modules = module_names(pkg)
    assert cycles(edges(modules)) == []  # the TYPE_CHECKING import does not count; sub -> sub.b is fine
    (pkg / "c.py").write_text("from . import a\n")
    found = cycles(edges(modules))
    text = format_cycles(found)
    assert found, text
    assert "staticpodd.a -> staticpodd.sub    (staticpodd/a.py:2, inside a function)" in text  # runs sub/__init__
    assert "staticpodd.c -> staticpodd.a    (staticpodd/c.py:1, at top level)" in text


#: The layers, top to bottom; each holds parts (a package, or a module at the top of staticpodd/)
#: that import neither each other nor anything of a layer above them. Why each sits where it does:
#: the entry point over the verbs and the daemon; what --wait and pin ask of the node and the
#: cluster over the engine; the engine (the verbs) and reconcile (the daemon's policy) over the
#: validator and the version store; the configuration file (retention reads it); the node's system
#: calls (the only writer, the flock, inotify ...) over the paths they act on; the pure decoding of
#: manifests and the journal; value objects and errors at the bottom.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("commands", "daemon"),
    ("cluster",),  # the cluster view: its hook and publisher read parks (store) and pins (pin)
    ("pin", "proof"),
    ("engine", "reconcile"),
    ("validate", "store"),
    ("config", "cluster.client"),  # the API client alone: pin and proof's mirror check use it
    ("node",),
    ("layout",),
    ("manifest", "journal"),
    ("errors", "record", "termsafe", "resources", "hashes", ""),  # "": staticpodd/__init__.py
)

#: the third-party client only the modules that talk to the Kubernetes API may import
CLUSTER_CLIENT = "kubernetes"


def part_of(module: str, named: frozenset[str] = frozenset()) -> str:
    """The part a module belongs to: the longest of ``named`` (dotted below staticpodd: ``node``,
    or ``cluster.client`` for one module of a package whose others sit higher) that holds it, else
    its first name below staticpodd (``staticpodd.node.fsops`` -> ``node``); the package itself -> ``""``."""
    parts = module.split(".")[1:]
    for i in range(len(parts), 1, -1):
        if ".".join(parts[:i]) in named:
            return ".".join(parts[:i])
    return parts[0] if parts else ""


def layer_index(layers: tuple[tuple[str, ...], ...] = LAYERS) -> dict[str, int]:
    return {part: i for i, layer in enumerate(layers) for part in layer}


def layer_violations(
    all_edges: list[Edge], layers: tuple[tuple[str, ...], ...] = LAYERS
) -> tuple[list[str], list[str]]:
    """``(violations, unplaced)``: each import that runs up a layer or across one, described, and
    the parts no layer names (a new package: reported, not judged)."""
    where = layer_index(layers)
    named = frozenset(where)
    violations: list[str] = []
    unplaced: set[str] = set()
    # a package split across layers: importing its low module runs its __init__ (keep that empty)
    split = {".".join(n.split(".")[:i]) for n in named for i in range(1, n.count(".") + 1)}
    for e in all_edges:
        if e.target.partition(".")[2] in split:
            continue
        src, dst = part_of(e.source, named), part_of(e.target, named)
        if src == dst or (dst not in named and src.startswith(dst + ".")):
            continue  # within a part; or a sub-part's own package running its __init__
        unplaced |= {part for part in (src, dst) if part not in where}
        if src not in where or dst not in where:
            continue
        if where[dst] < where[src]:
            violations.append(f"{e.describe()}: {src or PACKAGE} (layer {where[src] + 1}) imports "
                              f"{dst or PACKAGE}, a layer above it ({where[dst] + 1})")
        elif where[dst] == where[src]:
            violations.append(f"{e.describe()}: {src or PACKAGE} and {dst or PACKAGE} share layer "
                              f"{where[src] + 1} and must not import each other")
    return violations, sorted(unplaced)


def client_imports(modules: dict[str, Path] | None = None) -> list[tuple[str, str, int]]:
    """``(module, path, line)`` of every import of the ``kubernetes`` client (lazy ones too)."""
    modules = module_names() if modules is None else modules
    out = []
    for source, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, _lazy in _imports(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if not isinstance(node, ast.Import) and node.level:
                continue
            if any(n == CLUSTER_CLIENT or n.startswith(CLUSTER_CLIENT + ".") for n in names):
                out.append((source, path.name, node.lineno))
    return out


def test_every_import_runs_down_the_layers() -> None:
    violations, unplaced = layer_violations(edges())
    if unplaced:
        warnings.warn(f"parts of staticpodd no layer names (not judged; add them to LAYERS): {unplaced}",
                      stacklevel=1)
    assert not violations, "imports against the layers (tests/core/test_import_graph.py LAYERS):\n  " + \
        "\n  ".join(violations)


def test_only_the_cluster_facing_modules_import_the_kubernetes_client() -> None:
    outside = [f"{m} ({p}:{line})" for m, p, line in client_imports() if "cluster" not in m.split(".")]
    assert not outside, f"the {CLUSTER_CLIENT} client imported outside a cluster module: {outside}"


def test_the_contracts_catch_an_import_up_a_layer_or_across_one(tmp_path: Path) -> None:
    pkg = tmp_path / "staticpodd"
    for sub in ("engine", "node", "validate", "store", "brandnew"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("")
    (pkg / "engine" / "core.py").write_text("from staticpodd.node import fsops\nfrom staticpodd import errors\n")
    (pkg / "node" / "fsops.py").write_text("from staticpodd import errors\n")
    (pkg / "brandnew" / "x.py").write_text("from staticpodd.engine import core\n")
    modules = module_names(pkg)
    assert layer_violations(edges(modules)) == ([], ["brandnew"])  # downwards only; the new part is named
    (pkg / "node" / "fsops.py").write_text("def f():\n    from ..engine import core\n")
    (pkg / "store" / "rows.py").write_text("from staticpodd.validate import x\n")
    (pkg / "validate" / "x.py").write_text("from kubernetes import client\n")
    modules = module_names(pkg)
    violations, _ = layer_violations(edges(modules))
    text = "\n".join(violations)
    assert "staticpodd.node.fsops -> staticpodd.engine.core" in text and "a layer above it" in text, text
    assert "staticpodd.store.rows -> staticpodd.validate" in text and "must not import each other" in text, text
    assert client_imports(modules) == [("staticpodd.validate.x", "x.py", 1)]


def test_a_module_can_sit_in_a_layer_of_its_own_below_its_package(tmp_path: Path) -> None:
    pkg = tmp_path / "staticpodd"
    for sub in ("proof", "cluster"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cluster" / "client.py").write_text("")
    (pkg / "cluster" / "hook.py").write_text("from staticpodd.proof import mirror\n")
    (pkg / "proof" / "mirror.py").write_text("from staticpodd.cluster import client\n")
    layers = (("cluster",), ("proof",), ("cluster.client",))
    assert layer_violations(edges(module_names(pkg)), layers) == ([], [])
    (pkg / "cluster" / "client.py").write_text("from staticpodd.cluster import hook\n")
    violations, _ = layer_violations(edges(module_names(pkg)), layers)
    assert any("staticpodd.cluster.client -> staticpodd.cluster.hook" in v for v in violations), violations
