"""One rank of bench/sparse/run.py on the emulated testbed, run inside a host namespace:
joins the gloo group at ``--master`` and runs executor.sparse_bench's cases from ``--spec``;
rank 0 writes the results to ``--out``."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.executor.sparse_bench import SparseCase, sparse_bench_worker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    spec = json.loads(args.spec.read_text())
    cases = [SparseCase(**{**c, "methods": tuple(c.get("methods", ()))}) for c in spec["cases"]]
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=args.timeout),
    )
    try:
        results = []
        for i, case in enumerate(cases):  # one at a time, so rank 0 can report progress
            (res,) = sparse_bench_worker(spec["plans"], [case], "float32", None, i)
            results.append(res)
            if args.rank == 0:
                print(
                    json.dumps(
                        {
                            k: res.get(k)
                            for k in (
                                "density",
                                "overlap",
                                "methods",
                                "sparse_s",
                                "plan_s",
                                "gloo_s",
                                "torch_sparse_s",
                                "correct",
                                "sparse_modes",
                            )
                        }
                    ),
                    flush=True,
                )
                args.out.write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
