"""One rank of the all-reduce benchmark, run inside a host namespace by ``runner``.

Every rank holds float32 buffers ``x_r = (i mod 251) + r`` (exact integers, so any summation
order gives the same result); after an all-reduce each element must equal
``n * (i mod 251) + n(n-1)/2`` exactly. For each size it times gloo's ``all_reduce`` and then
each plan document of that size through the executor (when the executor is importable).
A timing is the slowest rank's wall time for one collective, from a start instant common
to every rank (``time_collective``).
Rank 0 prints progress lines and writes the results JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json

PATTERN = 251
TensorOp = Callable[[Any], Any]
PlanFactory = Callable[[dict[str, Any]], TensorOp]


def find_executor() -> tuple[PlanFactory | None, str]:
    """A factory turning a plan document into an in-place all-reduce op, or None and why.

    Uses ``syncplan.executor.engine.PlanExecutor(plan).all_reduce`` (built once per plan, before the
    timed calls), else ``executor.run_plan(plan, tensor)``.
    """
    try:
        from syncplan.executor.engine import PlanExecutor
    except ImportError as exc:
        try:
            from syncplan.executor import run_plan  # type: ignore[attr-defined]
        except ImportError:
            return None, f"executor not importable ({exc})"
        return (lambda plan: lambda t: run_plan(plan, t)), "executor.run_plan"
    return (lambda plan: PlanExecutor(plan).all_reduce), "syncplan.executor.engine.PlanExecutor"


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


START_AHEAD_S = 0.02  # the common start: this long after rank 0 leaves the barrier


def time_collective(dist: Any, torch: Any, op: Callable[[Any], Any], buf: Any) -> float:
    """Seconds from a common start to the last rank's end of ``op(buf)``.

    Every rank of the testbed runs on one machine, so ``time.perf_counter`` is one clock:
    rank 0 sends a start instant ``START_AHEAD_S`` ahead and every rank sleeps until it. A
    barrier alone lets the ranks leave it up to 9 ms apart on 2 shared cores (a 4 KiB star
    then measured 1.8-12 ms, its wait for the last rank included; docs/testbed.md "Issue
    18, session 11"), and the first rank's clock would count that wait."""
    dist.barrier()
    at = torch.tensor([time.perf_counter() + START_AHEAD_S], dtype=torch.float64)
    dist.broadcast(at, src=0)
    start = float(at.item())
    time.sleep(max(start - time.perf_counter(), 0.0))
    op(buf)
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def all_true(dist: Any, torch: Any, flag: bool) -> bool:
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def _load_plans(paths: list[str]) -> list[dict[str, Any]]:
    plans = []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        doc.setdefault("label", doc.get("algorithm", Path(p).stem))
        plans.append(doc)
    return plans


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    rank, world = args.rank, args.world
    say = (lambda msg: print(msg, flush=True)) if rank == 0 else (lambda msg: None)
    init_gloo(args)
    try:
        plans = _load_plans(args.plans)
        factory, how = find_executor() if plans else (None, "no plans given")
        notes = []
        if plans and factory is None:
            notes.append(f"plans skipped: {how}")
            say(f"note: {len(plans)} plan(s) skipped: {how}")
        warm = torch.ones(1024)
        dist.all_reduce(warm)
        results: list[dict[str, Any]] = []
        skip = set(args.skip)
        meta = {
            "world_size": world,
            "dtype": "float32",
            "backend": "gloo",
            "torch": torch.__version__,
            "executor": how if plans else None,
            "notes": notes,
        }

        def checkpoint(running: dict[str, Any] | None) -> None:
            # rank 0's progress, so that the runner keeps what finished if a later run fails
            if rank == 0 and args.out:
                atomic_write_json(Path(args.out), {**meta, "results": results, "running": running})

        for size in args.sizes:
            count = size // 4
            base = torch.arange(count, dtype=torch.int32).remainder_(PATTERN).to(torch.float32)
            expected = base * world + world * (world - 1) / 2
            buf = torch.empty_like(base)
            todo: list[tuple[str, dict[str, Any] | None]] = [("gloo", None)]
            todo += [(p["label"], p) for p in plans if factory and p.get("size_bytes") == size]
            for label, plan in todo:
                if f"{label}@{size}" in skip:
                    continue
                checkpoint({"size_bytes": size, "algorithm": label})
                op: TensorOp = dist.all_reduce
                if plan is not None:
                    assert factory is not None
                    op = factory(plan)
                    owner = getattr(op, "__self__", None)
                    if hasattr(owner, "prepare"):  # build the schedule outside the timing
                        owner.prepare(count, torch.float32, "cpu")
                times, correct = [], True
                for rep in range(args.warmup + args.reps):
                    buf.copy_(base).add_(rank)
                    dt = time_collective(dist, torch, op, buf)
                    ok = all_true(dist, torch, bool(torch.equal(buf, expected)))
                    correct = correct and ok
                    if rep < args.warmup:
                        say(f"size {_mib(size)} {label} warm-up: {dt:.3f} s")
                        continue
                    times.append(dt)
                    say(
                        f"size {_mib(size)} {label} rep {rep - args.warmup + 1}/{args.reps}: "
                        f"{dt:.3f} s{'' if ok else ' WRONG RESULT'}"
                    )
                entry: dict[str, Any] = {
                    "size_bytes": size,
                    "algorithm": label,
                    "times_s": times,
                    "median_s": statistics.median(times),
                    "correct": correct,
                }
                if plan is not None:
                    entry.update(
                        {
                            k: plan.get(k)
                            for k in ("plan_id", "predicted_time_s", "lower_bound_time_s")
                        }
                    )
                    entry["plan_algorithm"] = plan.get("algorithm")
                results.append(entry)
                checkpoint(None)
            del base, expected, buf
        return {**meta, "results": results, "running": None}
    finally:
        dist.destroy_process_group()


def rank_parser(prog: str, timeout_s: float) -> argparse.ArgumentParser:
    """The options every testbed rank takes: --rank, --world, --master and --timeout (gloo's,
    default ``timeout_s``)."""
    ap = argparse.ArgumentParser(prog=prog)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="ADDR:PORT of rank 0")
    ap.add_argument("--timeout", type=float, default=timeout_s, help="gloo timeout, seconds")
    return ap


def init_gloo(args: argparse.Namespace) -> None:
    """Join the job's gloo process group (rank 0 listening at ``args.master``)."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}",
        rank=args.rank,
        world_size=args.world,
        timeout=timedelta(seconds=args.timeout),
    )


def main(argv: list[str] | None = None) -> int:
    ap = rank_parser("python -m syncplan.testbed.worker", 900.0)
    ap.add_argument("--sizes", type=int, nargs="+", required=True, help="bytes, multiples of 4")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--plans", nargs="*", default=[])
    ap.add_argument("--out", help="results JSON (rank 0), rewritten after every run")
    ap.add_argument(
        "--skip",
        nargs="*",
        default=[],
        metavar="LABEL@SIZE",
        help="runs not to repeat (done or failed in an earlier attempt)",
    )
    args = ap.parse_args(argv)
    result = run(args)
    if args.rank == 0 and args.out:
        atomic_write_json(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
