"""The import layers: core at the bottom, the shell on top, no circles (docs/architecture.md).

Each module's imports of syncplan modules, function-local ones included, are read from its
source; a layer may import itself and the layers below it, never above, and the import graph
has no cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "syncplan.core": "core",
    "syncplan.planner": "planner",
    "syncplan.agents": "agents",
    "syncplan.api": "api",
    "syncplan.executor": "executor",
    "syncplan": "syncplan",
}
# layer of each side: a module may import modules of its own side and of lower layers
LAYERS = {
    "core": 0,
    "planner": 1,
    "agents": 1,
    "executor": 2,
    "export": 2,
    "draw": 3,
    "api": 4,
    "shell": 5,
}


def module_name(path: Path) -> str:
    for name, folder in FOLDERS.items():
        base = ROOT / folder
        if path.is_relative_to(base):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([name, *parts])
    raise ValueError(path)


def side(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "shell"  # syncplan.cli, syncplan.demo, syncplan.testbed, ...


def sources() -> Iterator[tuple[str, Path]]:
    for folder in FOLDERS.values():
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield module_name(path), path


MODULES = dict(sources())


def imports(path: Path) -> list[tuple[str, bool]]:
    return list(_imports(path))


def _imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(imported syncplan module, whether the import is inside a function) of one file;
    imports for the type checker alone (``if TYPE_CHECKING:``) do not count."""
    tree = parsed(path)
    typing_only = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, ast.If)
        and ast.unparse(f.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for n in ast.walk(f)
    }
    local = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(f)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
            targets = [n for n in names if n in MODULES] or [node.module]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        if id(node) in typing_only:
            continue
        for t in targets:
            if t == "syncplan" or t.startswith("syncplan."):
                yield t, id(node) in local


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@cache
def graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for target, _ in imports(path):
            if target != name:
                g.add_edge(name, target)
    return g


def test_every_side_imports_only_its_layer_and_below() -> None:
    wrong = [
        f"{a} ({side(a)}) imports {b} ({side(b)})"
        for a, b in graph().edges
        if side(a) != side(b) and LAYERS[side(b)] >= LAYERS[side(a)] and b != "syncplan"
    ]
    assert not wrong, "\n".join(wrong)


def test_api_does_not_import_agents_and_nothing_imports_the_shell() -> None:
    edges = graph().edges
    assert not [e for e in edges if side(e[0]) == "api" and side(e[1]) == "agents"]
    assert not [e for e in edges if side(e[0]) != "shell" and side(e[1]) == "shell"]


def test_core_imports_no_side() -> None:
    assert not [b for a, b in graph().edges if side(a) == "core" and side(b) != "core"]


def test_no_import_circles() -> None:
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph()) if len(c) > 1]
    assert not cycles, cycles


@pytest.mark.parametrize("top", ["planner", "api", "agents", "executor"])
def test_no_top_level_side_imports(top: str) -> None:
    """Code imports ``syncplan.<side>``, never the bare folder name (which would load a second
    copy of the module from a checkout, or a training repository's own ``planner``)."""
    bad = []
    for name, path in MODULES.items():
        for node in ast.walk(parsed(path)):
            mods = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            bad += [f"{name}: {m}" for m in mods if m == top or m.startswith(f"{top}.")]
    assert not bad, bad
