"""Tree packing on any topology: a linear program over reduce and broadcast trees of ranks.

Every share of the buffer is reduced along an in-tree of ranks towards a root and broadcast
along an out-tree from the same root; a tree edge is a routed path whose inner nodes only
forward (switches, NICs, PCIe switches, CPUs: never another rank). The fluid time of a
packing is its busiest arc's bytes over its bandwidth. The LP

    min theta  s.t.  sum_T x_T use_T(a) / bw_a <= theta   (every arc a)
                     sum_{in-trees of r} x = sum_{out-trees of r} z   (every root r)
                     sum x = 1,  x, z >= 0

is solved by column generation (HiGHS): the duals price every arc, an edge u -> v costs the
cheapest route from u to v under those prices, and the pricing step adds, for every root, the
cheapest in-tree and out-tree it can find (greedily). Trees are depth-limited (each rank at
most a slack deeper than its hop distance from the root) so the pipeline's fill stays short.
The duals of the unlimited packing, with exact minimum arborescences (Chu-Liu/Edmonds), give a
lower bound on the fluid time of
every reduce-then-broadcast program (``fluid_lower_bound``): for prices y >= 0 with
sum y = 1, every program's time per byte is at least min over roots of (cheapest in-tree +
cheapest out-tree), because the price-weighted loads of any packing are a mixture of its
trees' prices and no arc's load exceeds theta times its bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.arborescence import (
    min_arborescence,
    shallow_trees,
    tree_depths,
)
from syncplan.planner.algorithms.packing.master import Master
from syncplan.planner.algorithms.packing.routes import (
    Path,
    QuickRoutes,
    RankRoutes,
    hop_distances,
)
from syncplan.planner.algorithms.packing.settings import PACKING


@dataclass
class TreeColumn:
    """One reduce (``inward``) or broadcast tree of rank indices, with its routed edges."""

    inward: bool
    root: int
    parent: np.ndarray  # per rank: parent rank, -1 at the root
    paths: list[Path]  # per rank (the root: ()), child -> parent when inward, else parent -> child
    arcs: np.ndarray  # arc ids crossed, one entry per crossing
    depth: np.ndarray

    @property
    def height(self) -> int:
        return int(self.depth.max())


@dataclass
class Packing:
    """An LP solution: trees and their shares (summing to 1 per direction), the fluid time per
    byte of buffer, and the arc prices of the last pricing."""

    trees: list[TreeColumn]
    share: np.ndarray
    theta: float
    prices: np.ndarray
    pool: list[TreeColumn] = field(default_factory=list)  # every column of the last LP


def tree_column(
    routes: RankRoutes | QuickRoutes,
    router,
    pred: list[list[int]] | None,
    parent: np.ndarray,
    root: int,
    inward: bool,
    cache: dict[int, tuple[Path, list[int]]],
) -> TreeColumn:
    """The tree of ``parent`` with its edges routed along ``pred`` (``cache``: one dict per
    set of routes, shared by the trees built on it)."""
    n = len(parent)
    kids = np.flatnonzero(parent >= 0)
    ends = parent[kids]
    tails, heads = (kids, ends) if inward else (ends, kids)
    paths: list[Path] = [()] * n
    arcs: list[int] = []
    extend = arcs.extend
    get = cache.get
    # QuickRoutes: one route per pair; RankRoutes: along the predecessors of its ``solve``
    route: Callable[[int, int], Path]
    if isinstance(routes, QuickRoutes):
        route = partial(routes.path, None)
    else:
        assert pred is not None, "RankRoutes route along the predecessors of their solve"
        route = partial(routes.path, pred)
    for v, a, b in zip(kids.tolist(), tails.tolist(), heads.tolist(), strict=True):
        hit = get(a * n + b)
        if hit is None:
            path = route(a, b)
            hit = cache[a * n + b] = (path, router.arcs(path))
        paths[v] = hit[0]
        extend(hit[1])
    return TreeColumn(
        inward, root, parent, paths, np.asarray(arcs, dtype=np.int64), tree_depths(parent)
    )


def _tree_costs(cost: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """Per row of ``parents`` (an out-tree's parent array), the sum of its edges' costs."""
    kids = parents >= 0
    rows, child = np.nonzero(kids)
    out = np.zeros(len(parents))
    np.add.at(out, rows, cost[parents[kids], child])
    return out


class PackingLP:
    """Column generation over depth-limited trees (``slack``: extra depth over each rank's hop
    distance from the root; None: no limit). It stops when no tree prices below -PACKING.tolerance,
    after ``rounds`` rounds, when the fluid time is within PACKING.floor_gap of ``floor`` (a lower
    bound), or (optionally) after a stall: on degenerate LPs (full meshes) the duals keep
    pricing trees in long after the optimum is reached."""

    def __init__(
        self,
        ctx: PlanContext,
        slack: int | None,
        routes: RankRoutes | QuickRoutes | None = None,
        start: list[TreeColumn] | None = None,
        floor: float = 0.0,
    ) -> None:
        self.ctx = ctx
        self.floor = floor  # s/byte no packing beats (the cut bound): meeting it ends the LP
        self.slack = slack
        self.routes = routes or RankRoutes(ctx)
        self.router = ctx.router
        self.bw = ctx.router.bw
        self.n = len(ctx.ranks)
        self.trees: list[TreeColumn] = []
        self.seen_keys: set[tuple[bool, bytes]] = set()
        self.limits: tuple[np.ndarray, np.ndarray] | None = None  # (in-trees, out-trees)
        self.idle: list[int] = []  # per column: rounds in a row without share
        self.keys: list[tuple[bool, bytes]] = []
        self.master = Master(self.bw, self.n, primal=self.n > PACKING.primal_above)
        self._add(list(start or ()))  # trees of a smaller slack fit this one's limits too

    def price_columns(
        self, price: np.ndarray, duals: np.ndarray | None = None, threshold: float = 0.0
    ) -> list[TreeColumn]:
        """Every root's cheapest in-tree and out-tree it finds under ``price``; with
        ``duals`` (root rows, then the total row), only those whose reduced cost is below
        ``-threshold``."""
        cost, pred = self.routes.solve(price)
        n = self.n
        if self.limits is None:
            hops = hop_distances(cost)
            slack = n if self.slack is None else self.slack
            # a node of an out-tree of r sits at most ``slack`` deeper than its hops from r
            self.limits = (np.minimum(hops.T + slack, n - 1), np.minimum(hops + slack, n - 1))
        parents_in = shallow_trees(cost.T, self.limits[0])
        parents_out = shallow_trees(cost, self.limits[1])

        def reduced(
            p_in: np.ndarray, p_out: np.ndarray, duals: np.ndarray
        ) -> tuple[np.ndarray, np.ndarray]:
            """Reduced costs of every root's in- and out-tree (rows of the parent arrays)."""
            return (
                _tree_costs(cost.T, p_in) - duals[:n] - duals[n],
                _tree_costs(cost, p_out) + duals[:n],
            )

        if duals is None:
            red_in = red_out = np.full(n, -np.inf)
        else:
            red_in, red_out = reduced(parents_in, parents_out, duals)
        if (
            duals is not None
            and self.slack is None
            and n > PACKING.exact_pricing_above
            and (red_in >= -threshold).all()
            and (red_out >= -threshold).all()
        ):
            # the greedy trees are not the cheapest on directed graphs (Prim's rule is exact
            # for symmetric costs only): before the unlimited LP counts as solved, every
            # root's exact cheapest trees (a 24-rank directed cluster: 1.26x -> 1.00x the
            # cut; under depth limits they hardly ever fit, and cost 0.25 s a 61-rank LP)
            parents_in = np.stack([min_arborescence(cost.T, r) for r in range(n)])
            parents_out = np.stack([min_arborescence(cost, r) for r in range(n)])
            red_in, red_out = reduced(parents_in, parents_out, duals)
        cache: dict = {}
        cols = []
        for r in range(n):
            if red_in[r] < -threshold:
                cols.append(
                    tree_column(self.routes, self.router, pred, parents_in[r], r, True, cache)
                )
            if red_out[r] < -threshold:
                cols.append(
                    tree_column(self.routes, self.router, pred, parents_out[r], r, False, cache)
                )
        return cols

    def _add(self, cols: list[TreeColumn]) -> int:
        """Add the trees not in the LP yet (to the master in one call); how many."""
        new = []
        for col in cols:
            # the arcs, in rank order, fix the paths: each is a simple path from a rank to
            # its tree neighbour, so it ends where it first reaches that neighbour
            key = (
                col.inward,
                col.root.to_bytes(4, "little") + col.parent.tobytes() + col.arcs.tobytes(),
            )
            if key in self.seen_keys:
                continue
            self.seen_keys.add(key)
            self.trees.append(col)
            self.keys.append(key)
            self.idle.append(0)
            new.append((col.arcs, col.root, col.inward))
        self.master.add_trees(new)
        return len(new)

    def prune_idle(self, share: np.ndarray) -> None:
        """Drop columns that carried no share for PACKING.keep_idle_rounds solves (they may
        come back through pricing; the LP stays small)."""
        used = 1e-7 if self.master.interior else 1e-12  # interior optima: no exact zeros
        self.idle = [0 if x > used else k + 1 for x, k in zip(share, self.idle, strict=True)]
        if len(self.trees) <= PACKING.prune_above * self.n:
            return
        keep = [j for j, k in enumerate(self.idle) if k < PACKING.keep_idle_rounds]
        if len(keep) < len(self.trees):
            drop = [j for j in range(len(self.trees)) if self.idle[j] >= PACKING.keep_idle_rounds]
            self.seen_keys.difference_update(self.keys[j] for j in drop)
            self.master.delete(drop)
            self.trees = [self.trees[j] for j in keep]
            self.idle = [self.idle[j] for j in keep]
            self.keys = [self.keys[j] for j in keep]

    def _master(self) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Solve the LP over the current trees: (theta, shares, arc prices, root duals)."""
        theta, self.objective, share, prices, duals = self.master.solve()
        return theta, share, prices, duals

    def solve(self, rounds: int | None = None, stall: int | None = None) -> Packing:
        """Column generation: at most ``rounds`` rounds (default PACKING.max_rounds), and with
        ``stall``, no more once that many rounds in a row improved the fluid time by less
        than PACKING.tolerance (a heuristic: degenerate LPs sometimes improve after long flats)."""
        rounds = PACKING.max_rounds if rounds is None else rounds
        self._add(self.price_columns(1.0 / self.bw))
        theta, share, y, duals = self._master()
        history = [theta]
        for k in range(rounds):
            if (
                k == PACKING.interior_after
                and PACKING.interior_ranks[0] <= self.n <= PACKING.interior_ranks[1]
            ):
                self.master.go_interior()
            if y.sum() <= 0 or theta <= self.floor * (1 + PACKING.floor_gap):
                break
            if (
                stall
                and len(history) > stall
                and history[-1 - stall] - theta <= PACKING.tolerance * theta
            ):
                break
            cols = self.price_columns(y, duals, PACKING.tolerance * self.objective)
            if not cols:
                break
            self.prune_idle(share)
            if not self._add(cols):
                break
            theta, share, y, duals = self._master()
            history.append(theta)
        if self.master.interior:
            theta, self.objective, share, y, _ = self.master.vertex()
        live = share > 1e-12
        return Packing(
            [t for t, x in zip(self.trees, live, strict=True) if x],
            share[live],
            theta,
            y,
            list(self.trees),
        )


def fluid_lower_bound(ctx: PlanContext, prices: np.ndarray, useless: float = 0.0) -> float:
    """Time per byte that no reduce-then-broadcast program can beat (any routes, ranks may
    forward): min over roots of the cheapest in-tree plus out-tree under ``prices``, scaled so
    that the prices sum to one (see the module docstring). Where the caller has no use for a
    bound below ``useless``, the search stops once it is sure to end there and returns a
    value below it."""
    total = float((prices * ctx.router.bw).sum())
    if total <= 0 or len(ctx.ranks) < 2:
        return 0.0
    y = prices / total
    cost, _ = RankRoutes(ctx, through_ranks=True).solve(y, tie=False)
    # every non-root rank of an in-tree sends over one edge and of an out-tree receives over
    # one: the cheapest such edges bound a root's trees from below, so roots are taken in
    # that order and the rest skipped once the bound reaches the best trees found
    off = cost + np.diag(np.full(len(cost), np.inf))
    send, hear = off.min(axis=1), off.min(axis=0)
    floor = send.sum() - send + hear.sum() - hear
    best = np.inf
    for r in np.argsort(floor, kind="stable"):
        if floor[r] >= best:
            break
        p_in = min_arborescence(cost.T, r)
        p_out = min_arborescence(cost, r)
        kids = np.nonzero(p_in >= 0)[0]
        c_in = cost[kids, p_in[kids]].sum()
        kids = np.nonzero(p_out >= 0)[0]
        c_out = cost[p_out[kids], kids].sum()
        best = min(best, c_in + c_out)
        if float(best) * (1 - 1e-9) < useless:
            break  # the minimum only falls from here
    return max(0.0, float(best) * (1 - 1e-9))
