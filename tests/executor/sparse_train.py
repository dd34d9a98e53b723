"""Training runs the sparse tests start in spawned gloo processes (see executor.localrun)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.coarse import CoarseConfig, CoarseSparsifier
from syncplan.executor.comm import PlanComm
from syncplan.executor.ddp import SparseHookState, embedding_params, sparse_allreduce_hook
from syncplan.executor.engine import PlanExecutor
from syncplan.executor.sparse import SparseConfig


class _Rec(torch.nn.Module):
    """A tiny recommendation model: a large embedding table, a small dense head."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(4096, 32)
        self.head = torch.nn.Linear(32, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(ids).mean(dim=1))


def ddp_embedding_run(plan: dict[str, Any], steps: int = 4) -> dict[str, Any]:
    """Train the model with the sparse hook and with plain DDP from the same start; return
    the largest parameter difference and what the sparse path did."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    finals = []
    stats = None
    calls = 0
    for hooked in (True, False):
        torch.manual_seed(0)
        model = DDP(_Rec(), bucket_cap_mb=0.25)
        if hooked:
            state = SparseHookState(PlanComm(PlanExecutor(plan)), embedding_params(model))
            model.register_comm_hook(state, sparse_allreduce_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        g = torch.Generator().manual_seed(100 + dist.get_rank())
        for _ in range(steps):
            ids = torch.randint(0, 4096, (8, 4), generator=g)
            loss = (model(ids).squeeze(1) - 1.0).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        finals.append([p.detach().clone() for p in model.parameters()])
        if hooked:
            stats, calls = state.comm.sparse_stats, state.sparse_calls
    diff = max(float((a - b).abs().max()) for a, b in zip(*finals, strict=True))
    return {
        "max_diff": diff,
        "sparse_calls": calls,
        "mode": stats.mode if stats else None,
        "density": stats.density if stats else None,
    }


def coarse_convergence(plan: dict[str, Any], fraction: float, steps: int = 200) -> dict[str, float]:
    """Least squares on each rank's own data, SGD on the averaged gradient: once dense
    (torch's all_reduce), once coarse-sparse (top ``fraction`` of 16-element blocks, error
    feedback). Returns both final losses on all ranks' data and the starting loss."""
    n, rank = dist.get_world_size(), dist.get_rank()
    dim = 1024
    g = torch.Generator().manual_seed(7)
    w_true = torch.randn(dim, generator=g) * (torch.rand(dim, generator=g) < 0.3)
    xs = [torch.randn(64, dim, generator=g) for _ in range(n)]
    ys = [x @ w_true + 0.01 * torch.randn(64, generator=g) for x in xs]
    x_all, y_all = torch.cat(xs), torch.cat(ys)

    def full_loss(w: torch.Tensor) -> float:
        return float((x_all @ w - y_all).pow(2).mean())

    comm = PlanComm(PlanExecutor(plan))
    comm.sparse_config = SparseConfig(block_elems=16)
    out = {"start": full_loss(torch.zeros(dim))}
    for name in ("dense", "coarse"):
        w = torch.zeros(dim)
        coarse = CoarseSparsifier(CoarseConfig(fraction))
        for _ in range(steps):
            grad = 2 * xs[rank].T @ (xs[rank] @ w - ys[rank]) / len(ys[rank])
            if name == "dense":
                dist.all_reduce(grad)
                grad /= n
            else:
                coarse.all_reduce(grad, comm, "w", average=True)
            w -= 0.05 * grad
        out[name] = full_loss(w)
    out["mode"] = comm.sparse_stats.mode if comm.sparse_stats else ""
    return out
