"""The measured side of ``syncplan sweep --run N`` (docs/sweep.md): every plan of a sweep and
torch's own collective timed in one set of N local gloo processes, through
``syncplan.executor.bench.bench_worker``."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from syncplan.executor.bench import BenchCase, bench_worker
from syncplan.planner.sizes import format_size

MAX_RUN_BYTES = 256 << 20  # largest buffer a local run allocates (per process, several copies)
ELEMENT_BYTES = 4  # the sweep measures float32 buffers


def run_numel(size_bytes: int) -> int:
    """float32 elements of a measured buffer of about ``size_bytes`` (at least one)."""
    return max(1, size_bytes // ELEMENT_BYTES)


def sweep_worker(
    plans: Sequence[tuple[int, dict[str, Any]]], repeat: int, warmup: int, progress: bool
) -> list[dict[str, Any]]:
    """Runs in every process: ``bench_worker`` on each (size, plan), in order; rank 0
    prints one line per size on stderr."""
    import torch.distributed as dist

    out: list[dict[str, Any]] = []
    sizes = list(dict.fromkeys(size for size, _ in plans))
    t0 = time.perf_counter()
    for k, (size, plan) in enumerate(plans):
        case = BenchCase(run_numel(size), repeat=repeat, warmup=warmup)
        (res,) = bench_worker(plan, [case], "float32", 0, False)
        del res["samples"]
        out.append(res)
        last = k + 1 == len(plans) or plans[k + 1][0] != size
        if progress and last and dist.get_rank() == 0:
            i, secs = sizes.index(size) + 1, time.perf_counter() - t0
            print(
                f"measured {i}/{len(sizes)}: {format_size(size)} ({secs:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    return out


def run_sweep(
    plans: Sequence[tuple[int, dict[str, Any]]],
    nprocs: int,
    *,
    repeat: int = 5,
    warmup: int = 1,
    timeout_s: float = 600.0,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Time every (size in bytes, plan document) and torch's collective beside it in
    ``nprocs`` local gloo processes started once; one ``bench_worker`` result per plan
    (``plan_s`` and ``native_s``: medians per call of the slowest rank)."""
    from syncplan.executor.localrun import LocalRunConfig, run_local

    results = run_local(
        sweep_worker,
        (list(plans), repeat, warmup, progress),
        LocalRunConfig(nprocs, timeout_s=timeout_s, pg_timeout_s=timeout_s),
    )
    return list(results[0])
