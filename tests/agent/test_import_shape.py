"""The import shape of choir-agent (issue 13, docs/ARCHITECTURE.md "The agent kernel owns…").

- No import cycle between the modules of `choir/agent`: every import counts, those inside
  functions and under `TYPE_CHECKING` too — a cycle hidden in a function is still one.
- `choir/agent/kernel` imports nothing of choir-agent but itself: it owns the tool and intent
  contracts, so it never needs `agent/tools` or `agent/replication`.
- `choir/agent/tools` implements the kernel's contract and needs nothing else of choir-agent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT = "choir.agent"


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` under `root`, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in (root / package.replace(".", "/")).rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path) -> Iterator[str]:
    """The dotted names `path` (module `name`) imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports (a name resolves to its longest module)."""
    mods = modules(root, package)
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        for target in imported(name, path):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component: list[str] = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def outside(
    graph: Mapping[str, set[str]], package: str, allowed: tuple[str, ...]
) -> dict[str, list[str]]:
    """For each module of `package`: what it imports of choir-agent beyond `allowed` packages."""
    return {
        name: sorted(
            t for t in targets if not any(t == a or t.startswith(a + ".") for a in allowed)
        )
        for name, targets in graph.items()
        if name == package or name.startswith(package + ".")
    }


def test_choir_agent_has_no_import_cycle():
    assert cycles(import_graph(ROOT, AGENT)) == []


def test_the_kernel_imports_nothing_of_choir_agent_but_itself():
    offenders = outside(import_graph(ROOT, AGENT), "choir.agent.kernel", ("choir.agent.kernel",))
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_tools_import_only_the_kernel_and_themselves():
    allowed = ("choir.agent.kernel", "choir.agent.tools")
    offenders = outside(import_graph(ROOT, AGENT), "choir.agent.tools", allowed)
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_checker_sees_a_cycle_hidden_in_a_function_or_type_checking(tmp_path: Path):
    """The guard above would pass vacuously if function-level imports were missed."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (package / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert cycles(import_graph(tmp_path, "pkg")) == [["pkg.a", "pkg.b"]]
