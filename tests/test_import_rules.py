"""The import graph of ``src/nexus``: the DESIGN §2 ladder, true package faces, no cycles.

Imports are read from the source with ``ast``: module-level, function-level (a lazy import is still
a dependency) and ``if TYPE_CHECKING:`` ones alike. A type named across a loop is the same tangle in
the design as an import that runs (the engine's old runner <-> execute <-> spawn <-> compact_session
cycle ran entirely through such imports), so a module that needs another's capability without
importing it names a small ``Protocol`` instead (``RunHost``, ``WorkerHost``, ``CompactHost``,
``Messenger``, ``Closable``). The runtime-only graph is checked on its own as well, so a failure says
which kind of import closed a loop. docs/architecture.md draws the ladder.

- **Ladder**: a package imports only the packages DESIGN §2 lets it (``MAY_IMPORT``, closed
  downwards: a package may import what the packages it may import may import), and that table
  itself points down ``LAYER`` (two same-layer pairs, each with its reason). The root modules
  (``nexus``, ``nexus.errors``, ``nexus._lazy``, ``nexus._dataclass``, ``nexus._replace_file``) import no
  package. The engine's
  own folders are a ladder too: ``types`` < ``assembly`` < ``execution`` < ``wiring``.
- **Faces**: another package is imported through its face (``nexus.<package>``, its ``__init__``),
  never through a submodule, private or not; ``FACE_EXCEPTIONS`` lists the few that must stay
  (none today). tests/test_package_faces.py checks the faces give what they list.
- **No cycles**, between packages and between modules anywhere.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nexus

ROOT = Path(nexus.__file__).parent

LAYER: dict[str, int] = {
    # DESIGN §2's layer numbers. nexus.testing is shipped for tests (ours and users'): nothing imports it, so it
    # sits on top, beside the CLI (its scripted broker runtime stands an AgentBroker on a ledger).
    **{"testing": 8, "cli": 8, "server": 8, "broker": 7, "streaming": 6, "adapters": 6, "routing": 6, "engine": 5},
    **{"ledger": 4, "tools": 3, "mcp": 3, "agent": 2, "llm": 1, "config": 0, "telemetry": 0},
}
MAY_IMPORT: dict[str, frozenset[str]] = {
    # DESIGN §2's "may import" column, top to bottom (config and mcp below where the column leaves them out).
    "cli": frozenset({"server", "broker", "mcp"}),
    "server": frozenset({"broker", "mcp"}),
    "broker": frozenset({"engine", "streaming", "adapters", "routing", "ledger"}),
    "streaming": frozenset({"engine", "adapters", "llm"}),
    "adapters": frozenset({"llm", "config"}),
    "routing": frozenset({"ledger", "llm"}),
    "engine": frozenset({"agent", "tools", "mcp", "ledger", "llm", "config"}),
    "testing": frozenset({"broker"}),  # the fakes (model, provider server, ledger conformance) and a broker's runtime
    "ledger": frozenset({"llm"}),
    "tools": frozenset({"agent"}),
    "mcp": frozenset({"agent", "config"}),
    "agent": frozenset({"llm"}),
    # telemetry is below llm, the lowest layer that records (a model call's span and metrics), so every layer
    # above may import it (closed downwards); it imports nothing of ours but the root's __version__.
    "llm": frozenset({"telemetry"}),
    "config": frozenset(),
    "telemetry": frozenset(),
}
SAME_LAYER: dict[tuple[str, str], str] = {
    ("cli", "server"): "`nexus serve` starts the server; other commands find a running one and call it",
    (
        "streaming",
        "adapters",
    ): "the bridge writes StreamEvents to an adapter's pipe; adapters imports nothing above llm",
}
ROOT_MODULES = frozenset({"nexus", "nexus.errors", "nexus._lazy", "nexus._dataclass", "nexus._replace_file"})
ENGINE_FOLDERS = {"types": 0, "assembly": 1, "execution": 2, "wiring": 3}

FACE_EXCEPTIONS: dict[tuple[str, str], str] = {
    # (importing module, imported submodule): why it cannot go through the face. Empty: keep it short.
}


@dataclass(slots=True, frozen=True)
class Edge:
    """``source`` imports ``target`` (both nexus modules) at ``line``; ``typing_only``: inside ``if TYPE_CHECKING:``."""

    source: str
    target: str
    typing_only: bool
    line: int


@cache
def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(("nexus", *parts)).removesuffix(".__init__")] = path
    return found


def package_of(module: str) -> str | None:
    """``nexus.engine.wiring.runtime`` -> ``engine``; ``None`` for the root modules."""
    parts = module.split(".")
    if len(parts) < 2 or modules()[f"nexus.{parts[1]}"].name != "__init__.py":
        return None
    return parts[1]


@cache
def face_names(package_module: str) -> frozenset[str]:
    """The names a package face lists in ``__all__``."""
    tree = ast.parse(modules()[package_module].read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules ``node`` imports: ``from a import b`` is ``a.b`` when ``b`` is a module that is not
    a name in ``a``'s face."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: resolve against the importing module's package
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        exported = base in modules() and modules()[base].name == "__init__.py" and alias.name in face_names(base)
        found.append(sub if sub in modules() and not exported else base)
    return found


def _import_module_call(node: ast.AST) -> tuple[str, int] | None:
    """The module an ``importlib.import_module("nexus.x.y")`` call names with a literal, or None: an
    import by name is an import too (a package face's own lazy table is not one: it is the face)."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    value = node.args[0].value
    if name == "import_module" and isinstance(value, str) and value.startswith("nexus"):
        return value, node.lineno
    return None


def _edges(module: str, path: Path) -> list[Edge]:
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
            for target in dict.fromkeys(_targets(node, module, is_package)):
                if target in modules() and target != module:
                    edges.append(Edge(module, target, typing_only, node.lineno))
        named = _import_module_call(node)
        if named is not None and named[0] in modules() and named[0] != module:
            edges.append(Edge(module, named[0], typing_only, named[1]))
        visit(node, typing_only)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return edges


@cache
def graph() -> tuple[Edge, ...]:
    return tuple(edge for name, path in modules().items() for edge in _edges(name, path))


@cache
def allowed(package: str) -> frozenset[str]:
    """``package`` itself, what it may import, and (closed downwards) what those may import."""
    found = {package}
    for lower in MAY_IMPORT[package]:
        found |= allowed(lower)
    return frozenset(found)


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    successors: dict[str, list[str]] = {}
    for edge in edges:
        successors.setdefault(edge.source, []).append(edge.target)
        successors.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in successors[node]:
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

    for node in sorted(successors):
        if node not in index:
            connect(node)
    return found


def _say(edge: Edge) -> str:
    kind = " (TYPE_CHECKING)" if edge.typing_only else ""
    return f"{edge.source}:{edge.line} imports {edge.target}{kind}"


def test_the_reader_sees_the_imports() -> None:
    """Guard against a reader that finds nothing (the checks below would then pass vacuously)."""
    edges = graph()
    assert len(modules()) >= 300
    assert any(
        e.source == "nexus.engine.wiring.runtime" and e.target == "nexus.engine.execution.execute" for e in edges
    )
    assert any(e.typing_only for e in edges)
    assert any(e.source == "nexus.tools._pysearch" and e.target == "nexus.tools._walk" for e in edges)  # by name
    assert any(e.source.startswith("nexus.broker.") and e.target == "nexus.engine" for e in edges)
    assert set(MAY_IMPORT) >= {package_of(m) for m in modules()} - {None}


def test_each_package_imports_only_what_the_ladder_allows() -> None:
    upward = []
    for edge in graph():
        source, target = package_of(edge.source), package_of(edge.target)
        if source is not None and target is not None and target not in allowed(source):
            upward.append(_say(edge))
    assert upward == []


def test_the_ladder_table_points_down() -> None:
    """``MAY_IMPORT`` against DESIGN §2's layer numbers: down only, but for the listed same-layer pairs."""
    assert set(MAY_IMPORT) == set(LAYER)
    wrong = [
        f"{package} -> {lower}"
        for package, lowers in MAY_IMPORT.items()
        for lower in lowers
        if LAYER[lower] > LAYER[package] or (LAYER[lower] == LAYER[package] and (package, lower) not in SAME_LAYER)
    ]
    assert wrong == []
    assert all(lower in MAY_IMPORT[package] for package, lower in SAME_LAYER)
    assert not any("testing" in lowers for lowers in MAY_IMPORT.values())


def test_the_root_modules_import_no_package() -> None:
    reaching = [_say(e) for e in graph() if e.source in ROOT_MODULES and e.target not in ROOT_MODULES]
    assert {package_of(m) for m in ROOT_MODULES} == {None}
    assert reaching == []


def test_no_import_cycles_between_packages() -> None:
    """The package graph (an edge per package pair that any import joins) has no loop."""
    between = [
        Edge(source, target, e.typing_only, e.line)
        for e in graph()
        if (source := package_of(e.source)) and (target := package_of(e.target)) and source != target
    ]
    assert len({(e.source, e.target) for e in between}) >= 20
    assert cycles(between) == []


def test_the_engine_folders_import_one_way() -> None:
    def folder(module: str) -> int | None:
        rest = module.removeprefix("nexus.engine").lstrip(".")
        return None if not rest else ENGINE_FOLDERS[rest.split(".")[0]]

    upward = []
    for edge in graph():
        if edge.source.startswith("nexus.engine.") and edge.target.startswith("nexus.engine"):
            source, target = folder(edge.source), folder(edge.target)
            if source is not None and (target is None or target > source):
                upward.append(_say(edge))
    assert upward == []


def test_other_packages_import_only_faces() -> None:
    reaching = []
    for edge in graph():
        source, target = package_of(edge.source), package_of(edge.target)
        if target is None or source == target or edge.target == f"nexus.{target}":
            continue
        if (edge.source, edge.target) not in FACE_EXCEPTIONS:
            reaching.append(_say(edge))
    assert reaching == []


def test_the_face_exceptions_are_still_needed() -> None:
    used = {(e.source, e.target) for e in graph()}
    assert set(FACE_EXCEPTIONS) <= used


def test_no_import_cycles() -> None:
    edges = list(graph())
    assert cycles([e for e in edges if not e.typing_only]) == [], "a cycle of imports that run"
    assert cycles(edges) == [], "a cycle closed by TYPE_CHECKING imports"


def test_the_cycle_finder_finds_a_cycle() -> None:
    edges = [Edge("a", "b", False, 1), Edge("b", "c", False, 1), Edge("c", "a", False, 1), Edge("c", "d", False, 1)]
    assert cycles(edges) == [["a", "b", "c"]]


def test_the_checks_catch_a_reach_into_a_private_module() -> None:
    """The face rule and the ladder, on a made-up import: ``nexus.ledger`` reaching into the engine."""
    tree = ast.parse("from nexus.engine.wiring.runtime import Runtime\n")
    node = tree.body[0]
    assert isinstance(node, ast.ImportFrom)
    (target,) = _targets(node, "nexus.ledger.records", False)
    assert target == "nexus.engine.wiring.runtime"
    assert package_of(target) == "engine" and "engine" not in allowed("ledger")
