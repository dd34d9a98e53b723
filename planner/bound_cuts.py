"""The cut and partition parts of the all-reduce lower bound (planner/bound.py), which the
tree packings also use as their floor: the least rank-separating cut and the best partition of
ranks into hosts or single ranks, each memoised on the plan context."""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow
from syncplan.planner.bound_parts import caps, partition_time, parts_by_host

if TYPE_CHECKING:
    from syncplan.planner.algorithms.base import PlanContext

EXACT_MAX_RANKS = 64  # ranks up to which the least cut is exact (max-flows), above host cuts


def rank_cut(ctx: PlanContext) -> tuple[float, str]:
    """The least rank-separating cut's bandwidth and how it was found (memoised)."""
    memo = ctx.memo.get("bound_cut")
    if memo is None:
        if len(ctx.ranks) <= EXACT_MAX_RANKS:
            memo = min_rank_cut(ctx), "exact minimum rank-separating cut (max-flow)"
        else:
            memo = host_cuts(ctx), "minimum over host and rank cuts"
        ctx.memo["bound_cut"] = memo
    return memo


def fluid_floor(ctx: PlanContext) -> float:
    """Seconds per byte that no reduce-then-broadcast program's busiest arc can beat: the
    cut and partition bounds without latency. A tree packing whose fluid time meets it is
    optimal (the packing LP stops there)."""
    if len(ctx.ranks) < 2:
        return 0.0
    return max(1.0 / rank_cut(ctx)[0], partition_bound(ctx)[0] / float(ctx.size_bytes))


def partition_bound(ctx: PlanContext) -> tuple[float, str]:
    memo = ctx.memo.get("bound_partition")
    if memo is None:
        memo = ctx.memo["bound_partition"] = _partitions(ctx)
    return memo


def _partitions(ctx: PlanContext) -> tuple[float, str]:
    best, name = partition_time(ctx, [{r} for r in ctx.ranks]), "single ranks"
    if len(ctx.host_groups) >= 2:
        t = partition_time(ctx, parts_by_host(ctx))
        if t > best:
            best, name = t, "hosts"
    return best, name


def min_rank_cut(ctx: PlanContext) -> float:
    """The least cut (bytes/s) separating two ranks, either way: max-flows from the first
    rank to every other and back (memoised). Screened by integer max-flows on capacities
    rounded up (scipy): the pair they find least is then solved exactly, and the smaller of
    the two values is kept; both are at least the exact least cut, so the bound stays valid
    (and is exact unless two cuts lie within the rounding, ~1e-7 of each other)."""
    memo = ctx.memo.get("bound_min_rank_cut")
    if memo is None:
        memo = ctx.memo["bound_min_rank_cut"] = _least_rank_cut(ctx)
    return memo


def _least_rank_cut(ctx: PlanContext) -> float:
    g = ctx.topo.graph
    index = {v: i for i, v in enumerate(g.nodes)}
    src = np.fromiter((index[u] for u, _ in g.edges), dtype=np.int64, count=g.number_of_edges())
    dst = np.fromiter((index[v] for _, v in g.edges), dtype=np.int64, count=len(src))
    bw = np.fromiter((d["bw"] for _, _, d in g.edges(data=True)), dtype=float, count=len(src))
    n = len(index)
    # one unit such that no node's total capacity in or out passes 2**30: no flow overflows
    # scipy's 32-bit capacities
    busiest = max(np.bincount(src, bw, n).max(), np.bincount(dst, bw, n).max())
    unit = busiest / 2**30
    caps = csr_matrix((np.ceil(bw / unit).astype(np.int32), (src, dst)), shape=(n, n))
    s = index[ctx.ranks[0]]
    best, pair = np.inf, None
    for r in ctx.ranks[1:]:
        t = index[r]
        for a, b in ((s, t), (t, s)):
            value = maximum_flow(caps, a, b, method="dinic").flow_value
            if value < best:
                best, pair = value, (a, b)
    assert pair is not None, "a context has at least two ranks and every flow is finite"
    nodes = list(g.nodes)
    exact = nx.maximum_flow_value(g, nodes[pair[0]], nodes[pair[1]], capacity="bw")
    return min(best * unit, exact)


def host_cuts(ctx: PlanContext) -> float:
    sides: list[set[str]] = [{r} for r in ctx.ranks]
    sides.extend(parts_by_host(ctx))
    return min(min(caps(ctx, side)) for side in sides)
