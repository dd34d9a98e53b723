"""A plan's predicted timeline: when each step of its program starts and ends under the cost
model (docs/cost-model.md), for comparison with a measured trace (docs/executor.md, "Timeline
trace")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from syncplan.core.document import PlanDocument
from syncplan.core.options import PlanOptions
from syncplan.core.program import Program
from syncplan.planner.cost import CostModel, switched
from syncplan.planner.routing import Router
from syncplan.planner.topology import Topology


def step_times(
    topo: Topology,
    plan: Mapping[str, Any],
    *,
    options: PlanOptions | None = None,
    size_bytes: float | None = None,
) -> list[float]:
    """Predicted seconds of every step of plan document ``plan`` on ``topo`` (0 for an
    empty step): ``program_step_times`` with the terms the document records (unless
    ``options``) at its size (unless ``size_bytes``)."""
    doc = PlanDocument.from_plan(plan)
    opts = options if options is not None else PlanOptions.recorded_in(dict(plan))
    size = float(size_bytes if size_bytes is not None else plan["size_bytes"])
    program = Program(doc.units, [list(s) for s in doc.steps])
    return program_step_times(topo, list(doc.ranks), program, size, opts)


def program_step_times(
    topo: Topology, ranks: list[str], program: Program, size_bytes: float, options: PlanOptions
) -> list[float]:
    """Predicted seconds of every step of ``program`` (0 for an empty step), whose sum is
    ``CostModel.program_time``: each step's ``CostModel.step_time`` plus ``switch_overhead``
    times the wire time of its slowest switched transfer (``syncplan.planner.cost.switched``)."""
    cost = CostModel(Router(topo), options)
    bpu = size_bytes / program.units
    out: list[float] = []
    prev = None
    for step in program.steps:
        t = cost.step_time(ranks, step, bpu)
        if step and cost.switch_overhead and prev is not None:
            mask = switched(prev, step)
            if any(mask):
                wires, _ = cost.transfer_wires(ranks, step, bpu)
                t += cost.switch_overhead * float(wires[np.asarray(mask)].max())
        if step:
            prev = step
        out.append(t)
    return out


def byte_step_times(program: Program, predicted_time_s: float) -> list[float]:
    """Without a topology: ``predicted_time_s`` split over the program's steps in proportion
    to each step's largest transfer (units), the cost model's split when every transfer has
    a link of its own, all of one bandwidth, and latency is nil."""
    widths = [max((t.hi - t.lo for t in s), default=0) for s in program.steps]
    total = sum(widths)
    return [predicted_time_s * w / total if total else 0.0 for w in widths]


def timeline(times: list[float]) -> list[tuple[float, float]]:
    """(start, end) seconds of steps of ``times`` seconds run one after another from 0."""
    out, t = [], 0.0
    for d in times:
        out.append((t, t + d))
        t += d
    return out
