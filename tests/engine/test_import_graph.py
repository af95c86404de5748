"""The import graph of ``nexus.engine``: no cycles, and the three folders import one way only.

The engine's folders are layers: ``types`` (the shared vocabulary) < ``assembly`` (what the
model is told) < ``execution`` (running it) < ``wiring`` (config, ledger, runtime, spawning). A
module may import its own layer and the layers below, never above; ``nexus/engine/__init__.py``
is the package's face and may name anything. Imports are read from the source with ``ast``,
module-level and function-level alike (a lazy import is still a dependency).

``if TYPE_CHECKING:`` imports count too, in both checks. They never execute, so they cannot
create an import-order cycle (a module seen half-initialised), and leaving them out would be
allowed; but a type named across a loop is the same tangle in the design (the engine's old
runner <-> execute <-> spawn <-> compact_session cycle ran entirely through such imports), so a
module that needs another's capability without importing it names a small ``Protocol`` instead
(``RunHost``, ``WorkerHost``, ``CompactHost``). The runtime-only graph is checked on its own as well,
so a failure says which kind of import closed the loop.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import nexus.engine

PACKAGE = "nexus.engine"
ROOT = Path(nexus.engine.__file__).parent
LAYERS = {"types": 0, "assembly": 1, "execution": 2, "wiring": 3}


@dataclass(slots=True, frozen=True)
class Edge:
    """``source`` imports ``target`` (both engine modules); ``typing_only`` = inside ``if TYPE_CHECKING:``."""

    source: str
    target: str
    typing_only: bool
    line: int


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join((PACKAGE, *parts))
        found[name.removesuffix(".__init__")] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # a relative import: resolve it against the importing module's package
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _edges(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    edges: list[Edge] = []
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for inner in child.body:
                    visit_one(inner, True)
                for inner in child.orelse:
                    visit_one(inner, typing_only)
            else:
                visit_one(child, typing_only)

    def visit_one(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(node, module, is_package):
                if target in modules and target != module:
                    edges.append(Edge(module, target, typing_only, node.lineno))
        visit(node, typing_only)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return edges


def _graph() -> list[Edge]:
    modules = _modules()
    return [edge for name, path in modules.items() for edge in _edges(name, path, modules)]


def _layer(module: str) -> int | None:
    """The module's layer, or None for the package face (``nexus.engine`` itself)."""
    rest = module.removeprefix(PACKAGE).lstrip(".")
    if not rest:
        return None
    head = rest.split(".")[0]
    assert head in LAYERS, f"{module}: every engine module lives in types.py, assembly/, execution/ or wiring/"
    return LAYERS[head]


def _cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge.target)
        graph.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_reader_sees_the_engine_imports() -> None:
    """Guard against a reader that finds nothing (the checks below would then pass vacuously)."""
    edges = _graph()
    assert len(_modules()) >= 20
    assert any(e.source.endswith("wiring.runtime") and e.target.endswith("execution.execute") for e in edges)
    assert any(e.typing_only for e in edges)


def test_every_engine_module_lives_in_a_layer() -> None:
    for module in _modules():
        _layer(module)


def test_no_import_cycles_inside_the_engine() -> None:
    edges = _graph()
    assert _cycles([e for e in edges if not e.typing_only]) == [], "a cycle of imports that run"
    assert _cycles(edges) == [], "a cycle closed by TYPE_CHECKING imports"


def test_each_layer_imports_only_its_own_and_the_layers_below() -> None:
    upward = []
    for edge in _graph():
        source, target = _layer(edge.source), _layer(edge.target)
        if source is not None and (target is None or target > source):
            kind = " (TYPE_CHECKING)" if edge.typing_only else ""
            upward.append(f"{edge.source}:{edge.line} imports {edge.target}{kind}")
    assert upward == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = [Edge("a", "b", False, 1), Edge("b", "c", False, 1), Edge("c", "a", False, 1), Edge("c", "d", False, 1)]
    assert _cycles(edges) == [["a", "b", "c"]]
