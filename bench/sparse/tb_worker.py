"""One rank of bench/sparse/run.py on the emulated testbed, run inside a host namespace:
joins the gloo group at ``--master`` and runs executor.sparse_bench's cases from ``--spec``;
rank 0 writes the results to ``--out``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.executor.sparse_bench import SparseCase, sparse_bench_worker  # noqa: E402

from syncplan.testbed.worker import init_gloo, rank_parser  # noqa: E402


def main() -> int:
    ap = rank_parser("bench/sparse/tb_worker.py", 900.0)
    ap.add_argument("--spec", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    spec = json.loads(args.spec.read_text())
    cases = [SparseCase(**{**c, "methods": tuple(c.get("methods", ()))}) for c in spec["cases"]]
    init_gloo(args)
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
