"""A packing of spanning trees from (broadcast) or into (reduce) one root, at the most total
rate the topology's arcs carry.

A tree edge is a routed path between two ranks whose inner nodes only forward (never
another rank: ``packing.RankRoutes``). The LP

    max sum_T x_T   s.t.   sum_T x_T use_T(a) <= bw_a   (every arc a),   x >= 0

is solved by column generation (HiGHS through scipy): the duals y price every arc, a rank
pair costs its cheapest route under y, and the pricing step adds the minimum spanning
out-arborescence from the root (Chu-Liu/Edmonds; an in-tree is an out-tree of the
transposed costs). A tree whose price is below 1 improves the LP; none means the LP is
optimal. By Edmonds' branching theorem, when ranks may relay directly the optimum is the
least root-to-rank max flow, the bound of ``syncplan.planner.bound_rooted``.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from syncplan.core.errors import InfeasibleError
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing import RankRoutes, min_arborescence

ROUNDS = 60  # column-generation rounds at most
TOLERANCE = 1e-6  # a tree must price below 1 - TOLERANCE to enter
Path = tuple[str, ...]


def _tree(
    ctx: PlanContext, routes: RankRoutes, price: np.ndarray, root: int, inward: bool
) -> tuple[np.ndarray, list[Path | None], np.ndarray]:
    """The cheapest tree under ``price``: (parent array, per-rank edge paths, arc counts)."""
    cost, pred = routes.solve(price)  # inf: no route that avoids other ranks
    parent = min_arborescence(cost.T if inward else cost, root)
    use = np.zeros(len(ctx.router.bw))
    paths: list[Path | None] = [None] * len(parent)
    for v, up in enumerate(parent.tolist()):
        if up < 0:
            continue
        path = routes.path(pred, v, up) if inward else routes.path(pred, up, v)
        paths[v] = path
        np.add.at(use, ctx.router.arcs(path), 1.0)
    return parent, paths, use


def pack_trees(
    ctx: PlanContext, root: int, inward: bool
) -> list[tuple[np.ndarray, list[Path | None], float]]:
    """Trees with positive rate (bytes/s) of the LP above: (parent array, paths, rate)."""
    memo_key = f"rooted_packing:{root}:{inward}"
    if memo_key in ctx.memo:
        return ctx.memo[memo_key]
    routes = RankRoutes(ctx)
    scale = float(ctx.router.bw.max())
    cap = ctx.router.bw / scale
    price = np.zeros(len(cap))
    trees: list[tuple[np.ndarray, list[Path | None]]] = []
    cols: list[np.ndarray] = []
    seen: set[bytes] = set()
    x = np.zeros(0)
    for _ in range(ROUNDS):
        parent, paths, use = _tree(ctx, routes, price, root, inward)
        if cols and float(price @ use) >= 1 - TOLERANCE:
            break
        key = parent.tobytes() + use.tobytes()
        if key in seen:
            break
        seen.add(key)
        trees.append((parent, paths))
        cols.append(use)
        res = linprog(
            -np.ones(len(cols)),
            A_ub=np.column_stack(cols),
            b_ub=cap,
            bounds=(0, None),
            method="highs",
        )
        if res.status != 0:
            raise InfeasibleError(f"packing: the tree LP failed ({res.message})")
        x = res.x
        price = np.maximum(-res.ineqlin.marginals, 0.0)
    out = [
        (parent, paths, float(rate) * scale)
        for (parent, paths), rate in zip(trees, x, strict=True)
        if rate > 1e-9 * max(float(x.sum()), 1e-300)
    ]
    ctx.memo[memo_key] = out
    return out
