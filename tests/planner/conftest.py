from __future__ import annotations

from pathlib import Path

import pytest

from planner.topology import Topology, load_topology

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_FILES = sorted(p for p in EXAMPLES.glob("*.json") if p.name != "demo.json")


@pytest.fixture(params=EXAMPLE_FILES, ids=lambda p: p.stem)
def example(request: pytest.FixtureRequest) -> Topology:
    return load_topology(request.param)
