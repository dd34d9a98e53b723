"""One process of ``syncplan demo``'s job: fetch the job's plan through the executor, time
all-reduces through it and through gloo's own all_reduce, and check they agree.

Started by ``syncplan demo`` with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) plus SYNCPLAN_HOST, SYNCPLAN_JOB_ID, SYNCPLAN_SERVER and SYNCPLAN_JOB_TOKEN;
rank 0 prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    from syncplan.executor.launch import distributed, init_plan_comm

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--numel", type=int, default=1 << 22, help="float32 elements per buffer")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls of each")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    with distributed(backend="gloo", timeout_s=120):
        comm = init_plan_comm()
        rank = dist.get_rank()
        x = torch.randn(args.numel, generator=torch.Generator().manual_seed(rank))
        timings: dict[str, float] = {}
        results: dict[str, torch.Tensor] = {}
        for name, reduce in (("plan", comm.all_reduce), ("gloo", dist.all_reduce)):
            y = x.clone()
            reduce(y)  # warm-up; also the result compared below
            results[name] = y
            samples = []
            for _ in range(args.repeat):
                y = x.clone()
                dist.barrier()
                t0 = time.perf_counter()
                reduce(y)
                samples.append(time.perf_counter() - t0)
            timings[name] = sorted(samples)[len(samples) // 2]
        err = float((results["plan"] - results["gloo"]).abs().max())
        if rank == 0:
            plan = comm.executor.program.plan_id if comm.executor is not None else None
            sys.stdout.write(
                json.dumps(
                    {
                        "using_plan": comm.using_plan,
                        "reason": comm.reason,
                        "plan_id": plan,
                        "numel": args.numel,
                        "plan_s": timings["plan"],
                        "gloo_s": timings["gloo"],
                        "max_abs_err": err,
                    }
                )
                + "\n"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
