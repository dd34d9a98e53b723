"""``syncplan exec-bench``: run a plan and torch's own collective in N local gloo processes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DTYPES = ("float32", "float16", "bfloat16", "float64")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "exec-bench",
        help="run a plan in N local gloo processes and compare with torch",
        description="Spawn N local gloo processes (rank i plays the plan's rank i), run the "
        "plan and torch's own collective on the same random inputs, check they "
        "agree, and print one JSON object as the last line: collective, "
        "native_op, correct, max_abs_err, plan_s and native_s (medians per call), "
        "ratio. The collective is the plan's: allreduce against all_reduce; "
        "reducescatter against reduce_scatter_single and allgather against "
        "all_gather_single with equal shards (with other shards: all_reduce, and "
        "all_gather_single on padded shards); broadcast against broadcast and "
        "reduce against reduce, from the plan's root.",
    )
    p.add_argument("--plan", required=True, type=Path, help="plan document (JSON)")
    p.add_argument("--nprocs", required=True, type=int, help="processes; the plan's rank count")
    p.add_argument("--numel", required=True, type=int, help="elements per buffer")
    p.add_argument(
        "--dtype",
        default="float32",
        choices=(*DTYPES, "int32", "int64"),
        help="element type (integers only with --density)",
    )
    p.add_argument("--repeat", type=int, default=10, help="timed calls of each (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls first (default 2)")
    p.add_argument(
        "--density",
        type=float,
        default=None,
        help="run the block-sparse path on data with this fraction of non-zero "
        "blocks (0..1) and compare it with the dense plan, gloo's all_reduce "
        "and torch's sparse all_reduce",
    )
    p.add_argument(
        "--overlap",
        action="store_true",
        help="with --density: the same blocks are non-zero on every rank",
    )
    p.add_argument(
        "--block-elems",
        type=int,
        default=None,
        help="with --density: elements per block (default: the plan's, else 256)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds for the whole run, process-group timeout too (default 600)",
    )
    p.set_defaults(func=exec_bench)


def exec_bench(args: argparse.Namespace) -> int:
    from syncplan.core.document import PlanDocument
    from syncplan.core.errors import CLIError
    from syncplan.executor.bench import BenchCase, run_bench

    try:
        doc = json.loads(args.plan.read_text())
    except OSError as exc:
        raise CLIError(f"cannot read plan {args.plan}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CLIError(f"plan {args.plan} is not valid JSON: {exc}") from None
    program = PlanDocument.from_plan(doc)  # PlanError names the malformed field (shards too)
    program.check()  # a correct instance of the plan's collective, else PlanError
    if args.nprocs != program.nranks:
        raise CLIError(f"--nprocs {args.nprocs} does not match the plan's {program.nranks} ranks")
    if not 1 <= args.nprocs <= 64:
        raise CLIError(f"--nprocs must be in 1..64, got {args.nprocs}")
    if args.numel < 1 or args.repeat < 1 or args.warmup < 0 or not args.timeout > 0:
        raise CLIError("--numel and --repeat must be >= 1, --warmup >= 0, --timeout > 0")
    if args.density is not None:
        if program.collective != "allreduce":
            raise CLIError(
                f"--density runs all-reduce plans only; this plan is a {program.collective}"
            )
        return _sparse_bench(args, doc, program.plan_id)
    if args.dtype not in DTYPES:
        raise CLIError(
            f"--dtype {args.dtype} needs --density (the dense plan takes {', '.join(DTYPES)})"
        )
    try:
        (res,) = run_bench(
            doc,
            args.nprocs,
            [BenchCase(args.numel, args.repeat, args.warmup)],
            dtype=args.dtype,
            timeout_s=args.timeout,
        )
    except RuntimeError as exc:
        raise CLIError(str(exc)) from None
    res["plan_id"] = program.plan_id
    del res["samples"]
    print(json.dumps(res))
    return 0 if res["correct"] else 1


def _sparse_bench(args: argparse.Namespace, doc: dict[str, Any], plan_id: str) -> int:
    from syncplan.core.errors import CLIError
    from syncplan.executor.sparse_bench import DTYPES as SPARSE_DTYPES
    from syncplan.executor.sparse_bench import SparseCase, run_sparse_bench

    if not 0 <= args.density <= 1:
        raise CLIError(f"--density must be in [0, 1], got {args.density}")
    if args.dtype not in SPARSE_DTYPES:
        raise CLIError(
            f"--dtype {args.dtype} is not offered with --density; choose one of "
            f"{', '.join(SPARSE_DTYPES)}"
        )
    if args.block_elems is not None and not 1 <= args.block_elems <= 1 << 20:
        raise CLIError(f"--block-elems must be in 1..{1 << 20}, got {args.block_elems}")
    case = SparseCase(args.numel, args.density, args.overlap, args.repeat, args.warmup)
    try:
        (res,) = run_sparse_bench(
            doc,
            args.nprocs,
            [case],
            dtype=args.dtype,
            block=args.block_elems,
            timeout_s=args.timeout,
        )
    except RuntimeError as exc:
        raise CLIError(str(exc)) from None
    res["plan_id"] = plan_id
    res["native_s"] = res["gloo_s"]
    del res["samples"]
    print(json.dumps(res))
    return 0 if res["correct"] else 1
