"""Functions the sparse tests run inside spawned gloo processes (see executor.localrun)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from executor.engine import PlanExecutor
from executor.sparse import SparseConfig, SparseExecutor
from tests.executor.workers import digest

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int32": torch.int32, "int64": torch.int64}


def block_sparse(numel: int, block: int, density: float, overlap: bool, dtype: torch.dtype,
                 seed: int, negzero: bool = False) -> torch.Tensor:
    """Random data whose blocks are non-zero with probability ``density``; with ``overlap``
    every rank has the same non-zero blocks (different values)."""
    if not 0 <= density <= 1:
        raise ValueError(f"density must be in [0, 1], got {density}")
    rank = dist.get_rank()
    nblocks = -(-numel // block)
    gm = torch.Generator().manual_seed(seed * 1000 + (0 if overlap else rank + 1))
    mask = torch.rand(nblocks, generator=gm) < density
    g = torch.Generator().manual_seed(seed * 1000 + 500 + rank)
    if dtype.is_floating_point:
        vals = torch.randn(nblocks * block, generator=g)
    else:
        vals = torch.randint(-1000, 1000, (nblocks * block,), generator=g).double()
    vals = torch.where(mask[:, None], vals.view(nblocks, block), 0.0)
    if negzero and dtype.is_floating_point:  # some zero blocks hold -0.0 (not all bits zero)
        vals[(~mask).nonzero()[::2, 0]] = -0.0
    return vals.reshape(-1)[:numel].to(dtype).contiguous()


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
        x = block_sparse(numel, ex.block_elems, density, overlap, dtype, seed=i,
                         negzero=i % 5 == 4)
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
        dist.all_gather_object(digests, digest(y))
        out.append({"ok": ok, "identical": len(set(digests)) == 1,
                    "repeatable": torch.equal(y, again),
                    "mode": stats.mode if stats else None,
                    "density": stats.density if stats else None,
                    "traffic": stats.traffic_fraction if stats else None,
                    "case": f"{plan.get('algorithm')}:{plan['plan_id']} n={numel} {dtype_name} "
                            f"d={density} overlap={overlap} {settings}"})
    return out
