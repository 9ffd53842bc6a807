"""The package's imports, read from its source: no cycles among its modules (type-only and lazy
imports count), and nothing from outside it but the standard library and its declared
dependencies.

The graph is read with `ast`: every `import` and `from ... import` anywhere in a module (under
`if TYPE_CHECKING:`, inside functions) and every `importlib.import_module("...")` with a literal
name is an edge to the module it names.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "acp_server"


def module_paths() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imported_names(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module `module` imports (a `from X import name` of a package submodule names it)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                prefix = ".".join([*base, *([node.module] if node.module else [])])
            else:
                prefix = node.module or ""
            for alias in node.names:
                submodule = f"{prefix}.{alias.name}"
                names.add(submodule if submodule in modules else prefix)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `module` imports."""
    names = imported_names(module, path, modules)
    return {name for name in names if name in modules and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = module_paths()
    return {module: imported(module, path, modules) for module, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_is_read_from_the_source() -> None:
    graph = import_graph()
    assert "acp_server.client.journal" in graph["acp_server.client.follow"]
    assert "acp_server.testing.scenario" in graph["acp_server.schemas"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_has_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


OPTIONAL_EXTRAS = {
    "acp_server.storage.sql.postgres": "postgres",
    "acp_server.storage.sql.postgres_links": "postgres",
}
"""The modules that may import an optional extra's dependencies (and only that extra's)."""


def test_the_package_imports_only_the_standard_library_and_its_declared_dependencies() -> None:
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {
        _normalized(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))  # type: ignore[union-attr]
        for requirement in project["project"]["dependencies"]
    }
    extras = project["project"]["optional-dependencies"]
    distributions = packages_distributions()
    modules = module_paths()
    undeclared = set()
    for module, path in modules.items():
        allowed = set(declared)
        extra = OPTIONAL_EXTRAS.get(module)
        if extra is not None:
            allowed |= {
                _normalized(re.match(r"[A-Za-z0-9_.-]+", r).group(0))  # type: ignore[union-attr]
                for r in extras[extra]
            }
        for name in imported_names(module, path, modules):
            top = name.split(".")[0]
            if top == "acp_server" or not top or top in sys.stdlib_module_names:
                continue
            owners = {_normalized(owner) for owner in distributions.get(top, [top])}
            if not owners & allowed:
                undeclared.add(f"{module}: {name}")
    assert sorted(undeclared) == []
