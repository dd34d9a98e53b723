"""Every candidate of the algorithm table priced on the program it builds, and checked by the
verifier under the same cost settings: the shared core of the overhead-term tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.plan import with_routes
from syncplan.planner.verify import verify_plan


def priced_and_verified(
    ctx: PlanContext, topo: Any
) -> Iterator[tuple[str, Any, Program, float, dict[str, Any]]]:
    """Per feasible algorithm: (name, candidate, routed program, cost-model time, plan
    document), after checking that the candidate's prediction and the verifier's time (under
    ``ctx``'s overheads, cores and switch term) both equal the cost model on the program it
    builds."""
    ranks, size, cost_model = ctx.ranks, ctx.size_bytes, ctx.cost
    for algorithm, make in ALGORITHMS.items():
        try:
            cand = make(ctx)
        except InfeasibleError:
            continue
        prog = with_routes(cand.build(), ranks, ctx.router)
        cost = cost_model.program_time(ranks, prog, size)
        assert cand.predicted_time_s == pytest.approx(cost, rel=1e-9), algorithm
        doc = {"ranks": ranks, "size_bytes": size, "program": program_to_doc(prog)}
        rep = verify_plan(doc, topo, options=cost_model.options.with_(min_step_s=0.0))
        assert rep.ok and rep.simulated_time_s == pytest.approx(cost, rel=1e-9), algorithm
        yield algorithm, cand, prog, cost, doc
