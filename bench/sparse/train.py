"""An embedding-heavy model's training iteration with DDP: default DDP (gloo all_reduce),
the plan hook (dense) and the sparse hook (embedding buckets block-sparse), same data, same
start; time per iteration and the final parameters' largest difference from default DDP.
Loopback gloo processes. Writes bench/results/sparse-train.json.

    python bench/sparse/train.py [--nprocs 4] [--rows 262144] [--dim 64] [--iters 8]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.executor.localrun import LocalRunConfig, run_local  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def worker(
    plan: dict[str, Any], rows: int, dim: int, batch: int, iters: int, warmup: int
) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from syncplan.executor.comm import PlanComm
    from syncplan.executor.ddp import (
        SparseHookState,
        embedding_params,
        plan_allreduce_hook,
        sparse_allreduce_hook,
    )
    from syncplan.executor.engine import PlanExecutor
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Rec(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(rows, dim)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
            )

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.mlp(self.emb(ids).sum(dim=1))

    out: dict[str, Any] = {}
    finals: dict[str, list[torch.Tensor]] = {}
    for mode in ("ddp", "plan", "sparse"):
        torch.manual_seed(0)
        model = DDP(Rec(), bucket_cap_mb=100)
        comm = PlanComm(PlanExecutor(plan))
        state = None
        if mode == "plan":
            model.register_comm_hook(comm, plan_allreduce_hook)
        elif mode == "sparse":
            state = SparseHookState(comm, embedding_params(model))
            model.register_comm_hook(state, sparse_allreduce_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(1 + dist.get_rank())
        times = []
        for i in range(warmup + iters):
            ids = torch.randint(0, rows, (batch, 8), generator=g)
            y = torch.randn(batch, generator=g)
            dist.barrier()
            t0 = time.perf_counter()
            loss = (model(ids).squeeze(1) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(dt, op=dist.ReduceOp.MAX)
            if i >= warmup:
                times.append(float(dt))
        finals[mode] = [p.detach().clone() for p in model.parameters()]
        out[f"{mode}_iter_s"] = statistics.median(times)
        out[f"{mode}_samples"] = times
        if state is not None and comm.sparse_stats is not None:
            out["sparse_density"] = comm.sparse_stats.density
            out["sparse_mode"] = comm.sparse_stats.mode
    for mode in ("plan", "sparse"):
        out[f"{mode}_max_param_diff"] = max(
            float((a - b).abs().max()) for a, b in zip(finals[mode], finals["ddp"], strict=True)
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--rows", type=int, default=262144)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS / "sparse-train.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "bench" / "sparse"))
    from run import loopback_topology  # type: ignore[import-not-found]
    from syncplan.planner.plan import make_plan

    topo, ranks = loopback_topology(args.nprocs)
    plan = make_plan(topo, ranks, args.rows * args.dim * 4)
    load = list(os.getloadavg())
    (res, *_) = run_local(
        worker,
        (plan, args.rows, args.dim, args.batch, args.iters, args.warmup),
        LocalRunConfig(args.nprocs, timeout_s=1200, pg_timeout_s=600),
    )
    doc = {
        "created": datetime.now(UTC).isoformat(),
        "nprocs": args.nprocs,
        "embedding": [args.rows, args.dim],
        "batch": args.batch,
        "ids_per_sample": 8,
        "plan_algorithm": plan["algorithm"],
        "load_before": load,
        "load_after": list(os.getloadavg()),
        **res,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    print(json.dumps({k: v for k, v in doc.items() if not k.endswith("samples")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
