"""Lower bounds on reduce-scatter and all-gather programs (half of planner.bound's reasoning).

Family: any routing, partial sums merge only at ranks (no in-network reduction or
replication). Take disjoint parts (single ranks, hosts), together holding every rank, and let
``o_p`` be the bytes the ranks of part p own. In a reduce-scatter every byte that p does not
own must leave p once as p's partial sum, and every byte p owns must enter it once (some
other part's inputs are needed): out of p >= size - o_p, into p >= o_p. An all-gather is the
mirror image (into p >= size - o_p, out of p >= o_p). Each byte crosses a boundary once, not
twice as in an all-reduce. So, with the shards known,

    T >= max over p of (size - o_p) / cap_out(p) and o_p / cap_in(p)   (in/out swapped for AG)

and summed over the parts ``T >= (k - 1) size / sum cap_out``, ``T >= size / sum cap_in``.
Without known shards (``"shards": "any"``) only bounds valid for every o_p are kept:
``T >= size / (cap_out(p) + cap_in(p))`` per part, and the two summed forms.
Latency: bytes that cross a boundary move in at least one step that lasts at least the least
rank-to-rank latency L plus the load over the capacity, so ``T >= bandwidth bound + L``;
and every step lasts at least ``min_step_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.bound_parts import caps, parts_by_host, rank_to_rank_latency

FAMILY_RS = "reduce-scatter, no in-network reduction"
FAMILY_AG = "all-gather, no in-network replication"


@dataclass(frozen=True)
class CollectiveBound:
    time_s: float
    bandwidth_s: float
    latency_s: float
    method: str
    family: str


def _part_time(size: float, owned: float | None, out: float, inn: float, collective: str) -> float:
    if collective == "allgather":
        out, inn = inn, out  # mirror image: what must enter is what a reduce-scatter sends
    if owned is None:
        return size / (out + inn)
    t = 0.0
    if size - owned > 0:
        t = max(t, (size - owned) / out if out > 0 else float("inf"))
    if owned > 0:
        t = max(t, owned / inn if inn > 0 else float("inf"))
    return t


def collective_bound(
    ctx: PlanContext, collective: str, shards: Sequence[tuple[int, int]] | None, units: int
) -> CollectiveBound:
    """The bound for ``collective`` on ``ctx``; ``shards`` None means any shard sizes."""
    family = FAMILY_RS if collective == "reducescatter" else FAMILY_AG
    n = len(ctx.ranks)
    if n == 1:
        return CollectiveBound(0.0, 0.0, 0.0, "single rank", family)
    size = float(ctx.size_bytes)
    rank_of = {r: i for i, r in enumerate(ctx.ranks)}
    best, method = 0.0, "no part"
    partitions = {"single ranks": [{r} for r in ctx.ranks]}
    if len(ctx.host_groups) >= 2:
        partitions["hosts"] = parts_by_host(ctx)
    for name, parts in partitions.items():
        part_caps = [caps(ctx, p) for p in parts]
        for part, (out, inn) in zip(parts, part_caps, strict=True):
            owned = None
            if shards is not None:
                owned = (
                    size
                    * sum(
                        shards[rank_of[r]][1] - shards[rank_of[r]][0] for r in part if r in rank_of
                    )
                    / units
                )
            t = _part_time(size, owned, out, inn, collective)
            if t > best:
                best, method = t, f"one part of the partition into {name}"
        k = len(parts)
        total_out, total_in = sum(c[0] for c in part_caps), sum(c[1] for c in part_caps)
        if collective == "allgather":
            total_out, total_in = total_in, total_out
        t = max((k - 1) * size / total_out, size / total_in)
        if t > best:
            best, method = t, f"partition into {name}"
    lat = rank_to_rank_latency(ctx)
    time_s = max(best + lat, ctx.cost.min_step_s)
    return CollectiveBound(time_s, best, lat, method, family)
