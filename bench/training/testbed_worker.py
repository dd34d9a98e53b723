"""One rank of bench/training/testbed.py, inside its host namespace."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    import torch
    import torch.distributed as dist

    from bench.training.run import rank_main

    ap = argparse.ArgumentParser()
    for name in ("--rank", "--world", "--rounds", "--iters", "--warmup"):
        ap.add_argument(name, type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rates", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--algorithms", default="", help="the schedule's algorithms (default all)")
    ap.add_argument("--message-overhead", default="0")
    args = ap.parse_args()
    addr, port = args.master.rsplit(":", 1)
    os.environ.update(MASTER_ADDR=addr, MASTER_PORT=port)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=args.rank, world_size=args.world, timeout=timedelta(seconds=600)
    )
    try:
        res = rank_main(
            args.model,
            args.rounds,
            args.iters,
            args.warmup,
            [float(r) for r in args.rates.split(",")],
            args.algorithms.split(",") if args.algorithms else None,
            None if args.message_overhead == "auto" else float(args.message_overhead),
        )
        if args.rank == 0:
            Path(args.out).write_text(json.dumps(res))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
