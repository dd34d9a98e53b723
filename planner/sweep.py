"""A size sweep of predicted times, as nccl-tests' ``-b 8 -e 1G -f 2`` measures them
(docs/sweep.md): every size from ``lo`` to ``hi`` by ``factor``, each algorithm priced by the
cost model, with nccl-tests' algorithm and bus bandwidths."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.options import DEFAULT_OPTIONS, PlanOptions
from syncplan.planner.sizes import format_size
from syncplan.planner.topology import Topology

MAX_SWEEP_BYTES = 64 << 30  # largest size a sweep prices
SWEEP_FORMAT = "syncplan-sweep"
SWEEP_VERSION = 1


def sweep_sizes(lo: int, hi: int, factor: int, cap: int = MAX_SWEEP_BYTES) -> list[int]:
    """``lo, lo * factor, ...`` up to ``hi`` included; RequestError (naming the flag) when
    ``lo > hi``, ``factor < 2`` or ``hi > cap`` (so a sweep has at most 37 sizes)."""
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 2:
        raise RequestError(f"--factor must be a whole number >= 2, got {factor!r}")
    if lo > hi:
        raise RequestError(
            f"--from {format_size(lo)} is larger than --to {format_size(hi)}; swap them"
        )
    if hi > cap:
        raise RequestError(f"--to {format_size(hi)} is above the cap of {format_size(cap)}")
    sizes = [lo]
    while sizes[-1] * factor <= hi:
        sizes.append(sizes[-1] * factor)
    return sizes


def bus_factor(collective: str, nranks: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and
    all-gather (0 for one rank, which moves nothing)."""
    if nranks < 2:
        return 0.0
    share = (nranks - 1) / nranks
    return 2 * share if collective == "allreduce" else share


def bandwidths(
    collective: str, size_bytes: float, seconds: float | None, nranks: int
) -> tuple[float | None, float | None]:
    """(algbw, busbw) in GB/s (1e9 bytes/s): size / time and algbw x ``bus_factor``; None
    without a positive time."""
    if seconds is None or not seconds > 0:
        return None, None
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * bus_factor(collective, nranks)


def parse_algorithms(text: str) -> list[str]:
    """``"auto,ring"`` -> ["auto", "ring"] (duplicates dropped); RequestError naming the
    unknown ones."""
    from syncplan.planner.algorithms import ALGORITHMS

    names = list(dict.fromkeys(a.strip() for a in text.split(",") if a.strip()))
    if not names:
        raise RequestError("--algorithms names no algorithm")
    unknown = [a for a in names if a != "auto" and a not in ALGORITHMS]
    if unknown:
        raise RequestError(
            f"unknown algorithm {', '.join(unknown)}; choose auto or one of {', '.join(ALGORITHMS)}"
        )
    return names


def default_algorithms() -> list[str]:
    """auto and every algorithm ``syncplan plan --compare`` prices."""
    from syncplan.planner.algorithms import ALGORITHMS

    return ["auto", *ALGORITHMS]


def price_size(
    topo: Topology,
    ranks: list[str],
    size: int,
    algorithms: Sequence[str],
    collective: str = "allreduce",
    *,
    options: PlanOptions = DEFAULT_OPTIONS,
    shards: str = "equal",
) -> list[dict[str, Any]]:
    """One point per algorithm at ``size``: its predicted time (None, with ``infeasible``
    saying why, where the algorithm cannot serve the request) and, for auto, the algorithm
    it chose."""
    times: dict[str, float] = {}
    why: dict[str, str] = {}
    chosen = ""
    if collective == "allreduce":
        from syncplan.planner.algorithms import ALGORITHMS
        from syncplan.planner.plan import compare

        names = list(ALGORITHMS) if "auto" in algorithms else [a for a in algorithms]
        try:
            comp = compare(topo, ranks, size, algorithms=names, options=options)
        except InfeasibleError as exc:
            why = {a: str(exc) for a in algorithms}
        else:
            times = {k: c.predicted_time_s for k, c in comp.candidates.items()}
            why = dict(comp.infeasible)
            chosen = comp.best.algorithm
            times["auto"] = comp.best.predicted_time_s
    else:
        from syncplan.planner.plan import make_plan

        doc = make_plan(topo, ranks, size, "auto", collective, options=options, shards=shards)
        times = dict(doc["candidates"])
        chosen = doc["algorithm"]
        times["auto"] = doc["predicted_time_s"]
    points = []
    for name in algorithms:
        t = times.get(name)
        algbw, busbw = bandwidths(collective, size, t, len(ranks))
        point: dict[str, Any] = {
            "size_bytes": size,
            "algorithm": name,
            "chosen": chosen if name == "auto" else name,
            "predicted_time_s": t,
            "predicted_algbw_GBps": algbw,
            "predicted_busbw_GBps": busbw,
        }
        if t is None:
            point["chosen"] = None
            point["infeasible"] = why.get(name, f"not offered for {collective}")
        points.append(point)
    return points


def predict_sweep(
    topo: Topology,
    ranks: list[str],
    sizes: Sequence[int],
    algorithms: Sequence[str],
    collective: str = "allreduce",
    *,
    options: PlanOptions = DEFAULT_OPTIONS,
    shards: str = "equal",
    on_size: Callable[[int, int, int, float], None] | None = None,
) -> dict[str, Any]:
    """The sweep document (docs/sweep.md): every size x algorithm priced by ``price_size``;
    ``on_size(i, count, size, seconds)`` is called after each size."""
    topo.check_ranks(ranks)
    points: list[dict[str, Any]] = []
    for i, size in enumerate(sizes):
        t0 = time.perf_counter()
        points += price_size(
            topo, ranks, size, algorithms, collective, options=options, shards=shards
        )
        if on_size is not None:
            on_size(i, len(sizes), size, time.perf_counter() - t0)
    return {
        "format": SWEEP_FORMAT,
        "format_version": SWEEP_VERSION,
        "collective": collective,
        "ranks": list(ranks),
        "nranks": len(ranks),
        "bus_factor": bus_factor(collective, len(ranks)),
        "sizes": list(sizes),
        "algorithms": list(algorithms),
        **options.doc_fields(),
        "points": points,
    }
