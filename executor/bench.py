"""Plan versus torch's own all-reduce, in N local gloo processes: agreement and per-call time."""

from __future__ import annotations

import hashlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

DTYPES = ("float32", "float16", "bfloat16", "float64")


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


def _digest(t: Any) -> str:
    import torch

    ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return hashlib.sha256(t.view(ints).numpy().tobytes()).hexdigest()


def bench_worker(plan: dict[str, Any], cases: Sequence[BenchCase], dtype_name: str,
                 seed: int, progress: bool, segment_bytes: int | None = None
                 ) -> list[dict[str, Any]]:
    """Runs in every process (rank i plays plan rank i); returns one result per case."""
    import torch
    import torch.distributed as dist

    from executor.engine import ExecutorConfig, PlanExecutor

    dtype = getattr(torch, dtype_name)
    rank, n = dist.get_rank(), dist.get_world_size()
    ex = PlanExecutor(plan, config=ExecutorConfig() if segment_bytes is None else
                      ExecutorConfig(segment_bytes=segment_bytes))
    out = []
    for case in cases:
        g = torch.Generator().manual_seed(seed * 7919 + rank)
        x = torch.randn(case.numel, generator=g).to(dtype)
        y = ex.all_reduce(x.clone())
        ref = x.clone()
        dist.all_reduce(ref)
        absum = x.abs().double()
        dist.all_reduce(absum)
        err = (y.double() - ref.double()).abs()
        # Summation order differs: each result is within (n - 1) eps sum|x_i| of the truth.
        within = bool((err <= n * torch.finfo(dtype).eps * absum).all())
        digests: list[Any] = [None] * n
        dist.all_gather_object(digests, _digest(y))
        stats = torch.tensor([err.max().item(), 0.0 if within else 1.0], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        del y, ref, absum, err

        work = torch.empty_like(x)
        ops: list[tuple[str, Callable[[Any], Any]]] = [("plan", ex.all_reduce),
                                                       ("native", dist.all_reduce)]
        times: dict[str, list[float]] = {"plan": [], "native": []}
        cpu: dict[str, list[float]] = {"plan": [], "native": []}
        for i in range(case.warmup + case.repeat):
            for name, op in ops if i % 2 == 0 else ops[::-1]:  # alternate who goes first
                work.copy_(x)
                dist.barrier()
                c0, t0 = time.process_time(), time.perf_counter()
                op(work)
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                if i >= case.warmup:
                    times[name].append(dt)
                    cpu[name].append(dc)
        # CPU seconds per call, all processes together: a load-independent cost measure.
        cpu_t = torch.tensor(cpu["plan"] + cpu["native"], dtype=torch.float64)
        dist.all_reduce(cpu_t)
        # A call lasts until its slowest rank is done.
        both = torch.tensor(times["plan"] + times["native"], dtype=torch.float64)
        dist.all_reduce(both, op=dist.ReduceOp.MAX)
        plan_t, native_t = both[:case.repeat].tolist(), both[case.repeat:].tolist()
        plan_s, native_s = statistics.median(plan_t), statistics.median(native_t)
        paired = statistics.median(p / q for p, q in zip(plan_t, native_t, strict=True))
        res = {"numel": case.numel, "bytes": case.numel * x.element_size(), "dtype": dtype_name,
               "nprocs": n, "correct": stats[1].item() == 0 and len(set(digests)) == 1,
               "identical_on_all_ranks": len(set(digests)) == 1,
               "max_abs_err": stats[0].item(), "plan_s": plan_s, "native_s": native_s,
               "ratio": plan_s / native_s, "paired_ratio": paired, "repeat": case.repeat,
               "plan_cpu_s": statistics.median(cpu_t[:case.repeat].tolist()),
               "native_cpu_s": statistics.median(cpu_t[case.repeat:].tolist()),
               "samples": {"plan_s": plan_t, "native_s": native_t,
                           "plan_cpu_s": cpu_t[:case.repeat].tolist(),
                           "native_cpu_s": cpu_t[case.repeat:].tolist()}}
        out.append(res)
        if progress and rank == 0:
            print(f"  {res['bytes']:>12,d} B  plan {plan_s * 1e3:9.3f} ms  native "
                  f"{native_s * 1e3:9.3f} ms  ratio {res['ratio']:.3f}  cpu ratio "
                  f"{res['plan_cpu_s'] / max(res['native_cpu_s'], 1e-9):.3f}  "
                  f"correct={res['correct']}", file=sys.stderr, flush=True)
    return out


def run_bench(plan: dict[str, Any], nprocs: int, cases: Sequence[BenchCase], *,
              dtype: str = "float32", seed: int = 0, timeout_s: float = 600.0,
              progress: bool = True, segment_bytes: int | None = None
              ) -> list[dict[str, Any]]:
    """Spawn ``nprocs`` gloo processes on loopback and benchmark every case."""
    from executor.localrun import LocalRunConfig, run_local

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    results = run_local(bench_worker, (plan, list(cases), dtype, seed, progress, segment_bytes),
                        LocalRunConfig(nprocs, timeout_s=timeout_s, pg_timeout_s=timeout_s))
    return results[0]
