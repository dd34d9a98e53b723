"""Tree packings priced step by step: shares that load every step of a one-piece program evenly.

A tree packing run as one piece (``packing_schedule``) takes H_in + H_out lockstep steps: a
rank at depth k of an in-tree sends at step H_in - k, and one at depth k of an out-tree hears
at step H_in + k - 1. Its bandwidth time is the sum over steps of the step's busiest arc, not
the busiest arc over all steps (the fluid time of ``packing``): where the trees load each step
evenly the two are equal and one piece costs no pipeline fill at all (a ring's chains on a
ring, translated shortest-path trees on a torus), so the program takes the fluid time plus
H_in + H_out latencies. This LP finds such packings on any graph:

    min sum_s u_s   s.t.  sum_T x_T use_T(a, s) / bw_a <= u_s   (every arc a, step s)
                          sum_{in-trees of r} x = sum_{out-trees of r} z;  sum x = 1

by column generation: the dual of row (a, s) prices arc a at step s, so the price of a tree
edge depends on the depth it joins the tree at, and the pricing grows every root's trees
greedily (``layered_trees``) with those depth-dependent prices. Heights are capped at H (each
rank at most its hop distance from the root plus a slack), the same for every tree.
"""

from __future__ import annotations

import numpy as np

from planner.algorithms.arborescence import layered_trees, tree_depths
from planner.algorithms.base import PlanContext
from planner.algorithms.packing import (
    Packing,
    QuickRoutes,
    RankRoutes,
    TreeColumn,
    _column,
    hop_distances,
)
from planner.algorithms.packing_master import Master

ROUNDS = 30  # column-generation rounds
TOLERANCE = 1e-3  # relative reduced cost below which the LP counts as solved
MAX_ROWS = 40_000  # arcs x steps of the master LP; above: no step-priced packing
ABANDON_AFTER = 10  # rounds after which an LP still ABANDON_ABOVE x slower than the best
ABANDON_ABOVE = 1.15  # program stops (those that won were within 1.09x there; losers 1.17-1.56x)


class WindowLP:
    """Column generation of one-piece packings whose trees are at most ``height`` deep."""

    def __init__(self, ctx: PlanContext, routes: RankRoutes | QuickRoutes, slack: int,
                 start: list[TreeColumn]) -> None:
        self.ctx = ctx
        self.routes = routes
        self.n = len(ctx.ranks)
        self.bw = ctx.router.bw
        cost, _ = routes.solve(1.0 / self.bw)
        hops = hop_distances(cost)
        self.limits = (np.minimum(hops.T + slack, self.n - 1),
                       np.minimum(hops + slack, self.n - 1))
        self.height = int(min(self.limits[1].max(), self.n - 1))
        self.trees: list[TreeColumn] = []
        self._seen: set[bytes] = set()
        self.master = Master(self.bw, self.n, primal=True, steps=2 * self.height)
        for col in start:
            if col.height <= self.height:
                self._add(col)

    def _add(self, col: TreeColumn) -> bool:
        key = (b"i" if col.inward else b"o") + col.parent.tobytes() + b"".join(
            "|".join(p).encode() for p in col.paths)
        if key in self._seen:
            return False
        self._seen.add(key)
        self.trees.append(col)
        self.master.add(col.arcs, col.root, col.inward, self._steps(col))
        return True

    def _steps(self, col: TreeColumn) -> np.ndarray:
        """The step of every crossing of ``col`` (aligned with ``col.arcs``)."""
        h = self.height
        out = []
        for v, path in enumerate(col.paths):
            if path:
                k = int(col.depth[v])
                out.extend([h - k if col.inward else h + k - 1]
                           * len(self.ctx.router.arcs(path)))
        return np.asarray(out, dtype=np.int64)

    def _master(self) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        """(bandwidth time per byte, the same in the LP's units, shares, prices per (step,
        arc) crossing, root and total duals)."""
        return self.master.solve()

    def _price(self, prices: np.ndarray, duals: np.ndarray, threshold: float
               ) -> list[TreeColumn]:
        n, h = self.n, self.height
        costs, preds = zip(*(self.routes.solve(w) for w in prices), strict=True)
        cost = np.stack(costs)  # (steps, u, v): the cheapest route u -> v at that step
        # an in-tree's edge into depth k is sent at step h - k; an out-tree's at h + k - 1
        step_in = np.concatenate([[0], h - np.arange(1, h + 1)])
        step_out = np.concatenate([[0], h + np.arange(1, h + 1) - 1])
        parents_in = layered_trees(cost.transpose(0, 2, 1), step_in, self.limits[0])
        parents_out = layered_trees(cost, step_out, self.limits[1])
        out = []
        cache: dict = {}
        for r in range(n):
            for inward, parents, steps in ((True, parents_in, step_in),
                                           (False, parents_out, step_out)):
                par = parents[r]
                if isinstance(self.routes, QuickRoutes):  # one route per pair at every step
                    col = _column(self.routes, self.ctx.router, None, par, r, inward, cache)
                else:
                    col = _layered_column(self.routes, self.ctx.router, preds, par, r,
                                          inward, steps)
                red = float(prices[self._steps(col), col.arcs].sum())
                red += -duals[r] - duals[n] if inward else duals[r]
                if red < -threshold:
                    out.append(col)
        return out

    def solve(self, rounds: int = ROUNDS, beat: float = np.inf) -> Packing | None:
        """The LP over the start trees and those priced in; None where it is too large, or
        where after ABANDON_AFTER rounds its bandwidth time per byte is still ABANDON_ABOVE
        times ``beat`` (the best program found by other means, per byte of buffer): the LP's
        value only falls, but one so far behind had not caught up on the families measured
        (a heuristic that saves most of the LP's time where it cannot win: fat trees)."""
        if not self.trees or 2 * self.height * len(self.bw) > MAX_ROWS:
            return None
        theta, obj, share, prices, duals = self._master()
        for k in range(rounds):
            if k >= ABANDON_AFTER and theta > beat * ABANDON_ABOVE:
                return None
            cols = self._price(prices, duals, TOLERANCE * obj)
            if not sum(self._add(c) for c in cols):
                break
            theta, obj, share, prices, duals = self._master()
        live = share > 1e-12
        return Packing([t for t, x in zip(self.trees, live, strict=True) if x], share[live],
                       theta, prices.max(axis=0))


def _layered_column(routes: RankRoutes, router, preds: tuple, parent: np.ndarray, root: int,
                    inward: bool, steps: np.ndarray) -> TreeColumn:
    """A tree column whose edges follow the cheapest routes at the step each edge runs."""
    depth = tree_depths(parent)
    paths, arcs = [], []
    for v, p in enumerate(parent):
        if p < 0:
            paths.append(())
            continue
        a, b = (v, int(p)) if inward else (int(p), v)
        path = routes.path(preds[int(steps[depth[v]])], a, b)
        paths.append(path)
        arcs.extend(router.arcs(path))
    return TreeColumn(inward, root, parent, paths, np.asarray(arcs, dtype=np.int64), depth)
