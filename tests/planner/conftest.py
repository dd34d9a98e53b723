from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from syncplan.planner.families import FAMILY_EXAMPLES
from syncplan.planner.topology import Topology, load_topology

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCALE_BENCH = Path(__file__).resolve().parents[2] / "bench" / "planner_scale"
QUALITY_BENCH = SCALE_BENCH.parent / "planner_quality"
EXAMPLE_FILES = sorted(p for p in EXAMPLES.glob("*.json") if p.name != "demo.json")
# the family examples (planner/families.py) cost today's forest 2-8 s per plan: slow subset
_SLOW_EXAMPLES = set(FAMILY_EXAMPLES)


@pytest.fixture(
    params=[
        pytest.param(p, marks=pytest.mark.slow) if p.stem in _SLOW_EXAMPLES else p
        for p in EXAMPLE_FILES
    ],
    ids=lambda p: p.stem,
)
def example(request: pytest.FixtureRequest) -> Topology:
    return load_topology(request.param)


def load_bench_script(name: str, folder: Path = SCALE_BENCH) -> ModuleType:
    """A script of bench/planner_scale (or of ``folder``; not a package) loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
