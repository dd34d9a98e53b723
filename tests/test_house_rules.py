"""House rules of the product code (docs/architecture.md): modules under 400 lines in the
sides, and no ``_private`` name imported from another module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("core", "planner", "api", "agents", "executor")
MAX_LINES = 400


@pytest.mark.parametrize("side", SIDES)
def test_modules_are_under_400_lines(side: str) -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / side).rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


@pytest.mark.parametrize("folder", [*SIDES, "syncplan"])
def test_no_private_name_crosses_a_file(folder: str) -> None:
    crossing = [
        f"{p.relative_to(ROOT)}: {node.module}.{alias.name}"
        for p in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("syncplan")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert not crossing, crossing
