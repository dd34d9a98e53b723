"""A packing of spanning trees from (broadcast) or into (reduce) one root, at the most total
rate the topology's arcs carry.

A tree edge is a routed path between two ranks whose inner nodes only forward (never
another rank: ``packing.RankRoutes``). The LP

    max sum_T x_T   s.t.   sum_T x_T use_T(a) <= bw_a   (every arc a),   x >= 0

is solved by column generation (HiGHS through scipy): the duals y price every arc, a rank
pair costs its cheapest route under y, and the pricing step adds a cheap shallow tree
(``packing.shallow_trees``) while one improves the LP, then the minimum spanning
out-arborescence from the root (Chu-Liu/Edmonds; an in-tree is an out-tree of the
transposed costs). A tree whose price is below 1 improves the LP; none means the LP is
optimal. By Edmonds' branching theorem, when ranks may relay directly the optimum is the
least root-to-rank max flow, the bound of ``syncplan.planner.bound_rooted``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from syncplan.core.errors import InfeasibleError
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing import (
    RankRoutes,
    hop_distances,
    min_arborescence,
    shallow_trees,
)

ROUNDS = 400  # column-generation rounds at most,
ROUND_RANKS = 4096  # and at most this over the rank count (a round prices n-rank trees)
# a tree must price below 1 - TOLERANCE to enter; none does: the LP is within that
# fraction of its optimum (the prices over the cheapest tree's price are a feasible dual)
TOLERANCE = 2e-3
SLACK = 1  # shallow trees: each rank at most this deeper than its fewest hops
Path = tuple[str, ...]


def _tree(
    ctx: PlanContext,
    routes: RankRoutes,
    price: np.ndarray,
    root: int,
    inward: bool,
    max_depth: np.ndarray | None,
) -> tuple[np.ndarray, list[Path | None], np.ndarray]:
    """A cheap tree under ``price``: the cheapest (``max_depth`` None), or a greedy one whose
    ranks sit at most ``max_depth[root]`` deep; (parent array, per-rank edge paths, arc
    counts)."""
    cost, pred = routes.solve(price)  # inf: no route that avoids other ranks
    c = cost.T if inward else cost
    parent = min_arborescence(c, root) if max_depth is None else shallow_trees(c, max_depth)[root]
    use = np.zeros(len(ctx.router.bw))
    paths: list[Path | None] = [None] * len(parent)
    for v, up in enumerate(parent.tolist()):
        if up < 0:
            continue
        path = routes.path(pred, v, up) if inward else routes.path(pred, up, v)
        paths[v] = path
        np.add.at(use, ctx.router.arcs(path), 1.0)
    return parent, paths, use


@dataclass(frozen=True)
class PackedTree:
    """A tree of the packing: parent array, per-rank edge paths, arc crossings, rate (B/s)."""

    parent: np.ndarray
    paths: list[Path | None]
    use: np.ndarray
    rate: float


def _solve(cols: list[np.ndarray], cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rates, arc prices) of the LP above over the trees ``cols`` (arc crossings)."""
    res = linprog(
        -np.ones(len(cols)), A_ub=np.column_stack(cols), b_ub=cap, bounds=(0, None), method="highs"
    )
    if res.status != 0:
        raise InfeasibleError(f"packing: the tree LP failed ({res.message})")
    return res.x, np.maximum(-res.ineqlin.marginals, 0.0)


def pack_trees(ctx: PlanContext, root: int, inward: bool, ceiling: float) -> list[PackedTree]:
    """Trees with positive rate in the LP above, fastest first (memoised per request).
    Shallow trees are priced first (each rank at most SLACK deeper than its fewest hops
    from the root: short pipeline fill), then exact minimum trees; the LP stops within
    TOLERANCE of its optimum or at ``ceiling`` (B/s, the max-flow bound: optimal)."""
    memo_key = f"rooted_packing:{root}:{inward}"
    if memo_key in ctx.memo:
        return ctx.memo[memo_key]
    routes = RankRoutes(ctx)
    scale = float(ctx.router.bw.max())
    cap = ctx.router.bw / scale
    price = np.zeros(len(cap))
    cost = routes.solve(price)[0]
    limit: np.ndarray | None = hop_distances(cost.T if inward else cost) + SLACK
    trees: list[tuple[np.ndarray, list[Path | None]]] = []
    cols: list[np.ndarray] = []
    seen: set[bytes] = set()
    x = np.zeros(0)
    for _ in range(min(ROUNDS, max(16, ROUND_RANKS // len(ctx.ranks)))):
        parent, paths, use = _tree(ctx, routes, price, root, inward, limit)
        key = parent.tobytes() + use.tobytes()
        if (cols and float(price @ use) >= 1 - TOLERANCE) or key in seen:
            if limit is None:
                break
            limit = None  # the shallow trees are done: now the exact ones
            continue
        seen.add(key)
        trees.append((parent, paths))
        cols.append(use)
        x, price = _solve(cols, cap)
        if float(x.sum()) * scale >= ceiling * (1 - 1e-9):
            break
    least = 1e-9 * max(float(x.sum()), 1e-300)
    out = sorted(
        (
            PackedTree(parent, paths, use, float(rate) * scale)
            for (parent, paths), use, rate in zip(trees, cols, x, strict=True)
            if rate > least
        ),
        key=lambda t: -t.rate,
    )
    ctx.memo[memo_key] = out
    return out


def fewer_trees(ctx: PlanContext, trees: list[PackedTree], keep: int) -> list[PackedTree]:
    """The ``keep`` fastest trees at the rates the LP gives them alone (fewer trees: fewer
    transfers a piece, so more and smaller pieces within the transfer budget)."""
    if keep >= len(trees):
        return trees
    scale = float(ctx.router.bw.max())
    x, _ = _solve([t.use for t in trees[:keep]], ctx.router.bw / scale)
    least = 1e-9 * max(float(x.sum()), 1e-300)
    return [
        PackedTree(t.parent, t.paths, t.use, float(r) * scale)
        for t, r in zip(trees[:keep], x, strict=True)
        if r > least
    ]
