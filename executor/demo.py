"""A tiny DDP training job that syncs gradients with the job's plan; run it under torchrun:

    SYNCPLAN_JOB_ID=job1 SYNCPLAN_SERVER=http://planner:8080 SYNCPLAN_JOB_TOKEN=... \\
        torchrun --nproc-per-node 4 -m syncplan.executor.demo --steps 20

Each rank prints one JSON line: whether the plan ran (or why not) and a parameter checksum.
A process's endpoint is ``{host}/gpu{i}`` (``{host}/cpu{LOCAL_RANK}`` without CUDA), host from
SYNCPLAN_HOST or the hostname: the job's ranks must name those endpoints, or the job falls back
to torch's all-reduce. ``syncplan demo`` shows a plan run on one machine, agents included.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import torch
import torch.distributed as dist
from syncplan.executor.ddp import plan_allreduce_hook
from syncplan.executor.launch import distributed, init_plan_comm
from torch.nn.parallel import DistributedDataParallel as DDP


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="DDP demo job using the syncplan executor")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=120.0, help="process-group timeout (s)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    with distributed(timeout_s=args.timeout):
        device = (
            torch.device("cuda", torch.cuda.current_device())
            if dist.get_backend() == "nccl"
            else torch.device("cpu")
        )
        comm = init_plan_comm(device=device)
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
        ).to(device)
        ddp = DDP(model, bucket_cap_mb=0.01)
        ddp.register_comm_hook(comm, plan_allreduce_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(1 + dist.get_rank())
        for _ in range(args.steps):
            x, y = torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x.to(device)), y.to(device)).backward()
            opt.step()
        checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
        line = json.dumps(
            {
                "rank": dist.get_rank(),
                "using_plan": comm.using_plan,
                "reason": comm.reason,
                "checksum": checksum,
            }
        )
        sys.stdout.write(line + "\n")  # one write: lines of the ranks do not interleave
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
