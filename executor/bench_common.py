"""What the plan benchmarks share (``syncplan.executor.bench``, ``bench_rooted``): the case,
every rank's inputs, a bitwise digest and the interleaved timing of plan and torch."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BenchCase:
    """One buffer size: ``repeat`` timed calls of each after ``warmup`` untimed ones."""

    numel: int
    repeat: int = 10
    warmup: int = 2

    def __post_init__(self) -> None:
        if self.numel < 1:
            raise ValueError(f"numel must be >= 1, got {self.numel}")
        if self.repeat < 1 or self.warmup < 0:
            raise ValueError("repeat must be >= 1 and warmup >= 0")


def tensor_digest(t: Any) -> str:
    """A hash of the tensor's bits (equal digests: equal bit for bit)."""
    import torch

    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return hashlib.sha256(t.view(ints).numpy().tobytes()).hexdigest()


def time_pair(
    x: Any, plan_op: Callable[[Any], Any], native_op: Callable[[Any], Any], case: BenchCase
) -> dict[str, Any]:
    """Time the plan and the native collective on copies of ``x``, interleaved (who goes
    first alternates), ``case.warmup`` rounds untimed: medians, paired ratio, CPU seconds
    of all processes together (a load-independent cost measure) and the samples. A call
    lasts until its slowest rank is done."""
    import torch
    import torch.distributed as dist

    work = torch.empty_like(x)
    ops = [("plan", plan_op), ("native", native_op)]
    times: dict[str, list[float]] = {"plan": [], "native": []}
    cpu: dict[str, list[float]] = {"plan": [], "native": []}
    for i in range(case.warmup + case.repeat):
        for name, op in ops if i % 2 == 0 else ops[::-1]:
            work.copy_(x)
            dist.barrier()
            c0, t0 = time.process_time(), time.perf_counter()
            op(work)
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            if i >= case.warmup:
                times[name].append(dt)
                cpu[name].append(dc)
    cpu_t = torch.tensor(cpu["plan"] + cpu["native"], dtype=torch.float64)
    dist.all_reduce(cpu_t)
    both = torch.tensor(times["plan"] + times["native"], dtype=torch.float64)
    dist.all_reduce(both, op=dist.ReduceOp.MAX)
    r = case.repeat
    plan_t, native_t = both[:r].tolist(), both[r:].tolist()
    plan_s, native_s = statistics.median(plan_t), statistics.median(native_t)
    return {
        "plan_s": plan_s,
        "native_s": native_s,
        "ratio": plan_s / native_s,
        "paired_ratio": statistics.median(p / q for p, q in zip(plan_t, native_t, strict=True)),
        "repeat": r,
        "plan_cpu_s": statistics.median(cpu_t[:r].tolist()),
        "native_cpu_s": statistics.median(cpu_t[r:].tolist()),
        "samples": {
            "plan_s": plan_t,
            "native_s": native_t,
            "plan_cpu_s": cpu_t[:r].tolist(),
            "native_cpu_s": cpu_t[r:].tolist(),
        },
    }


def rank_inputs(numel: int, dtype: Any, seed: int, rank: int, integers: bool) -> Any:
    """Rank ``rank``'s input; any rank can make any rank's. Integer values in [-2, 2] keep
    sums over up to 64 ranks exact in every float dtype (bfloat16 too)."""
    import torch

    g = torch.Generator().manual_seed(seed * 7919 + rank)
    if integers:
        return torch.randint(-2, 3, (numel,), generator=g).to(dtype)
    return torch.randn(numel, generator=g).to(dtype)


def check_fields(
    case: Any, x: Any, flags: Any, identical: bool, nprocs: int, dtype_name: str
) -> dict[str, Any]:
    """The result fields every collective's check reports: sizes and, from ``flags`` (max
    |error|, any rank inexact, any rank unlike the native op; MAX-reduced), correctness."""
    return {
        "numel": case.numel,
        "bytes": case.numel * x.element_size(),
        "dtype": dtype_name,
        "nprocs": nprocs,
        "correct": flags[1].item() == 0 and identical,
        "matches_native": flags[2].item() == 0,
        "identical_on_all_ranks": identical,
        "max_abs_err": flags[0].item(),
    }
