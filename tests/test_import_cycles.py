"""No import cycle among tilesim's modules.

The graph is read from the source with `ast`, nothing is imported. A node is a module
(`tilesim.hwmodels.gpu`, a package is its `__init__`); an edge is an `import` or
`from … import …` of another tilesim module, relative or absolute. Three kinds of edge:

- module: at the top level of the file (also inside `if`/`try` there), run on import;
- function: inside a function or method body, run when it is called;
- typing: under `if TYPE_CHECKING:`, never run.

Module and function edges both count: a cycle of function-level imports still ties the
modules into one unit that cannot be read, tested or moved apart. Typing edges are left
out. `from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`;
the parent packages an import runs first are not edges of their own.

Run `python tests/test_import_cycles.py` to print every cycle with the kind of each edge.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Source folder -> the package it is installed as (pyproject's package-dir).
PACKAGES = {
    "tilesim": "tilesim",
    "hwmodels": "tilesim.hwmodels",
    "simulator": "tilesim.simulator",
    "traces": "tilesim.traces",
    "kernels": "tilesim.kernels",
    "validate": "tilesim.validate",
    "profiles": "tilesim.profiles",
}
SKIP_DIRS = {"results", "__pycache__"}


def modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is_package) for every .py file of the packages."""
    found: dict[str, tuple[Path, bool]] = {}
    for folder, package in PACKAGES.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            rel = path.relative_to(base)
            if SKIP_DIRS.intersection(rel.parts[:-1]):
                continue
            parts = list(rel.with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join([package, *parts])
            if package == "tilesim" and parts and parts[0] in PACKAGES:
                continue  # a folder tilesim/<pkg> would shadow the mapping; none exists
            found[name] = (path, is_package)
    return found


class _Visitor(ast.NodeVisitor):
    def __init__(self, name: str, is_package: bool, known: set[str]):
        self.package = name if is_package else name.rpartition(".")[0]
        self.known = known
        self.depth = 0  # function nesting
        self.typing = 0  # inside `if TYPE_CHECKING:`
        self.edges: list[tuple[str, str, int]] = []  # (target, kind, line)

    def _kind(self) -> str:
        if self.typing:
            return "typing"
        return "function" if self.depth else "module"

    def _add(self, target: str, line: int) -> None:
        # The longest known module that the dotted name names or lies inside.
        while target and target not in self.known:
            target = target.rpartition(".")[0]
        if target:
            self.edges.append((target, self._kind(), line))

    def visit_FunctionDef(self, node):  # noqa: N802
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def visit_If(self, node):  # noqa: N802
        test = node.test
        is_typing = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
        if is_typing:
            self.typing += 1
            for child in node.body:
                self.visit(child)
            self.typing -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node):  # noqa: N802
        for alias in node.names:
            if alias.name == "tilesim" or alias.name.startswith("tilesim."):
                self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):  # noqa: N802
        if node.level:
            base = self.package.split(".")
            if node.level > 1:
                base = base[: -(node.level - 1)]
            base = ".".join(base + ([node.module] if node.module else []))
        else:
            base = node.module or ""
            if not (base == "tilesim" or base.startswith("tilesim.")):
                return
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.known else base, node.lineno)


def import_graph() -> dict[str, list[tuple[str, str, int]]]:
    """Module -> its edges (target, kind, line), self-edges and typing edges included."""
    mods = modules()
    known = set(mods)
    graph = {}
    for name, (path, is_package) in mods.items():
        visitor = _Visitor(name, is_package, known)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        graph[name] = visitor.edges
    return graph


def _sccs(adj: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    counter = 0
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, iter(sorted(adj[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(adj[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def _shortest_cycle(adj: dict[str, set[str]], start: str, comp: set[str]) -> list[str]:
    """A shortest path start -> ... -> start inside the component (breadth first)."""
    prev: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(adj[node] & comp):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start]
                if child not in seen:
                    seen.add(child)
                    prev[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start]


def cycles(kinds=("module", "function")) -> list[str]:
    """One line per import cycle: each module of a cycle of the graph, with its edges' kinds."""
    graph = import_graph()
    adj: dict[str, set[str]] = {name: set() for name in graph}
    kind_of: dict[tuple[str, str], set[str]] = {}
    for name, edges in graph.items():
        for target, kind, line in edges:
            if kind in kinds and target != name:
                adj[name].add(target)
                kind_of.setdefault((name, target), set()).add(f"{kind}:{line}")
    lines = []
    for comp in _sccs(adj):
        members = set(comp)
        # One shortest cycle through each member, deduplicated.
        found = set()
        for member in comp:
            cyc = _shortest_cycle(adj, member, members)
            if len(cyc) < 2:
                continue
            body = cyc[:-1]
            turn = body.index(min(body))
            key = tuple(body[turn:] + body[:turn])
            if key in found:
                continue
            found.add(key)
            ring = [*key, key[0]]
            hops = [
                f"{a} -[{','.join(sorted(kind_of[(a, b)]))}]-> "
                for a, b in zip(ring, ring[1:], strict=False)
            ]
            lines.append("".join(hops) + ring[-1])
    return lines


def test_graph_sees_the_packages():
    graph = import_graph()
    assert "tilesim.hwmodels.gpu" in graph
    assert "tilesim.simulator.engine" in graph
    assert sum(len(edges) for edges in graph.values()) > 100


def test_no_import_cycle_at_module_level():
    found = cycles(kinds=("module",))
    assert not found, "module-level import cycles:\n" + "\n".join(found)


def test_no_import_cycle_with_function_level_imports():
    found = cycles(kinds=("module", "function"))
    assert not found, "import cycles (module and function level):\n" + "\n".join(found)


def test_checker_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "tilesim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", {"tilesim": "tilesim"})
    assert cycles(kinds=("module",)) == []
    found = cycles(kinds=("module", "function"))
    assert found == ["tilesim.a -[module:1]-> tilesim.b -[function:2]-> tilesim.a"]


if __name__ == "__main__":
    mod = cycles(kinds=("module",))
    print(f"module-level cycles: {len(mod)}")
    print("\n".join(mod))
    allc = cycles()
    print(f"\nmodule + function-level cycles: {len(allc)}")
    print("\n".join(allc))
