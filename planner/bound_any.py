"""A lower bound on the time of every all-reduce program, of any family (docs/planner.md).

planner/bound.py bounds reduce-then-broadcast programs only; a one-step direct exchange or
recursive doubling can beat it. This bound assumes only the program model of docs/formats.md
(Plan document) and the cost model: steps are barriers, a transfer carries what its source held at
the start of the step, nodes other than ranks only forward bytes, and the inputs are
arbitrary (each input element any value of a group such as the integers modulo 2^8: the
sum of a set of inputs then takes 256^size values as those inputs vary).

Information. For a node set B that holds some ranks but not all, B's ranks must end holding
the sum, which, given B's own inputs, determines the sum of the other inputs: 256^size
values. What B's ranks hold at the end is a function of B's inputs and of the bytes that
transfers from ranks outside B carried into B (a transfer from a rank of B carries only
what B held already). The program fixes how many bytes those are, so they must be at least
``size``: every such B receives at least ``size`` bytes from ranks outside it over the arcs
entering B, and by the same argument on the complement sends at least ``size`` out.

Cut. ``T >= size / cap(S -> V-S)`` for every rank-separating cut, each direction (the same
cut as bound.py: exact minimum by max-flow up to EXACT_MAX_RANKS ranks, host and rank cuts
above). Partition. For k disjoint parts holding every rank, each part receives at least
``size`` bytes from ranks in other parts: ``k size`` bytes cross the arcs into parts (and,
as each comes from a rank of another part, the arcs out of parts), so
``T >= k size / min(cap in, cap out)`` (k = 2 is the cut; bound.py's reduce-then-broadcast
partition bound has 2 (k - 1) instead, which a direct exchange does not obey).

Latency. A rank's input reaches another rank along a chain of transfers in increasing
steps, each lasting at least its path's latency: ``T >= max latency between two ranks``
(computed from a few sources; any subset of pairs gives a valid bound). A step in which
bytes cross the boundary lasts at least ``L + load(e) / bw(e)`` for every boundary arc e
they load, L the least latency of a rank-to-rank path crossing it; there is at least one
such step (a direct exchange has exactly one), so ``T >= bandwidth bound + L``. Every step
lasts at least ``min_step_s``, and there is at least one.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.bound_cuts import rank_cut
from syncplan.planner.bound_parts import (
    caps,
    cross_host_latency,
    parts_by_host,
    rank_to_rank_latency,
)

FAMILY_ANY = "every all-reduce program (any schedule, no in-network reduction)"
DIAMETER_SOURCES = 4  # Dijkstra sources for the latency diameter; 2 above 1,024 ranks


@dataclass(frozen=True)
class AnyBound:
    time_s: float
    bandwidth_s: float  # the larger of the cut and partition terms, without latency
    latency_s: float  # the latency diameter found
    method: str
    family: str = FAMILY_ANY


def lower_bound_any(ctx: PlanContext, cut_Bps: float | None = None) -> AnyBound:
    """The bound; ``cut_Bps``: the minimum rank-separating cut if already known."""
    n = len(ctx.ranks)
    if n == 1:
        return AnyBound(0.0, 0.0, 0.0, "single rank")
    if cut_Bps is None:
        cut_Bps = rank_cut(ctx)[0]
    size = float(ctx.size_bytes)
    bw, method = size / cut_Bps, "cut"
    cross = rank_to_rank_latency(ctx)
    for name, k, cap_out, cap_in in _partitions(ctx):
        t = k * size / min(cap_out, cap_in)
        if t > bw:
            bw, method = t, f"partition over {name}"
            cross = cross_host_latency(ctx) if name == "hosts" else rank_to_rank_latency(ctx)
    diameter = latency_diameter(ctx)
    parts = {
        "bandwidth + crossing latency": bw + cross,
        "latency diameter": diameter,
        "least step": ctx.cost.min_step_s,
    }
    binding = max(parts, key=lambda k: parts[k])
    return AnyBound(parts[binding], bw, diameter, f"{method}; {binding} binds")


def _partitions(ctx: PlanContext) -> list[tuple[str, int, float, float]]:
    """(name, parts, capacity out of the parts, capacity into them) for single ranks and
    hosts."""
    g = ctx.topo.graph
    out = [
        (
            "single ranks",
            len(ctx.ranks),  # a part of one node: all its arcs cross
            sum(d for _, d in g.out_degree(ctx.ranks, weight="bw")),
            sum(d for _, d in g.in_degree(ctx.ranks, weight="bw")),
        )
    ]
    if len(ctx.host_groups) >= 2:
        part_caps = [caps(ctx, p) for p in parts_by_host(ctx)]
        out.append(
            (
                "hosts",
                len(part_caps),
                sum(c[0] for c in part_caps),
                sum(c[1] for c in part_caps),
            )
        )
    return out


def latency_diameter(ctx: PlanContext) -> float:
    """The largest least-latency between two ranks, over pairs with an end among a few
    sources: rank 0, then repeatedly the rank farthest from the sources so far (any subset
    of pairs gives a valid bound; fewer sources on large clusters bound the work)."""
    g = ctx.topo.graph
    rev = g.reverse(copy=False)
    ranks = ctx.ranks
    best = 0.0
    far: dict[str, float] = {}
    src = ranks[0]
    sources = DIAMETER_SOURCES if len(ranks) <= 1024 else 2
    for _ in range(min(sources, len(ranks))):
        dist = nx.single_source_dijkstra_path_length(g, src, weight="lat")
        back = nx.single_source_dijkstra_path_length(rev, src, weight="lat")
        for r in ranks:
            d = max(dist.get(r, 0.0), back.get(r, 0.0))
            far[r] = min(far.get(r, float("inf")), d) if r != src else -1.0
            best = max(best, d)
        far[src] = -1.0
        src = max(ranks, key=lambda r: far[r])
        if far[src] < 0:
            break
    return best
