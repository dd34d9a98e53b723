"""Shared helpers of the executor tests: plan documents and the local process launcher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Example topologies and the ranks a test world of 2, 4 or 8 processes plays on them.
RANK_SETS: dict[int, list[tuple[str, list[str]]]] = {
    2: [("demo.json", ["h0/gpu0", "h1/gpu0"]), ("dgx-1x8.json", ["h0/gpu0", "h0/gpu1"])],
    4: [
        ("star-one-slow.json", ["h0/cpu0", "h1/cpu0", "h2/cpu0", "h3/cpu0"]),
        ("one-slow-nic.json", ["h0/gpu0", "h0/gpu1", "h1/gpu0", "h1/gpu1"]),
    ],
    8: [
        ("dgx-1x8.json", [f"h0/gpu{i}" for i in range(8)]),
        ("demo.json", [f"h{h}/gpu{g}" for h in range(4) for g in range(2)]),
    ],
}
WANTED_ALGORITHMS = ("ring", "hierarchical", "forest")


def real_plans(nranks: int, size_bytes: int = 4 << 20) -> list[dict[str, Any]]:
    """Planner plans (every available algorithm the planner can serve) for ``nranks``."""
    from syncplan.core.errors import InfeasibleError
    from syncplan.planner.plan import ALGORITHMS, make_plan
    from syncplan.planner.topology import load_topology

    plans: dict[str, dict[str, Any]] = {}  # by program: equal programs are tested once
    for name, ranks in RANK_SETS[nranks]:
        topo = load_topology(EXAMPLES / name)
        for algo in WANTED_ALGORITHMS:
            if algo not in ALGORITHMS:
                continue
            try:
                doc = make_plan(topo, ranks, size_bytes, algorithm=algo)
            except InfeasibleError:
                continue
            key = json.dumps(
                [
                    [(t["src"], t["dst"], t["chunk"], t["reduce"]) for t in step]
                    for step in doc["program"]["steps"]
                ]
            )
            plans.setdefault(key, doc)
    return list(plans.values())


def plans_for(nranks: int) -> list[dict[str, Any]]:
    """Real planner plans when the planner is present, else the test ring."""
    from syncplan import planner

    if not (Path(planner.__file__).with_name("plan.py").is_file() and EXAMPLES.is_dir()):
        from tests.executor.plans import ring_plan

        return [ring_plan(nranks, 4096), ring_plan(nranks, nranks + 1)]
    return real_plans(nranks)


def write_plan(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    return path
