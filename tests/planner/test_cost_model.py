"""CostModel.program_time prices every step at once: it must equal the step-by-step sum."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.core.errors import InfeasibleError
from syncplan.core.options import PlanOptions
from syncplan.core.program import Program, Transfer, program_from_doc, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, PlanContext
from syncplan.planner.cost import CostModel
from syncplan.planner.topology import Topology

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _step_by_step(cost: CostModel, ranks: list[str], prog: Program, size: float) -> float:
    return sum(cost.step_time(ranks, step, size / prog.units) for step in prog.steps)


@pytest.mark.parametrize("example", ["demo", "torus-3x3-degraded", "directed-ring-4x2-slow"])
@pytest.mark.parametrize("algorithm", ["ring", "hierarchical", "dbtree", "forest"])
def test_program_time_equals_the_sum_of_its_steps(example: str, algorithm: str) -> None:
    topo = Topology.from_dict(json.loads((EXAMPLES / f"{example}.json").read_text()))
    ranks = topo.endpoints()
    for size in (1000, 64 << 20):
        ctx = PlanContext.create(topo, ranks, size)
        try:
            prog = ALGORITHMS[algorithm](ctx).build()
        except InfeasibleError:
            continue
        pinned = program_from_doc(program_to_doc(prog))  # every path written out
        for cost in (ctx.cost, CostModel(ctx.router, options=PlanOptions(min_step_s=3e-6))):
            for p in (prog, pinned):
                assert cost.program_time(ranks, p, size) == _step_by_step(cost, ranks, p, size)


def test_program_time_shares_arcs_within_a_step_only() -> None:
    """Two transfers on the same arc in one step share it; in two steps they do not."""
    topo = Topology.from_dict(json.loads((EXAMPLES / "demo.json").read_text()))
    ranks = topo.endpoints()
    cost = PlanContext.create(topo, ranks, 1 << 20).cost
    a, b = 0, len(ranks) - 1
    one = Program(2, [[Transfer(a, b, 0, 1, True), Transfer(a, b, 1, 2, True)]])
    two = Program(2, [[Transfer(a, b, 0, 1, True)], [Transfer(a, b, 1, 2, True)]])
    together = cost.program_time(ranks, one, 1 << 20)
    apart = cost.program_time(ranks, two, 1 << 20)
    lat = float(cost.router.lat[cost.router.arcs(cost.router.path(ranks[a], ranks[b]))].sum())
    assert together == pytest.approx(apart - lat)  # the same bytes, one latency fewer
    assert cost.program_time(ranks, Program(1, [[], []]), 1 << 20) == 0.0
