"""Block-sparse all-reduce against the dense plan, torch's dense all_reduce and torch's sparse
(all-gather) all_reduce, in N gloo processes: agreement and per-call time."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

METHODS = ("sparse", "plan", "gloo", "torch_sparse")
DTYPES = ("float32", "float64", "int32", "int64")


@dataclass(frozen=True)
class SparseCase:
    """One buffer: ``numel`` elements whose blocks are non-zero with probability
    ``density`` (the same blocks on every rank with ``overlap``)."""

    numel: int
    density: float
    overlap: bool = False
    repeat: int = 5
    warmup: int = 1
    plan: int = 0  # index into the worker's plans (its sparse object sets the fallback)
    methods: tuple[str, ...] = ()  # () = the worker's methods

    def __post_init__(self) -> None:
        if self.numel < 1:
            raise ValueError(f"numel must be >= 1, got {self.numel}")
        if not 0 <= self.density <= 1:
            raise ValueError(f"density must be in [0, 1], got {self.density}")
        if self.repeat < 1 or self.warmup < 0:
            raise ValueError("repeat must be >= 1 and warmup >= 0")


def block_sparse(
    numel: int,
    block: int,
    density: float,
    overlap: bool,
    dtype: Any,
    seed: int,
    rank: int,
    negzero: bool = False,
    ints: bool = False,
) -> Any:
    """Random data whose blocks are non-zero with probability ``density``, zero blocks all
    +0.0 (``negzero``: every other zero block -0.0); with ``overlap`` every rank has the
    same non-zero blocks (different values). ``ints``: integer values in any dtype (sums
    of a few ranks are then exact in any order)."""
    import torch

    if not 0 <= density <= 1:
        raise ValueError(f"density must be in [0, 1], got {density}")
    nblocks = -(-numel // block)
    gm = torch.Generator().manual_seed(seed * 1000 + (0 if overlap else rank + 1))
    mask = torch.rand(nblocks, generator=gm) < density
    g = torch.Generator().manual_seed(seed * 1000 + 500 + rank)
    if dtype.is_floating_point and not ints:
        vals = torch.randn(nblocks * block, generator=g)
    else:
        vals = torch.randint(-1000, 1000, (nblocks * block,), generator=g).double()
    vals = torch.where(mask[:, None], vals.view(nblocks, block), 0.0)
    if negzero and dtype.is_floating_point:
        vals[(~mask).nonzero()[::2, 0]] = -0.0
    return vals.reshape(-1)[:numel].to(dtype).contiguous()


def torch_sparse_all_reduce(t: Any, block: int) -> Any:
    """What PyTorch offers for sparse data: the buffer as a COO tensor of non-zero blocks,
    summed by gloo's sparse all_reduce (an all-gather of indices and values), made dense."""
    import torch.distributed as dist

    nb = t.numel() // block
    head = t[: nb * block].view(nb, block)
    coo = head.to_sparse(sparse_dim=1)
    dist.all_reduce(coo)
    head.copy_(coo.to_dense())
    if nb * block < t.numel():
        dist.all_reduce(t[nb * block :])
    return t


def sparse_bench_worker(
    plans: Sequence[dict[str, Any]],
    cases: Sequence[SparseCase],
    dtype_name: str,
    block: int | None,
    seed: int,
    methods: Sequence[str] = METHODS,
) -> list[dict[str, Any]]:
    """Runs in every process (rank i plays plan rank i); one result per case."""
    out = []
    for ci, case in enumerate(cases):
        out.append(
            _bench_case(
                plans[case.plan],
                case,
                dtype_name,
                block,
                seed * 100 + ci,
                case.methods or tuple(methods),
            )
        )
    return out


