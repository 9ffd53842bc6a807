"""The package's imports, read from its source: the layer rules of ARCHITECTURE.md (`LAYERS`), no
cycles among its modules (type-only and lazy imports count), and nothing from outside it but the
standard library and its declared dependencies.

The graph is read with `ast`: every `import` and `from ... import` anywhere in a module (under
`if TYPE_CHECKING:`, inside functions) and every `importlib.import_module("...")` with a literal
name is an edge to the module it names.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "acp_server"


def module_paths(package: Path = PACKAGE) -> dict[str, Path]:
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
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


@functools.cache
def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module's package imports (read once per package: the tests only read it)."""
    modules = module_paths(package)
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


LAYERS: dict[str, frozenset[str]] = {
    "acp_server.core": frozenset(),
    "acp_server.jsonrpc": frozenset(),
    "acp_server.storage": frozenset({"acp_server.core"}),
    "acp_server.providers": frozenset({"acp_server.core"}),
    "acp_server.client": frozenset({"acp_server.core", "acp_server.jsonrpc"}),
    "acp_server.agent": frozenset(
        {
            "acp_server.core",
            "acp_server.storage.api",
            "acp_server.storage.errors",
            "acp_server.providers.base",
        }
    ),
    "acp_server.transports": frozenset({"acp_server.jsonrpc"}),
}
"""The layer rules of ARCHITECTURE.md: what each layer may import of the package besides itself
(a name allows the module or package it names and everything below it). The layers not named
here (the server, the command line, the launcher, the snapshot runner) may import any of them."""


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str, layers: dict[str, frozenset[str]]) -> str | None:
    """The layer `module` belongs to (the longest name it is within), or None."""
    owners = [layer for layer in layers if _within(module, layer)]
    return max(owners, key=len) if owners else None


def layer_violations(
    graph: dict[str, set[str]], layers: dict[str, frozenset[str]] = LAYERS
) -> list[str]:
    """Every import of the graph its layer does not allow, as "importer -> imported", sorted."""
    found = []
    for module, imports in graph.items():
        layer = layer_of(module, layers)
        if layer is None:
            continue
        allowed = (layer, *layers[layer])
        found += [
            f"{module} -> {name}"
            for name in imports
            if not any(_within(name, prefix) for prefix in allowed)
        ]
    return sorted(found)


def test_the_layers_import_only_what_architecture_md_allows() -> None:
    assert layer_violations(import_graph()) == []


def test_the_layer_check_reports_a_planted_wrong_import_type_only_and_lazy_ones_too(
    tmp_path: Path,
) -> None:
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/events.py": "",
        "storage/__init__.py": "",
        "storage/api.py": "from ..core import events\n",
        "storage/jsonl.py": "from .api import *\n",
        "providers/__init__.py": "",
        "providers/base.py": "",
        "providers/credentials.py": "from acp_server.core.events import *\n",
        "agent/__init__.py": "",
        "agent/loop.py": (
            "from typing import TYPE_CHECKING\n"
            "from ..storage.api import *\n"
            "from ..providers.base import *\n"
            "if TYPE_CHECKING:\n"
            "    from ..storage.jsonl import *\n"
        ),
        "agent/tools/__init__.py": "",
        "agent/tools/tree.py": (
            "from ...core import events\n"
            "def private():\n"
            "    from ...providers.credentials import credentials_directory\n"
        ),
        "server/__init__.py": "",
        "server/turns.py": "from ..providers import credentials\nfrom ..agent import loop\n",
    }
    package = tmp_path / "acp_server"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    assert layer_violations(import_graph(package)) == [
        "acp_server.agent.loop -> acp_server.storage.jsonl",
        "acp_server.agent.tools.tree -> acp_server.providers.credentials",
    ]


def test_a_module_belongs_to_the_deepest_layer_that_names_it() -> None:
    layers = {"p.a": frozenset({"p.b"}), "p.a.inner": frozenset()}
    assert layer_of("p.a.inner.x", layers) == "p.a.inner"
    assert layer_of("p.ab", layers) is None
    assert layer_violations({"p.a.inner.x": {"p.b.y"}, "p.a.x": {"p.b.y"}}, layers) == [
        "p.a.inner.x -> p.b.y"
    ]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


OPTIONAL_EXTRAS = {
    "acp_server.storage.sql.postgres": "postgres",
    "acp_server.storage.sql.postgres_links": "postgres",
    "acp_server.storage.sql.postgres_standby": "postgres",
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
