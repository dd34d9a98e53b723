"""Tree packings priced step by step: shares that load every step of a one-piece program evenly.

A tree packing run as one piece (``packing.schedule``) takes H_in + H_out lockstep steps: a
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

With P pieces (``pieced_window``) a column is a tree and the piece p it runs in, shifted by
p steps (2 H + P - 1 steps in all), and the root rows are per (root, piece): each piece has
trees and shares of its own, so early pieces can load the arcs the fill leaves idle where
no one-piece tree set balances the steps (a degraded cube mesh: 1.087x the bound with one
piece, 1.008x with four).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from syncplan.core.errors import InfeasibleError
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.arborescence import layered_trees_costed, tree_depths
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn, tree_column
from syncplan.planner.algorithms.packing.master import Master
from syncplan.planner.algorithms.packing.routes import Path, QuickRoutes, RankRoutes, hop_distances
from syncplan.planner.algorithms.packing.settings import PACKING


class WindowLP:
    """Column generation of step-priced packings of ``pieces`` pieces (1: one piece) whose
    trees are at most ``height`` deep."""

    def __init__(
        self,
        ctx: PlanContext,
        routes: RankRoutes | QuickRoutes,
        slack: int,
        start: list[TreeColumn],
        pieces: int = 1,
        start_pieces: list[list[int]] | None = None,
    ) -> None:
        """``start``: trees to start from, each in every piece or, with ``start_pieces``,
        in the pieces listed for it."""
        self.ctx = ctx
        self.routes = routes
        self.n = len(ctx.ranks)
        self.bw = ctx.router.bw
        cost, _ = routes.solve(1.0 / self.bw)
        hops = hop_distances(cost)
        self.limits = (np.minimum(hops.T + slack, self.n - 1), np.minimum(hops + slack, self.n - 1))
        self.height = int(min(self.limits[1].max(), self.n - 1))
        self.pieces = pieces
        self.steps = 2 * self.height + pieces - 1
        self.price_roots: Sequence[int] = range(self.n)  # the roots whose trees are priced
        self.trees: list[TreeColumn] = []
        self.offsets: list[int] = []
        self.keys: list[bytes] = []
        self.idle: list[int] = []
        self.live_offsets = np.zeros(0, dtype=np.int64)  # piece of each tree of the solution
        self.values: list[float] = []
        self.round_cap: int | None = None  # new columns a round (the most negative), or all
        self.seen_keys: set[bytes] = set()
        self.master = Master(self.bw, self.n * pieces, primal=True, steps=self.steps)
        self.add_start(start, start_pieces)

    def add_start(self, start: list[TreeColumn], start_pieces: list[list[int]] | None) -> None:
        """The start trees no deeper than the LP's height, each in every piece or in the
        pieces ``start_pieces`` lists for it."""
        every = list(range(self.pieces))
        self.add_all(
            [
                (col, p)
                for j, col in enumerate(start)
                if col.height <= self.height
                for p in (every if start_pieces is None else start_pieces[j])
            ]
        )

    def add_all(self, cols: list[tuple[TreeColumn, int]]) -> int:
        """The (tree, piece) columns the LP does not have yet, into the master in one call
        (the same LP as one call each); how many."""
        new = []
        for col, piece in cols:
            col, piece = self.canonical_column(col, piece)
            key = (
                (b"i" if col.inward else b"o")
                + bytes([piece % 256, piece // 256])
                + col.parent.tobytes()
                + b"".join("|".join(p).encode() for p in col.paths)
            )
            if key in self.seen_keys:
                continue
            self.seen_keys.add(key)
            self.trees.append(col)
            self.offsets.append(piece)
            self.keys.append(key)
            self.idle.append(0)
            new.append((col, piece))
        self.add_columns(new)
        return len(new)

    def canonical_column(self, col: TreeColumn, piece: int) -> tuple[TreeColumn, int]:
        """The column the LP keeps for ``col`` in ``piece`` (itself)."""
        return col, piece

    def add_columns(self, cols: list[tuple[TreeColumn, int]]) -> None:
        """The (tree, piece) columns, into the master in one call."""
        self.master.add_trees(
            [(c.arcs, p * self.n + c.root, c.inward) for c, p in cols],
            [self.column_steps(c, p) for c, p in cols],
        )

    def column_steps(self, col: TreeColumn, piece: int = 0) -> np.ndarray:
        """The step of every crossing of ``col`` run as ``piece`` (aligned with
        ``col.arcs``)."""
        h = self.height
        out = []
        for v, path in enumerate(col.paths):
            if path:
                k = int(col.depth[v])
                out.extend(
                    [piece + (h - k if col.inward else h + k - 1)] * len(self.ctx.router.arcs(path))
                )
        return np.asarray(out, dtype=np.int64)

    def prune_idle(self, share: np.ndarray) -> bool:
        """With pieces, drop the columns that carried no share for
        PACKING.window_keep_idle_rounds solves once there are more than
        PACKING.window_prune_above per root and piece (they may be priced in again): the degenerate
        master's simplex slows with every idle column. Whether any went (the shares must then be
        solved again)."""
        self.idle = [0 if x > 1e-12 else k + 1 for x, k in zip(share, self.idle, strict=True)]
        if self.pieces == 1 or len(self.trees) <= PACKING.window_prune_above * self.n * self.pieces:
            return False
        drop = [j for j, k in enumerate(self.idle) if k >= PACKING.window_keep_idle_rounds]
        if drop:
            gone = set(drop)
            self.seen_keys.difference_update(self.keys[j] for j in drop)
            self.master.delete(drop)
            for name in ("trees", "offsets", "keys", "idle"):
                setattr(self, name, [x for j, x in enumerate(getattr(self, name)) if j not in gone])
        return bool(drop)

    def solve_master(
        self, budget: Budget
    ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        """The master within ``budget``: (bandwidth time per byte, the same in the LP's
        units, shares, prices per (step, arc) crossing, root and total duals);
        InfeasibleError where HiGHS gives up or the solve would exceed the budget."""
        nonzeros = self.master.nonzeros()
        if np.isfinite(budget.left):
            self.master.limit_iterations(max(1, int(budget.left // nonzeros)))
        try:
            return self.master.solve()
        finally:
            budget.left -= self.master.iterations() * nonzeros
            if self.master.at_limit():
                budget.left = min(budget.left, 0.0)  # spent: the solve stopped at the limit

    def price_columns(
        self, prices: np.ndarray, duals: np.ndarray, threshold: float
    ) -> list[tuple[TreeColumn, int]]:
        """Every root's and piece's priced in- and out-tree whose reduced cost is below
        ``-threshold``, with its piece."""
        n, h = self.n, self.height
        costs, preds = zip(*(self.routes.solve(w) for w in prices), strict=True)
        cost = np.stack(costs)  # (steps, u, v): the cheapest route u -> v at that step
        out = []
        cache: dict = {}
        total = duals[n * self.pieces]
        # the most the routes' tie-breaks (``RankRoutes.solve``) can add to a tree's cost:
        # n - 1 routes of at most every arc, each weighted price_tie x physical cost x scale
        phys = self.routes.physical
        scale = max(float(prices.max()), 1.0 / float(phys.max()))
        ties = 2 * PACKING.price_tie * scale * float(phys.sum()) * (n - 1) + 1e-12 * (
            abs(threshold) + 1
        )
        # an in-tree's edge into depth k of piece p is sent at step p + h - k; an
        # out-tree's at p + h + k - 1 (every piece's trees grown at once)
        piece = np.arange(self.pieces)[:, None]
        steps_in = piece + np.concatenate([[0], h - np.arange(1, h + 1)])
        steps_out = piece + np.concatenate([[0], h + np.arange(1, h + 1) - 1])
        all_in, all_cost_in = layered_trees_costed(
            cost.transpose(0, 2, 1), steps_in, self.limits[0]
        )
        all_out, all_cost_out = layered_trees_costed(cost, steps_out, self.limits[1])
        for p in range(self.pieces):
            step_in, step_out = steps_in[p], steps_out[p]
            parents_in, cost_in = all_in[p], all_cost_in[p]
            parents_out, cost_out = all_out[p], all_cost_out[p]
            duals_p = duals[p * n : (p + 1) * n]
            # the trees' costs as layered_trees summed them, over the routes' prices plus
            # their tie-breaks: a column is built (and its reduced cost summed over its arcs,
            # as before) only where this one, less at most ``ties``, prices in
            near_in = cost_in - duals_p - total < -threshold + ties
            near_out = cost_out + duals_p < -threshold + ties
            for r in self.price_roots:
                for inward, parents, steps, near in (
                    (True, parents_in, step_in, near_in),
                    (False, parents_out, step_out, near_out),
                ):
                    if not near[r]:
                        continue
                    par = parents[r]
                    if isinstance(self.routes, QuickRoutes):  # one route per pair, any step
                        col = tree_column(self.routes, self.ctx.router, None, par, r, inward, cache)
                    else:
                        col = layered_column(
                            self.routes, self.ctx.router, preds, par, r, inward, steps
                        )
                    red = float(prices[self.column_steps(col, p), col.arcs].sum())
                    dual = duals[p * n + r]
                    red += -dual - total if inward else dual
                    if red < -threshold:
                        out.append((red, col, p))
        return self.keep_columns(out)

    def keep_columns(
        self, priced: list[tuple[float, TreeColumn, int]]
    ) -> list[tuple[TreeColumn, int]]:
        """The (tree, piece) columns of ``priced`` (reduced cost, tree, piece) that enter:
        all, in order, or the ``round_cap`` of least reduced cost (a 64-piece master's simplex
        slows with every column it holds)."""
        if self.round_cap is not None and len(priced) > self.round_cap:
            order = sorted(range(len(priced)), key=lambda j: priced[j][0])[: self.round_cap]
            priced = [priced[j] for j in sorted(order)]
        return [(col, p) for _, col, p in priced]

    def solve(
        self,
        rounds: int = PACKING.window_rounds,
        beat: float = np.inf,
        floor: float = 0.0,
        max_columns: int | None = None,
        budget: Budget | None = None,
    ) -> Packing | None:
        """The LP over the start trees and those priced in; None where it is too large, or
        where after PACKING.abandon_after rounds its bandwidth time per byte is still
        PACKING.abandon_above times ``beat`` (the best program found by other means, per byte of
        buffer): the LP's value only falls, but one so far behind had not caught up on the families
        measured
        (a heuristic that saves most of the LP's time where it cannot win: fat trees).
        Column generation also stops once the LP is within ``floor`` seconds per byte (it
        cannot go below the fluid floor), holds more than ``max_columns`` trees, or has spent
        ``budget`` (simplex iterations times the master's nonzeros, summed over its solves:
        the LP's work, a count that does not depend on the machine, so plans repeat)."""
        if not self.trees or self.steps * len(self.bw) > PACKING.window_max_rows:
            return None
        try:
            return self._generate(
                rounds, beat, floor, max_columns or 1 << 62, budget or Budget(np.inf)
            )
        except InfeasibleError:  # HiGHS stopped without an optimum (seen on 16 pieces)
            return None

    def abandoned(self, beat: float) -> bool:
        """Whether the last ``solve`` would have returned None with ``beat`` at most the one
        it ran with (the rounds before the abandon rule fires do not depend on ``beat``)."""
        return any(
            theta > beat * PACKING.abandon_above for theta in self.values[PACKING.abandon_after :]
        )

    def _generate(
        self, rounds: int, beat: float, floor: float, max_columns: int, budget: Budget
    ) -> Packing | None:
        theta, obj, share, prices, duals = self.solve_master(budget)
        self.values = []  # the LP's value at the start of every round (``abandoned``)
        for k in range(rounds):
            self.values.append(theta)
            if k >= PACKING.abandon_after and theta > beat * PACKING.abandon_above:
                return None
            if (
                theta <= floor
                or len(self.trees) > max_columns
                or budget.left <= 0
                or budget.expired()
            ):
                break
            cols = self.price_columns(prices, duals, PACKING.tolerance * obj)
            if not cols:
                break
            # the last optimum, kept where the budget ends the next solve (a 64-rank directed
            # ring's first solve is 1.01x the floor; its second did not fit the budget)
            last = (list(self.trees), list(self.offsets), theta, share, prices)
            pruned = self.prune_idle(share)
            added = self.add_all(cols)
            if not added and not pruned:
                break
            try:
                theta, obj, share, prices, duals = self.solve_master(budget)  # shares match columns
            except InfeasibleError:
                if budget.left > 0:
                    raise
                return self.make_packing(*last)
            if not added:
                break
        return self.make_packing(self.trees, self.offsets, theta, share, prices)

    def program_trees(self, found: Packing) -> tuple[Packing, np.ndarray]:
        """The trees a program of ``found`` (this LP's last solution) runs, and their pieces
        (``OrbitWindowLP``: every tree's copies)."""
        return found, self.live_offsets

    def make_packing(
        self,
        trees: list[TreeColumn],
        offsets: list[int],
        theta: float,
        share: np.ndarray,
        prices: np.ndarray,
    ) -> Packing:
        """The solution's trees with share (and their pieces in ``live_offsets``)."""
        live = share > 1e-12
        self.live_offsets = np.asarray(offsets)[live]
        return Packing(
            [t for t, x in zip(trees, live, strict=True) if x],
            share[live],
            theta,
            prices.max(axis=0),
        )


def layered_column(
    routes: RankRoutes,
    router,
    preds: tuple,
    parent: np.ndarray,
    root: int,
    inward: bool,
    steps: np.ndarray,
) -> TreeColumn:
    """A tree column whose edges follow the cheapest routes at the step each edge runs."""
    depth = tree_depths(parent)
    paths: list[Path] = []
    arcs: list[int] = []
    for v, p in enumerate(parent):
        if p < 0:
            paths.append(())
            continue
        a, b = (v, int(p)) if inward else (int(p), v)
        path = routes.path(preds[int(steps[depth[v]])], a, b)
        paths.append(path)
        arcs.extend(router.arcs(path))
    return TreeColumn(inward, root, parent, paths, np.asarray(arcs, dtype=np.int64), depth)


@dataclass
class Budget:
    """Simplex iterations times master nonzeros the pieced LPs of one plan may still spend,
    and a wall-clock deadline (``time.monotonic``; none by default, so plans repeat) after
    which no LP round or piece count starts: a safety net for effort thorough, whose
    pricing the work count leaves out."""

    left: float
    deadline: float = math.inf

    def expired(self) -> bool:
        return self.deadline < math.inf and time.monotonic() > self.deadline
