"""DDP training with a syncplan plan from a topology file, no service: run under torchrun.

    syncplan plan --topology examples/star-one-slow.json --size 4MiB -o plan.json
    SYNCPLAN_PLAN_FILE=plan.json SYNCPLAN_ENDPOINT='h{rank}/cpu0' \\
        torchrun --nproc-per-node 4 examples/torchrun_ddp.py

SYNCPLAN_ENDPOINT maps process r to the plan's endpoint h<r>/cpu0 (on a real cluster leave it
unset: each process is ``<hostname>/gpu<local rank>``, or set SYNCPLAN_HOST). Every gradient
bucket is averaged with the plan; when the plan does not fit the job (another rank count,
endpoints no process runs) the job logs one warning and uses torch's own all_reduce.
"""

from __future__ import annotations

import argparse
import logging

import torch
import torch.distributed as dist
from syncplan.executor import plan_allreduce_hook
from syncplan.executor.launch import distributed, init_plan_comm
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with distributed(timeout_s=120):
        rank = dist.get_rank()
        torch.manual_seed(0)  # the same initial weights on every rank
        model = torch.nn.Sequential(
            torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
        )
        ddp = DistributedDataParallel(model)
        comm = init_plan_comm()
        ddp.register_comm_hook(comm, plan_allreduce_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        data = torch.Generator().manual_seed(1 + rank)  # each rank its own batches
        for _ in range(args.steps):
            x = torch.randn(32, 256, generator=data)
            y = torch.randint(0, 10, (32,), generator=data)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        first = weights.clone()
        dist.broadcast(first, src=0)
        same = bool(torch.equal(first, weights))
        agree = torch.tensor([int(same)])
        dist.all_reduce(agree)
        if rank == 0:
            print(
                f"using plan: {comm.using_plan} ({comm.reason or 'ok'}); loss {loss.item():.4f}; "
                f"weights identical on all ranks: {int(agree) == dist.get_world_size()}"
            )


if __name__ == "__main__":
    main()
