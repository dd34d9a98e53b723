"""The pieced step-priced LP reduced by time reversal (``ReversedLP``).

Where every arc has a reverse arc of the same bandwidth (every full-duplex topology), time
reversal maps the pieced LP of ``packing.window`` to itself: an in-tree T in piece p sends
a rank's edge at depth k at step p + H - k, and T reversed, as an out-tree in piece
P - 1 - p, sends it at step S - 1 - (p + H - k) on the reversed arc (S = 2 H + P - 1
steps). The LP is convex, so it has a time-symmetric optimum, and this LP finds it over
in-trees only: each column stands for itself and its reversed out-tree; the load rows are
per pair {(s, a), (S - 1 - s, reverse of a)}, the root rows read in(r, q) - in(r, P - 1 - q)
= 0 for q < P / 2, and the time columns are per pair of steps (weight 2; 1 for a middle
step, whose arcs pair with their reverses). Its master is half the full one's in rows and
columns; it prices in-trees only. Used by ``forest``'s thorough effort (docs/planner.md,
"Effort").
"""

from __future__ import annotations

import highspy
import numpy as np
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing import window as pw
from syncplan.planner.algorithms.packing.arborescence import layered_trees_costed
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn, tree_column
from syncplan.planner.algorithms.packing.master import Master
from syncplan.planner.algorithms.packing.routes import Path, QuickRoutes, RankRoutes


def reverse_arcs(ctx: PlanContext) -> np.ndarray | None:
    """Per arc id, the id of its reverse arc, or None where some arc has no reverse of the
    same bandwidth (a directed link): time reversal is then no symmetry of the LP."""
    router = ctx.router
    name = {k: arc for arc, k in router.arc_id.items()}
    rev = np.empty(len(router.bw), dtype=np.int64)
    for a in range(len(router.bw)):
        back = router.arc_id.get((name[a][1], name[a][0]))
        if back is None or not np.isclose(router.bw[back], router.bw[a]):
            return None
        rev[a] = back
    return rev