def _bench_case(
    plan: dict[str, Any],
    case: SparseCase,
    dtype_name: str,
    block: int | None,
    seed: int,
    methods: Sequence[str],
) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from syncplan.core.document import PlanError
    from syncplan.executor.engine import PlanExecutor
    from syncplan.executor.sparse import SparseConfig, SparseExecutor

    dtype = getattr(torch, dtype_name)
    rank, n = dist.get_rank(), dist.get_world_size()
    dense = PlanExecutor(plan)
    # the sparse path as the plan configures it; max_density 1: measure the sparse path
    # itself unless the plan says when to fall back
    cfg = SparseConfig(block_elems=block, max_density=None if "sparse" in plan else 1.0)
    sp = SparseExecutor(dense, cfg, plan=plan)
    ops: dict[str, Callable[[Any], Any]] = {
        "sparse": sp.all_reduce,
        "plan": dense.all_reduce,
        "gloo": dist.all_reduce,
        "torch_sparse": lambda t: torch_sparse_all_reduce(t, sp.block_elems),
    }
    order = [m for m in METHODS if m in methods]
    try:
        dense.prepare(case.numel, dtype, torch.device("cpu"))
    except PlanError:  # the dense plan takes floating types only
        order = [m for m in order if m != "plan"]

    # integer values: every order of summation is exact, so every call of every method is
    # checked bit for bit against the sum each rank computes locally (no extra traffic)
    def data(r: int) -> Any:
        return block_sparse(
            case.numel, sp.block_elems, case.density, case.overlap, dtype, seed, r, ints=True
        )

    x = data(rank)
    if "sparse" in order:  # prepare the schedule outside the timed calls, as for the plan
        sp.prepare(-(-case.numel // sp.block_elems), dtype)
    expected = torch.zeros(case.numel, dtype=torch.float64)
    for r in range(n):
        expected += data(r).double()
    expected = expected.to(dtype)
    stats = None
    bad: set[str] = set()
    work = torch.empty_like(x)
    times: dict[str, list[float]] = {m: [] for m in order}
    modes: list[str] = []
    for i in range(case.warmup + case.repeat):
        rot = i % len(order)
        for name in order[rot:] + order[:rot]:  # rotate who goes first
            work.copy_(x)
            dist.barrier()
            t0 = time.perf_counter()
            ops[name](work)
            dt = time.perf_counter() - t0
            if not torch.equal(work, expected):
                bad.add(name)
            if name == "sparse":
                stats = sp.last
            if i >= case.warmup:
                times[name].append(dt)
                if name == "sparse" and sp.last is not None:
                    modes.append(sp.last.mode)
    flags: list[Any] = [None] * n
    dist.all_gather_object(flags, sorted(bad))
    wrong = sorted({m for f in flags for m in f})
    flat = torch.tensor([t for m in order for t in times[m]], dtype=torch.float64)
    dist.all_reduce(flat, op=dist.ReduceOp.MAX)  # a call lasts until its slowest rank
    per = flat.view(len(order), case.repeat).tolist()
    res: dict[str, Any] = {
        "numel": case.numel,
        "bytes": case.numel * x.element_size(),
        "dtype": dtype_name,
        "nprocs": n,
        "density": case.density,
        "overlap": case.overlap,
        "block_elems": sp.block_elems,
        "correct": not wrong,
        "wrong": wrong,
        "repeat": case.repeat,
        "methods": order,
        "plan_algorithm": plan.get("algorithm"),
        "plan_mode": plan.get("sparse", {}).get("mode"),
        "measured_density": stats.density if stats else None,
        "union_density": stats.union_density if stats else None,
        "traffic_fraction": stats.traffic_fraction if stats else None,
        "max_density": sp.max_density,
        "sparse_modes": sorted(set(modes)),
        **{f"{m}_s": statistics.median(per[k]) for k, m in enumerate(order)},
        "samples": {f"{m}_s": per[k] for k, m in enumerate(order)},
    }
    for m in order:
        if m != "sparse" and "sparse" in order:
            res[f"speedup_vs_{m}"] = res[f"{m}_s"] / res["sparse_s"]
    return res


def run_sparse_bench(
    plan: dict[str, Any] | list[dict[str, Any]],
    nprocs: int,
    cases: Sequence[SparseCase],
    *,
    dtype: str = "float32",
    block: int | None = None,
    seed: int = 0,
    methods: Sequence[str] = METHODS,
    timeout_s: float = 600.0,
) -> list[dict[str, Any]]:
    """Spawn ``nprocs`` gloo processes on loopback and benchmark every case (``plan``: one
    plan document, or a list that the cases index)."""
    from syncplan.executor.localrun import LocalRunConfig, run_local

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"methods must be among {', '.join(METHODS)}, got {list(methods)}")
    plans = plan if isinstance(plan, list) else [plan]
    results = run_local(
        sparse_bench_worker,
        (plans, list(cases), dtype, block, seed, list(methods)),
        LocalRunConfig(nprocs, timeout_s=timeout_s, pg_timeout_s=timeout_s),
    )
    return results[0]
