"""Functions the sparse tests run inside spawned gloo processes (see executor.localrun)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.engine import PlanExecutor
from syncplan.executor.sparse import SparseConfig, SparseExecutor
from syncplan.executor.sparse_bench import block_sparse

from tests.executor.workers import digest

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
}


SparseCase = tuple[dict[str, Any], int, str, float, bool, dict[str, Any]]


def check_sparse(cases: list[SparseCase]) -> list[dict[str, Any]]:
    """Run each (plan, numel, dtype, density, overlap, SparseConfig keywords) twice and
    compare with torch's dense all_reduce of the same inputs."""
    out = []
    n = dist.get_world_size()
    for i, (plan, numel, dtype_name, density, overlap, settings) in enumerate(cases):
        dtype = DTYPES[dtype_name]
        cfg = SparseConfig(**{"max_density": 1.0, **settings})
        ex = SparseExecutor(PlanExecutor(plan), cfg, plan=plan)
        x = block_sparse(
            numel,
            ex.block_elems,
            density,
            overlap,
            dtype,
            seed=i,
            rank=dist.get_rank(),
            negzero=i % 5 == 4,
        )
        y = ex.all_reduce(x.clone())
        stats = ex.last
        again = ex.all_reduce(x.clone())
        ref = x.clone()
        dist.all_reduce(ref)
        if dtype.is_floating_point:
            absum = x.abs().double()
            dist.all_reduce(absum)
            err = (y.double() - ref.double()).abs()
            tol = n * torch.finfo(dtype).eps * absum + torch.finfo(dtype).tiny
            ok = bool((err <= tol).all())
        else:
            ok = torch.equal(y, ref)
        digests: list[Any] = [None] * n
        # the sign of a zero may differ between ranks (executor.sparse): compare y + 0.0
        dist.all_gather_object(digests, digest(y + 0 if dtype.is_floating_point else y))
        out.append(
            {
                "ok": ok,
                "identical": len(set(digests)) == 1,
                "repeatable": torch.equal(y, again),
                "mode": stats.mode if stats else None,
                "density": stats.density if stats else None,
                "traffic": stats.traffic_fraction if stats else None,
                "case": f"{plan.get('algorithm')}:{plan['plan_id']} n={numel} {dtype_name} "
                f"d={density} overlap={overlap} {settings}",
            }
        )
    return out
