"""Lower bounds on the time of any reduce-then-broadcast all-reduce program.

Family: every share of the buffer is reduced to some rank (its root) and broadcast from it;
any routing; partial sums merge only at ranks (no in-network reduction or replication);
aggregation and broadcast may overlap. For any cut (S, V-S) that separates ranks, every share
crosses it at least once in each direction (towards its root while reducing, away from it
while broadcasting), so at least ``size`` bytes cross each way and, under the cost model,
``T >= size / min(cap(S->V-S), cap(V-S->S))``. Every rank's input must also reach every
other rank, so ``T >= max latency between ranks``.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from planner.algorithms.base import PlanContext

FAMILY = "reduce-then-broadcast, no in-network reduction"
EXACT_MAX_RANKS = 64


@dataclass(frozen=True)
class Bound:
    time_s: float
    cut_bandwidth_Bps: float
    latency_s: float
    method: str
    family: str = FAMILY


def lower_bound(ctx: PlanContext) -> Bound:
    n = len(ctx.ranks)
    if n == 1:
        return Bound(0.0, float("inf"), 0.0, "single rank")
    if n <= EXACT_MAX_RANKS:
        cut, method = _min_rank_cut(ctx), "exact minimum rank-separating cut (max-flow)"
    else:
        cut, method = _host_cuts(ctx), "minimum over host and rank cuts"
    lat = _latency_floor(ctx)
    return Bound(max(ctx.size_bytes / cut, lat), cut, lat, method)


def _min_rank_cut(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    s = ctx.ranks[0]
    best = float("inf")
    for t in ctx.ranks[1:]:
        best = min(best, nx.maximum_flow_value(g, s, t, capacity="bw"),
                   nx.maximum_flow_value(g, t, s, capacity="bw"))
    return best


def _host_cuts(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    sides: list[set[str]] = [{r} for r in ctx.ranks]
    for group in ctx.host_groups:
        host = ctx.topo.host_of(ctx.ranks[group[0]])
        side = {n for n, node in ctx.topo.nodes.items() if node.host == host}
        side.update(ctx.ranks[i] for i in group)
        sides.append(side)
    best = float("inf")
    for side in sides:
        out = sum(d["bw"] for u in side for _, v, d in g.out_edges(u, data=True) if v not in side)
        inn = sum(d["bw"] for u in side for v, _, d in g.in_edges(u, data=True) if v not in side)
        best = min(best, out, inn)
    return best


def _latency_floor(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    src = ctx.ranks[0]
    dist = nx.single_source_dijkstra_path_length(g, src, weight="lat")
    back = nx.single_source_dijkstra_path_length(g.reverse(copy=False), src, weight="lat")
    return max(max(dist[r] for r in ctx.ranks), max(back[r] for r in ctx.ranks))
