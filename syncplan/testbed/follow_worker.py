"""One rank of ``syncplan testbed follow``, run inside a host namespace.

Fetches the job's plan (token in ``SYNCPLAN_JOB_TOKEN``) through the executor's launch
path with replanning on (``refresh_every=1``), then repeats until rank 0 sees the stop
file: one all-reduce through the plan, one through gloo's own ``all_reduce`` on the same
data, each timed as the slowest rank's wall time after a barrier, each checked exactly.
Rank 0 rewrites the records (wall time, both timings, the running plan id) to ``--out``
after every iteration.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.testbed.worker import PATTERN, all_true, init_gloo, rank_parser, time_collective


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from syncplan.executor.launch import LaunchConfig, init_plan_comm

    rank, world = args.rank, args.world
    init_gloo(args)
    try:
        cfg = LaunchConfig(
            job_id=args.job,
            server=args.server,
            token=os.environ.get("SYNCPLAN_JOB_TOKEN"),
            endpoint=f"{args.host}/cpu0",
            fetch_timeout_s=30.0,
            retries=3,
            refresh_every=1,
            refresh_interval_s=args.refresh_interval,
        )
        count = args.size // 4
        base = torch.arange(count, dtype=torch.int32).remainder_(PATTERN).to(torch.float32)
        expected = base * world + world * (world - 1) / 2
        buf = torch.empty_like(base)
        records: list[dict[str, Any]] = []
        with init_plan_comm(cfg) as comm:
            while True:
                stop = torch.tensor([int(rank == 0 and Path(args.stop_file).exists())])
                dist.broadcast(stop, 0)
                if stop.item():
                    break
                row: dict[str, Any] = {"wall": time.time()}
                for label, op in (("plan", comm.all_reduce), ("gloo", dist.all_reduce)):
                    buf.copy_(base).add_(rank)
                    row[f"{label}_s"] = time_collective(dist, torch, op, buf)
                    row[f"{label}_correct"] = all_true(
                        dist, torch, bool(torch.equal(buf, expected))
                    )
                row["plan_id"] = comm.executor.program.plan_id if comm.executor else None
                records.append(row)
                if rank == 0:
                    print(
                        f"iteration {len(records)}: plan {row['plan_s']:.3f} s "
                        f"({row['plan_id']}), gloo {row['gloo_s']:.3f} s",
                        flush=True,
                    )
                    atomic_write_json(Path(args.out), {"records": records})
        return {"records": records}
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = rank_parser("python -m syncplan.testbed.follow_worker", 600.0)
    ap.add_argument("--server", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--host", required=True, help="this rank's host name in the topology")
    ap.add_argument("--size", type=int, required=True, help="bytes, a multiple of 4")
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--out", required=True, help="records JSON (rank 0)")
    ap.add_argument("--refresh-interval", type=float, default=1.0)
    args = ap.parse_args(argv)
    result = run(args)
    if args.rank == 0:
        atomic_write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
