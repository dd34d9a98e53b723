"""Lower bounds on broadcast and reduce programs from one root (docs/planner.md).

Family: any program, any routing, no in-network replication or reduction. Every byte of
the root's buffer must reach every rank v (broadcast; in a reduce every rank's input must
reach the root), so it crosses every cut that separates the root from v: with F the least
max flow from the root to a rank (to the root from a rank, for a reduce) over the
topology's arcs, ``T >= size / F``. Per step the bytes crossing the min cut over its
capacity is at most the step's busiest arc time, so, as in planner/bound_collectives.py,
a step that moves bytes across it lasts at least the least rank-to-rank latency L more:
``T >= size / F + L``. A byte reaches v through a chain of transfers in successive steps,
each at least its path's latency: ``T >= max over v of the least latency root -> v``.
Every step lasts at least ``min_step_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.bound_parts import rank_to_rank_latency

FAMILY_BROADCAST = "broadcast, no in-network replication"
FAMILY_REDUCE = "reduce, no in-network reduction"


@dataclass(frozen=True)
class RootedBound:
    time_s: float
    bandwidth_s: float
    latency_s: float
    flow_Bps: float  # the least max flow between the root and a rank
    method: str
    family: str


def rooted_bound(ctx: PlanContext, root: int, reduce: bool) -> RootedBound:
    """The bound on a broadcast (or with ``reduce`` a reduce) from rank ``root``."""
    family = FAMILY_REDUCE if reduce else FAMILY_BROADCAST
    n = len(ctx.ranks)
    if n == 1:
        return RootedBound(0.0, 0.0, 0.0, float("inf"), "single rank", family)
    g = ctx.topo.graph
    flow, worst = float("inf"), ""
    r = ctx.ranks[root]
    for v in ctx.ranks:
        if v == r:
            continue
        src, dst = (v, r) if reduce else (r, v)
        f = nx.maximum_flow_value(g, src, dst, capacity="bw")
        if f < flow:
            flow, worst = f, v
    bandwidth = ctx.size_bytes / flow if flow > 0 else float("inf")
    lat = rank_to_rank_latency(ctx)
    dist = nx.single_source_dijkstra_path_length(
        g.reverse(copy=False) if reduce else g, r, weight="lat"
    )
    reach = max(dist.get(v, float("inf")) for v in ctx.ranks)
    time_s = max(bandwidth + lat, reach, ctx.cost.min_step_s)
    method = f"least max flow {'into' if reduce else 'from'} the root: rank {worst!r}"
    if reach > bandwidth + lat:
        method = "the latency of the farthest rank"
    return RootedBound(time_s, bandwidth, lat, flow, method, family)
