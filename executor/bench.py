"""Plan versus torch's own collective, in N local gloo processes: agreement and per-call time.

The collective is the plan document's: an all-reduce is timed against ``dist.all_reduce``; a
reduce-scatter against ``dist.reduce_scatter_single`` and an all-gather against
``dist.all_gather_single`` (gloo runs both natively in torch 2.13, which deprecates their older
names ``reduce_scatter_tensor`` / ``all_gather_into_tensor``; those are used on a torch without the
new ones) when the plan's shards are the equal, rank-ordered split torch's collectives take. With
other shards ("any", rate-sized) torch has no matching collective, so a reduce-scatter is timed
against ``dist.all_reduce`` (a superset: every rank gets every sum) and an all-gather against
``all_gather_single`` on shards padded to the largest one. ``native_op`` in each result names what
ran. A broadcast is timed against ``dist.broadcast`` and a reduce against ``dist.reduce``
(``syncplan.executor.bench_rooted``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from syncplan.executor.bench_common import (
    BenchCase,
    check_fields,
    rank_inputs,
    tensor_digest,
    time_pair,
)

__all__ = ["DTYPES", "BenchCase", "bench_worker", "equal_shards", "run_bench", "shard_elements"]

DTYPES = ("float32", "float16", "bfloat16", "float64")


def bench_worker(
    plan: dict[str, Any],
    cases: Sequence[BenchCase],
    dtype_name: str,
    seed: int,
    progress: bool,
    segment_bytes: int | None = None,
) -> list[dict[str, Any]]:
    """Runs in every process (rank i plays plan rank i); returns one result per case."""
    import torch
    import torch.distributed as dist
    from syncplan.executor.engine import ExecutorConfig, PlanExecutor

    dtype = getattr(torch, dtype_name)
    rank, n = dist.get_rank(), dist.get_world_size()
    ex = PlanExecutor(
        plan,
        config=ExecutorConfig()
        if segment_bytes is None
        else ExecutorConfig(segment_bytes=segment_bytes),
    )
    if ex.program.root is not None:  # broadcast / reduce
        from syncplan.executor.bench_rooted import rooted_case

        return [rooted_case(ex, case, dtype_name, seed, progress) for case in cases]
    if ex.program.collective != "allreduce":
        return [_sharded_case(ex, case, dtype_name, seed, progress) for case in cases]
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
        dist.all_gather_object(digests, tensor_digest(y))
        stats = torch.tensor([err.max().item(), 0.0 if within else 1.0], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        del y, ref, absum, err

        res = {
            "collective": "allreduce",
            "native_op": "all_reduce",
            "numel": case.numel,
            "bytes": case.numel * x.element_size(),
            "dtype": dtype_name,
            "nprocs": n,
            "correct": stats[1].item() == 0 and len(set(digests)) == 1,
            "identical_on_all_ranks": len(set(digests)) == 1,
            "max_abs_err": stats[0].item(),
            **time_pair(x, ex.all_reduce, dist.all_reduce, case),
        }
        plan_s, native_s = res["plan_s"], res["native_s"]
        out.append(res)
        if progress and rank == 0:
            print(
                f"  {res['bytes']:>12,d} B  plan {plan_s * 1e3:9.3f} ms  native "
                f"{native_s * 1e3:9.3f} ms  ratio {res['ratio']:.3f}  cpu ratio "
                f"{res['plan_cpu_s'] / max(res['native_cpu_s'], 1e-9):.3f}  "
                f"correct={res['correct']}",
                file=sys.stderr,
                flush=True,
            )
    return out


def shard_elements(
    units: int, shards: Sequence[tuple[int, int]], numel: int
) -> list[tuple[int, int]]:
    """Element range [start, stop) of every rank's shard for a buffer of ``numel`` elements."""
    from syncplan.executor.schedule import element_bounds

    bounds = element_bounds(units, numel)
    return [(bounds[a], bounds[b]) for a, b in shards]


