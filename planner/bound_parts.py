"""Parts, crossing capacities and least latencies shared by the lower bounds.

``syncplan.planner.bound``, ``bound_fill``, ``bound_any`` and ``bound_collectives`` all
partition the ranks (single ranks, hosts) and charge the latency of a step that crosses a
part's boundary. The values depend only on the context's topology and ranks, so the
per-context ones are memoised on ``ctx.memo``: one request computes each once.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import networkx as nx

if TYPE_CHECKING:
    from syncplan.planner.algorithms.base import PlanContext


def parts_by_host(ctx: PlanContext) -> list[set[str]]:
    """One part per host of the ranks: the host's nodes and its ranks (memoised)."""
    memo = ctx.memo.get("bound_parts_by_host")
    if memo is None:
        by_host: dict[str, set[str]] = defaultdict(set)
        for nid, node in ctx.topo.nodes.items():
            if node.host is not None:
                by_host[node.host].add(nid)
        memo = []
        for group in ctx.host_groups:
            host = ctx.topo.host_of(ctx.ranks[group[0]])
            memo.append(by_host.get(host, set()) | {ctx.ranks[i] for i in group})
        ctx.memo["bound_parts_by_host"] = memo
    return memo


def caps(ctx: PlanContext, side: set[str]) -> tuple[float, float]:
    """Capacity (bytes/s) of the arcs leaving ``side`` and of those entering it."""
    g = ctx.topo.graph
    out = sum(d["bw"] for u in side for _, v, d in g.out_edges(u, data=True) if v not in side)
    inn = sum(d["bw"] for u in side for v, _, d in g.in_edges(u, data=True) if v not in side)
    return out, inn


def partition_time(ctx: PlanContext, parts: list[set[str]]) -> float:
    """The partition bound for disjoint ``parts`` that together hold every rank."""
    k = len(parts)
    if k < 2:
        return 0.0
    part_caps = [caps(ctx, p) for p in parts]
    total_out = sum(c[0] for c in part_caps)
    total_in = sum(c[1] for c in part_caps)
    return 2 * (k - 1) * ctx.size_bytes / min(total_out, total_in)


def rank_to_rank_latency(ctx: PlanContext) -> float:
    """No rank-to-rank path is faster: one arc between ranks, or an arc out of a rank and
    another into a rank (memoised)."""
    memo = ctx.memo.get("bound_rank_latency")
    if memo is None:
        memo = ctx.memo["bound_rank_latency"] = _rank_to_rank(ctx)
    return memo


def _rank_to_rank(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    ranks = set(ctx.ranks)
    out = min((d["lat"] for r in ranks for _, _, d in g.out_edges(r, data=True)), default=0.0)
    inn = min((d["lat"] for r in ranks for _, _, d in g.in_edges(r, data=True)), default=0.0)
    direct = min(
        (d["lat"] for r in ranks for _, v, d in g.out_edges(r, data=True) if v in ranks),
        default=float("inf"),
    )
    return min(direct, out + inn)


def cross_host_latency(ctx: PlanContext) -> float:
    """No path from a rank of one host to a rank of another is faster: it leaves its host
    (at least the least latency from one of the host's ranks out of the host) and enters
    the other (likewise in); when no arc joins two hosts directly, those parts are disjoint
    and add up (memoised)."""
    memo = ctx.memo.get("bound_cross_host_latency")
    if memo is None:
        memo = ctx.memo["bound_cross_host_latency"] = _cross_host(ctx)
    return memo


def _cross_host(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    parts = parts_by_host(ctx)
    where = {nid: k for k, part in enumerate(parts) for nid in part}
    direct = any(u in where and v in where and where[u] != where[v] for u, v in g.edges)
    leave = enter = float("inf")
    for k, part in enumerate(parts):
        ranks = [r for r in ctx.ranks if where.get(r) == k]
        h = nx.DiGraph(g.subgraph(part))
        exits: dict[str, float] = {}
        entries: dict[str, float] = {}
        for u, v, d in g.out_edges(part, data=True):
            if v not in part:
                exits[u] = min(exits.get(u, float("inf")), d["lat"])
        for u, v, d in g.in_edges(part, data=True):
            if u not in part:
                entries[v] = min(entries.get(v, float("inf")), d["lat"])
        h.add_weighted_edges_from(((u, "__out__", w) for u, w in exits.items()), weight="lat")
        h.add_weighted_edges_from((("__in__", v, w) for v, w in entries.items()), weight="lat")
        if "__out__" in h:
            to_exit = nx.single_source_dijkstra_path_length(
                h.reverse(copy=False), "__out__", weight="lat"
            )
            leave = min(leave, min((to_exit[r] for r in ranks if r in to_exit), default=leave))
        if "__in__" in h:
            from_entry = nx.single_source_dijkstra_path_length(h, "__in__", weight="lat")
            enter = min(
                enter, min((from_entry[r] for r in ranks if r in from_entry), default=enter)
            )
    if not (leave < float("inf") and enter < float("inf")):
        return rank_to_rank_latency(ctx)
    return max(leave, enter) if direct else leave + enter
