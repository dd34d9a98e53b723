"""Functions the trace tests run inside spawned gloo processes (see executor.localrun)."""

from __future__ import annotations

from typing import Any


def run_plan(plan: dict[str, Any], numel: int, runs: int, schedule: str) -> int:
    """Run ``plan`` ``runs`` times on a float32 buffer of ``numel`` elements; the rank."""
    import torch
    import torch.distributed as dist
    from syncplan.executor.engine import ExecutorConfig, PlanExecutor

    ex = PlanExecutor(plan, config=ExecutorConfig(schedule=schedule))
    x = torch.ones(numel)
    for _ in range(runs):
        ex.all_reduce(x)
    return dist.get_rank()
