"""Lower bounds on the time of any reduce-then-broadcast all-reduce program.

Family: every share of the buffer is reduced to some rank (its root) and broadcast from it;
any routing; partial sums merge only at ranks (no in-network reduction or replication);
aggregation and broadcast may overlap. Under the cost model every step lasts at least as long
as any arc needs for the bytes the step puts on it, so ``T >= total bytes on arc e / bw_e``
for every arc, and the bounds below count bytes that must cross arcs.

Partition bound. Take k >= 2 disjoint node sets ("parts"), each holding at least one rank and
together holding every rank. For every byte position of the buffer, each part that does not
hold the root must send the partial sum of its inputs out (one transfer leaving it) and must
receive the final value (one transfer entering it, which leaves another part). These are
distinct transfers, so the arcs leaving parts carry at least ``2 (k - 1) size`` bytes, and so
do the arcs entering parts:

    T >= 2 (k - 1) size / sum(cap out of part)    and the same with cap in;

with k = 2 each direction is crossed once by every byte: ``T >= size / cap(S -> V-S)``
(the classical cut bound). Parts used: single ranks, hosts, and for up to EXACT_MAX_RANKS
ranks the exact minimum rank-separating cut (max-flow).

Packing bound. When forest has solved its tree-packing LP on the same context, the LP's arc
prices give a third bandwidth bound (``syncplan.planner.algorithms.packing.fluid_lower_bound``): for
prices y >= 0 summing to one over bandwidth, every program's time per byte is at least the
cheapest reduce tree plus broadcast tree of one root. It is never looser than needed: at the
LP's optimum it equals the family's fluid optimum.

Latency. The input of every rank must reach every other rank, so ``T >= max latency between
ranks``. And the bytes that cross the cut or the partition boundary move in steps that each
last at least ``L + load(e) / bw(e)`` for every boundary arc ``e`` they load, where ``L`` is
the least latency of a rank-to-rank path that crosses the boundary; so the boundary's
capacity is only available for ``t_s - L`` of each such step. There are at least two such
steps: a part not holding a share's root sends its partial sum out in one step and hears the
final value back in a later one (it needs the sum, which needs its own input). Hence
``T >= bandwidth bound + 2 L``, and ``T >= 2 max(L, min_step)`` (every step lasts at least
the cost model's ``min_step_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
from syncplan.planner.bound_cuts import (
    fluid_floor,
    partition_bound,
    rank_cut,
)
from syncplan.planner.bound_fill import fill_bound
from syncplan.planner.bound_parts import (
    cross_host_latency,
    rank_to_rank_latency,
)

if TYPE_CHECKING:
    from syncplan.planner.algorithms.base import PlanContext

FAMILY = "reduce-then-broadcast, no in-network reduction"
PACKING_BOUND_ALL_MAX = 32  # ranks up to which every packing's arc prices are tried
COLD_BOUND_MAX = 16  # ranks up to which a cold packing LP may be solved for its prices


@dataclass(frozen=True)
class Bound:
    time_s: float
    cut_bandwidth_Bps: float
    latency_s: float
    method: str
    family: str = FAMILY
    partition_s: float = 0.0  # the best partition (k >= 2 parts) bandwidth bound
    bandwidth_s: float = 0.0  # the bandwidth term: max(partition, cut) bound, no latency


def lower_bound(ctx: PlanContext) -> Bound:
    n = len(ctx.ranks)
    if n == 1:
        return Bound(0.0, float("inf"), 0.0, "single rank")
    cut, cut_method = rank_cut(ctx)
    size = float(ctx.size_bytes)
    part_time, part_name = partition_bound(ctx)
    cut_time = size / cut
    pack_time = _packing_bound(ctx) * size
    if pack_time > cut_time * (1 + 1e-9):
        cut_time, cut_method = pack_time, "tree-packing LP dual bound (arc prices)"
    rank_lat = rank_to_rank_latency(ctx)
    if part_time > cut_time:
        bw_time, method = part_time, f"partition bound over {part_name}"
        cross = cross_host_latency(ctx) if part_name == "hosts" else rank_lat
    else:
        bw_time, method, cross = cut_time, cut_method, rank_lat
    boundary = max(bw_time + 2 * cross, 2 * max(cross, ctx.cost.min_step_s))
    fill = fill_bound(ctx, boundary)
    if fill > boundary:
        boundary = fill
        method = f"{method}; partition over hosts with aggregation fill and per-step latency binds"
    lat = _latency_floor(ctx)
    if lat >= boundary:
        return Bound(
            lat,
            cut,
            lat,
            method + "; latency floor binds",
            partition_s=part_time,
            bandwidth_s=bw_time,
        )
    return Bound(boundary, cut, lat, method, partition_s=part_time, bandwidth_s=bw_time)


def _packing_bound(ctx: PlanContext) -> float:
    """The tree-packing LP's dual bound (seconds per byte), when forest has priced a packing
    on this context: its arc prices bound every reduce-then-broadcast program's fluid time
    (planner.algorithms.packing.fluid_lower_bound). It lifts the cut bound where no cut is
    tight (meshes whose every cut has spare capacity). A value that cannot change
    ``lower_bound`` (below the partition bound, or not above the cut's) may come back lower
    than the prices prove."""
    from syncplan.planner.algorithms.packing import fluid_lower_bound

    packings = ctx.memo.get("packings") or {}
    theta = min((p.theta for p in packings.values()), default=0.0)
    if theta <= fluid_floor(ctx) * (1 + 1e-9):
        return 0.0  # no dual bound exceeds its LP's optimum: the cut and partition decide
    # every price vector gives a valid bound, and degenerate LPs have many optimal ones: up
    # to PACKING_BOUND_ALL_MAX ranks the prices of every packing are tried (the best is often
    # not the unlimited packing's), above only the deepest two (Edmonds per root costs)
    keys = (
        list(packings)
        if len(ctx.ranks) <= PACKING_BOUND_ALL_MAX
        else [k for k in (("any", None), ("any", 2)) if k in packings]
    )
    cold = len(ctx.ranks) <= COLD_BOUND_MAX
    # below the floor lower_bound takes the partition or the cut instead; where the cold LP
    # may run, its test below needs the exact value, unless that is sure to pass it as well
    useless = fluid_floor(ctx) * (1 - 1e-12)
    if cold and useless > theta * (1 - 1e-3):
        useless = 0.0
    best = 0.0
    for key in keys:
        best = max(best, fluid_lower_bound(ctx, packings[key].prices, useless))
    if cold and best < theta * (1 - 1e-3):
        # the warm-started packings end on degenerate duals: a cold unlimited LP's final
        # prices often prove the fluid optimum (a 12-rank ring: 10.6 % above the cut);
        # milliseconds up to 16 ranks, seconds on a 32-rank full mesh
        from syncplan.planner.algorithms.packing import PackingLP

        unlimited = PackingLP(ctx, None).solve()
        best = max(best, fluid_lower_bound(ctx, unlimited.prices))
    return best


def _latency_floor(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    src = ctx.ranks[0]
    dist = nx.single_source_dijkstra_path_length(g, src, weight="lat")
    back = nx.single_source_dijkstra_path_length(g.reverse(copy=False), src, weight="lat")
    return max(max(dist[r] for r in ctx.ranks), max(back[r] for r in ctx.ranks))