def equal_shards(elems: Sequence[tuple[int, int]], numel: int) -> bool:
    """Whether the shards are torch's split: rank i owns elements [i m, (i + 1) m), m = numel/n."""
    n = len(elems)
    return numel % n == 0 and all(
        e == (i * numel // n, (i + 1) * numel // n) for i, e in enumerate(elems)
    )


def _sharded_case(
    ex: Any, case: BenchCase, dtype_name: str, seed: int, progress: bool
) -> dict[str, Any]:
    """One case of a reduce-scatter or all-gather plan: check each rank's result against the
    exact answer and torch's collective (bitwise), then time both."""
    import torch
    import torch.distributed as dist

    dtype = getattr(torch, dtype_name)
    rank, n = dist.get_rank(), dist.get_world_size()
    prog, me = ex.program, ex.plan_rank
    coll = prog.collective
    elems = shard_elements(prog.units, prog.shards, case.numel)
    equal = equal_shards(elems, case.numel)
    lo, hi = elems[me]
    x = rank_inputs(case.numel, dtype, seed, me, integers=coll == "reducescatter")
    if coll == "allgather":
        # Only the owned shard is valid at the start: poison the rest.
        x_in = torch.full_like(x, float("nan"))
        x_in[lo:hi] = x[lo:hi]
        x = x_in
    out_native: Any
    # torch 2.13 names them *_single and deprecates the *_tensor names (same collectives).
    rs_name = (
        "reduce_scatter_single"
        if hasattr(dist, "reduce_scatter_single")
        else "reduce_scatter_tensor"
    )
    ag_name = (
        "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"
    )
    rs_fn, ag_fn = getattr(dist, rs_name), getattr(dist, ag_name)
    if coll == "reducescatter":
        if equal:
            native_op = rs_name
            out_native = torch.empty(case.numel // n, dtype=dtype)

            def native(buf: Any) -> None:
                rs_fn(out_native, buf)
        else:
            native_op = "all_reduce"

            def native(buf: Any) -> None:
                dist.all_reduce(buf)
    else:
        width = max(b - a for a, b in elems)
        native_op = ag_name + ("" if equal else " (shards padded)")
        shard_in = torch.zeros(width, dtype=dtype)
        shard_in[: hi - lo] = x[lo:hi]
        out_native = torch.empty(width * n, dtype=dtype)

        def native(buf: Any) -> None:
            ag_fn(buf if equal else out_native, shard_in)

    # The exact answer, made locally: the sum of every rank's input on my shard (exact on
    # integer values), or every owner's values everywhere.
    if coll == "reducescatter":
        want = sum(rank_inputs(case.numel, dtype, seed, r, True)[lo:hi].double() for r in range(n))
        want = torch.as_tensor(want).to(dtype)
    else:
        want = torch.empty(case.numel, dtype=dtype)
        for r, (a, b) in enumerate(elems):
            want[a:b] = rank_inputs(case.numel, dtype, seed, r, False)[a:b]
    y = ex.run(x.clone())
    got = y[lo:hi] if coll == "reducescatter" else y
    exact = tensor_digest(got) == tensor_digest(want) if got.numel() else True
    err = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    # torch's result on the same inputs, bitwise where it is torch's own split (equal shards).
    buf = x.clone()
    native(buf)
    if coll == "reducescatter":
        theirs = out_native if equal else buf[lo:hi]
    else:
        theirs = (
            buf
            if equal
            else torch.cat(
                [out_native[r * width : r * width + b - a] for r, (a, b) in enumerate(elems)]
            )
        )
    same = tensor_digest(got) == tensor_digest(theirs) if got.numel() else True
    digests: list[Any] = [None] * n
    dist.all_gather_object(digests, tensor_digest(y) if coll == "allgather" else "")
    flags = torch.tensor([err, 0.0 if exact else 1.0, 0.0 if same else 1.0], dtype=torch.float64)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    del y, buf

    identical = coll != "allgather" or len(set(digests)) == 1
    res = {
        "collective": coll,
        "native_op": native_op,
        "equal_shards": equal,
        **check_fields(case, x, flags, identical, n, dtype_name),
        **time_pair(x, ex.run, native, case),
    }
    plan_s, native_s = res["plan_s"], res["native_s"]
    if progress and rank == 0:
        print(
            f"  {coll} {res['bytes']:>12,d} B  plan {plan_s * 1e3:9.3f} ms  {native_op} "
            f"{native_s * 1e3:9.3f} ms  ratio {res['ratio']:.3f}  correct={res['correct']}  "
            f"matches_native={res['matches_native']}",
            file=sys.stderr,
            flush=True,
        )
    return res


def run_bench(
    plan: dict[str, Any],
    nprocs: int,
    cases: Sequence[BenchCase],
    *,
    dtype: str = "float32",
    seed: int = 0,
    timeout_s: float = 600.0,
    progress: bool = True,
    segment_bytes: int | None = None,
) -> list[dict[str, Any]]:
    """Spawn ``nprocs`` gloo processes on loopback and benchmark every case."""
    from syncplan.executor.localrun import LocalRunConfig, run_local

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    results = run_local(
        bench_worker,
        (plan, list(cases), dtype, seed, progress, segment_bytes),
        LocalRunConfig(nprocs, timeout_s=timeout_s, pg_timeout_s=timeout_s),
    )
    return results[0]