class ReversedLP(pw.WindowLP):
    """``WindowLP`` with pieces, over the orbits of time reversal (see the module text);
    ValueError where the topology has no reversal symmetry (``reverse_arcs``)."""

    def __init__(
        self,
        ctx: PlanContext,
        routes: RankRoutes | QuickRoutes,
        slack: int,
        start: list[TreeColumn],
        pieces: int = 1,
        start_pieces: list[list[int]] | None = None,
    ) -> None:
        super().__init__(ctx, routes, slack, [], pieces)
        rev = reverse_arcs(ctx)
        if rev is None:
            raise ValueError("time reversal needs every link at one bandwidth both ways")
        self.rev = rev
        groups = (self.steps + 1) // 2
        self.master = Master(self.bw, self.n * (pieces // 2), primal=True, steps=groups)
        self.weight = np.full(groups, 2.0)
        if self.steps % 2:
            self.weight[-1] = 1.0  # the middle step pairs with itself
        for s in range(groups):
            self.master.h.changeColCost(s, float(self.weight[s]))
        self.add_start(start, start_pieces)

    def _reversed(self, col: TreeColumn, inward: bool) -> TreeColumn:
        paths = [tuple(reversed(p)) if p else () for p in col.paths]
        arcs = [a for p in paths if p for a in self.ctx.router.arcs(p)]
        return TreeColumn(
            inward, col.root, col.parent, paths, np.asarray(arcs, dtype=np.int64), col.depth
        )

    def canonical_column(self, col: TreeColumn, piece: int) -> tuple[TreeColumn, int]:
        """Out-trees enter as the in-trees they reverse, in the mirrored piece."""
        if col.inward:
            return col, piece
        return self._reversed(col, True), self.pieces - 1 - piece

    def add_columns(self, cols: list[tuple[TreeColumn, int]]) -> None:
        m, last, n = self.master, self.steps - 1, self.n
        for col, p in cols:
            step = self.column_steps(col, p)
            low, high = step < last - step, step > last - step
            steps = np.where(low, step, last - step)
            arcs = np.where(high, self.rev[col.arcs], col.arcs)
            mid = ~low & ~high  # a middle step's crossing loads both arcs of its pair
            steps = np.concatenate([steps, step[mid]])
            arcs = np.concatenate([arcs, self.rev[col.arcs[mid]]])
            ids, inv = np.unique(steps * m.narcs + arcs, return_inverse=True)
            idx = list(ids)
            val = list(np.bincount(inv) * (m.scale / m.bw[ids % m.narcs]))
            if p != self.pieces - 1 - p:
                q = min(p, self.pieces - 1 - p)
                idx.append(m.load_rows + q * n + col.root)
                val.append(1.0 if p == q else -1.0)
            idx.append(m.load_rows + m.n)
            val.append(1.0)
            m.h.addCol(
                0.0,
                0.0,
                highspy.kHighsInf,
                len(idx),
                np.asarray(idx, dtype=np.int32),
                np.asarray(val, dtype=float),
            )
            m.cols += 1
            m.col_nnz.append(len(idx))

    def solve_master(
        self, budget: pw.Budget
    ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        """The weighted objective, prices per (step, arc) and duals per (piece, root) of the
        full LP's time-symmetric optimum."""
        _, _, share, prices, duals = super().solve_master(budget)
        x = np.asarray(self.master.h.getSolution().col_value)[: len(self.weight)]
        obj = float((x * self.weight).sum())
        last, n, pieces = self.steps - 1, self.n, self.pieces
        full = np.zeros((self.steps, len(self.bw)))
        for s in range(self.steps):
            q = min(s, last - s)
            full[s] = (
                prices[q]
                if s < last - s
                else prices[q][self.rev]
                if s > last - s
                else prices[q] + prices[q][self.rev]
            )
        root = np.zeros(pieces * n + 1)
        for p in range(pieces):
            q = min(p, pieces - 1 - p)
            if p != pieces - 1 - p:
                root[p * n : (p + 1) * n] = (1 if p == q else -1) * duals[q * n : (q + 1) * n]
        root[-1] = duals[-1]
        return obj / self.master.scale, obj, share, full, root

    def price_columns(
        self, prices: np.ndarray, duals: np.ndarray, threshold: float
    ) -> list[tuple[TreeColumn, int]]:
        """In-trees of every root and piece whose reduced cost is below ``-threshold`` (the
        ``round_cap`` most negative)."""
        n, h = self.n, self.height
        costs, preds = zip(*(self.routes.solve(w) for w in prices), strict=True)
        total = duals[n * self.pieces]
        steps_in = np.arange(self.pieces)[:, None] + np.concatenate([[0], h - np.arange(1, h + 1)])
        parents, tree_cost = layered_trees_costed(
            np.stack(costs).transpose(0, 2, 1), steps_in, self.limits[0]
        )
        out: list[tuple[float, TreeColumn, int]] = []
        cache: dict[int, tuple[Path, list[int]]] = {}
        for p in range(self.pieces):
            for r in range(n):
                if tree_cost[p][r] - duals[p * n + r] - total >= -threshold:
                    continue
                if isinstance(self.routes, QuickRoutes):
                    col = tree_column(
                        self.routes, self.ctx.router, None, parents[p][r], r, True, cache
                    )
                else:
                    col = pw.layered_column(
                        self.routes, self.ctx.router, preds, parents[p][r], r, True, steps_in[p]
                    )
                red = float(prices[self.column_steps(col, p), col.arcs].sum())
                red -= duals[p * n + r] + total
                if red < -threshold:
                    out.append((red, col, p))
        return self.keep_columns(out)

    def program_trees(self, found: Packing) -> tuple[Packing, np.ndarray]:
        """Every in-tree and its reversed out-tree in the mirrored piece."""
        trees, shares, pieces = [], [], []
        for t, x, p in zip(found.trees, found.share, self.live_offsets.tolist(), strict=True):
            trees += [t, self._reversed(t, False)]
            shares += [x, x]
            pieces += [p, self.pieces - 1 - p]
        return Packing(trees, np.array(shares), found.theta, found.prices), np.array(pieces)
