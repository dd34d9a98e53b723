"""The one-piece step-priced packing LP (``packing.window``) reduced by a group of automorphisms.

The LP is convex and every automorphism of the topology (``symmetry``) maps its feasible
points to feasible points of the same value, so averaging an optimum over a group G gives an
optimum that G leaves unchanged: each tree T and its images g(T) carry equal shares. Such a
solution is an LP over orbits: a tree column is priced at one root per rank orbit, its load
on a (step, arc orbit O) row is its crossings of O's arcs at that step divided by |O|, and
the root rows are per rank orbit. On a 64-rank torus (its 64 translations: one rank orbit,
four arc orbits) the master has 16 x 4 load rows instead of 16 x 256, and the column
generation that took minutes takes a fraction of a second. The program gives every element
of G a copy of each tree, with 1/|G| of its share.

The pieced LP (``packing.pieced.pieced_window``) reduces the same way: a column is a tree
orbit and its piece, the root rows are per (piece, rank orbit). On a 4x4 mesh (its 8
symmetries: three rank orbits, six arc orbits of 8) the master of 64 pieces is 8x smaller
and doubling to 64 pieces takes seconds, where the full LP stopped at 32 within its budget.
"""

from __future__ import annotations

import numpy as np
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn
from syncplan.planner.algorithms.packing.master import Master
from syncplan.planner.algorithms.packing.routes import QuickRoutes, RankRoutes
from syncplan.planner.algorithms.packing.settings import PACKING
from syncplan.planner.algorithms.packing.symmetry import Group, automorphisms
from syncplan.planner.algorithms.packing.window import Budget, WindowLP


class OrbitWindowLP(WindowLP):
    """``WindowLP`` over the orbits of ``group``: one piece (the interior point's central
    duals, then ``solve_basic``) or ``pieces`` (primal simplex, as the full pieced LP)."""

    def __init__(
        self,
        ctx: PlanContext,
        routes: RankRoutes | QuickRoutes,
        slack: int,
        start: list[TreeColumn],
        group: Group,
        pieces: int = 1,
        start_pieces: list[list[int]] | None = None,
    ) -> None:
        super().__init__(ctx, routes, slack, [], pieces)
        self.group = group
        _, self.arc_orbit, arc_size = np.unique(
            group.arc_orbits(), return_inverse=True, return_counts=True
        )
        self.arc_weight = 1.0 / arc_size[self.arc_orbit]  # per arc: 1 / |its orbit|
        orbit_of = group.rank_orbits()
        reps, self.root_orbit = np.unique(orbit_of, return_inverse=True)
        self.reps = {int(r) for r in reps}
        # every root is priced (the greedy trees of the roots of an orbit differ where prices
        # tie), and its trees are taken to its orbit's first root by an element that maps it
        # there: more columns a round than the first root's alone (a 64-rank torus: 1.034x
        # -> 1.00x the floor)
        self.to_rep = [
            int(np.nonzero(group.ranks[:, r] == orbit_of[r])[0][0]) for r in range(self.n)
        ]
        bw = np.zeros(len(arc_size))
        bw[self.arc_orbit] = self.bw
        self.orbits = len(reps)
        if pieces > 1:  # one root per orbit: 64 pieces price 2 x 64 trees per root
            self.price_roots = sorted(self.reps)
        self.master = Master(bw, self.orbits * pieces, primal=pieces > 1, steps=self.steps)
        if pieces == 1:
            self.master.go_interior()
        self.add_start(start, start_pieces)

    def canonical_column(self, col: TreeColumn, piece: int) -> tuple[TreeColumn, int]:
        """``col`` mapped to its root's orbit's first root, in its piece."""
        if col.root not in self.reps:
            col = image(col, self.group, self.to_rep[col.root], self.ctx)
        return col, piece

    def add_columns(self, cols: list[tuple[TreeColumn, int]]) -> None:
        """The columns on the rows of their arcs' orbits, each crossing 1 / |orbit|."""
        self.master.add_trees(
            [
                (self.arc_orbit[c.arcs], p * self.orbits + int(self.root_orbit[c.root]), c.inward)
                for c, p in cols
            ],
            [self.column_steps(c, p) for c, p in cols],
            [self.arc_weight[c.arcs] for c, _ in cols],
        )

    def solve_basic(self, rounds: int, beat: float = np.inf) -> Packing | None:
        """``solve`` (no budget; abandoned as ``WindowLP.solve`` is against ``beat``), then
        the master once more by the simplex method: a basic optimum, on few trees (each is
        copied |G| times into the program)."""
        if self.solve(rounds=rounds, beat=beat) is None:
            return None
        theta, _, share, prices, _ = self._expanded(*self.master.vertex())
        return self.make_packing(self.trees, self.offsets, theta, share, prices)

    def program_trees(self, found: Packing) -> tuple[Packing, np.ndarray]:
        """Every tree of ``found`` copied by every element of the group, in its piece."""
        return expand_pieces(found, self.live_offsets, self.group, self.ctx)

    def solve_master(
        self, budget: Budget
    ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        """The master's solution with prices per (step, arc) and duals per root: an arc's
        price is its orbit's over |orbit| (what a crossing of it adds to an orbit column's
        reduced cost), a (piece, root)'s dual its (piece, orbit)'s."""
        return self._expanded(*super().solve_master(budget))

    def _expanded(
        self, theta: float, obj: float, share: np.ndarray, prices: np.ndarray, duals: np.ndarray
    ) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        per_arc = prices[:, self.arc_orbit] * self.arc_weight[None, :]
        rows = np.arange(self.pieces)[:, None] * self.orbits + self.root_orbit[None, :]
        per_root = np.concatenate([duals[rows.ravel()], duals[-1:]])
        return theta, obj, share, per_arc, per_root


def image(
    col: TreeColumn, group: Group, k: int, ctx: PlanContext, memo: dict | None = None
) -> TreeColumn:
    """``col`` mapped by element k of ``group``; ``memo`` keeps each (k, path)'s image and
    its arcs from call to call (the trees of a packing share most of their paths)."""
    index = group.index
    perm, rmap = group.perms[k], group.ranks[k]
    memo = {} if memo is None else memo
    parent = np.full(len(col.parent), -1)
    depth = np.zeros(len(col.parent), dtype=col.depth.dtype)
    paths: list[tuple[str, ...]] = [()] * len(col.parent)
    arcs: list[list[int]] = [[]] * len(col.parent)
    for v, p in enumerate(col.parent):
        depth[rmap[v]] = col.depth[v]
        if p >= 0:
            parent[rmap[v]] = rmap[p]
            hit = memo.get((k, col.paths[v]))
            if hit is None:
                mapped = tuple(group.nodes[perm[index[u]]] for u in col.paths[v])
                hit = memo[(k, col.paths[v])] = (mapped, ctx.router.arcs(mapped))
            paths[rmap[v]], arcs[rmap[v]] = hit
    return TreeColumn(
        col.inward,
        int(rmap[col.root]),
        parent,
        paths,
        np.asarray([a for a_v in arcs for a in a_v], dtype=np.int64),
        depth,
    )


def expand(found: Packing, group: Group, ctx: PlanContext) -> Packing:
    """Every tree of ``found`` copied by every element of ``group``, each with 1/|G| of its
    share (the copies of a tree some elements fix merge)."""
    return expand_pieces(found, np.zeros(len(found.trees), dtype=np.int64), group, ctx)[0]


def expand_pieces(
    found: Packing, pieces: np.ndarray, group: Group, ctx: PlanContext
) -> tuple[Packing, np.ndarray]:
    """``expand`` for trees that run in the pieces ``pieces`` (a copy keeps its tree's
    piece; copies merge only within a piece): the packing and each copy's piece."""
    trees: dict[tuple, TreeColumn] = {}
    shares: dict[tuple, float] = {}
    memo: dict = {}
    images: dict[tuple[int, int], TreeColumn] = {}  # a tree in several pieces: mapped once
    for col, x, piece in zip(found.trees, found.share, pieces.tolist(), strict=True):
        for k in range(group.order):
            mapped = images.get((id(col), k))
            if mapped is None:
                mapped = images[(id(col), k)] = image(col, group, k, ctx, memo)
            key = (piece, mapped.inward, mapped.parent.tobytes(), tuple(mapped.paths))
            trees.setdefault(key, mapped)
            shares[key] = shares.get(key, 0.0) + x / group.order
    keys = list(trees)
    return (
        Packing(
            [trees[k] for k in keys], np.array([shares[k] for k in keys]), found.theta, found.prices
        ),
        np.array([k[0] for k in keys], dtype=np.int64),
    )


def strong_group(ctx: PlanContext) -> Group | None:
    """The topology's automorphisms where they leave at most 1/PACKING.orbit_share as many rank
    orbits as ranks (the orbit LPs are then that much smaller), else None."""
    group = automorphisms(ctx)
    if group is None or len(set(group.rank_orbits().tolist())) * PACKING.orbit_share > len(
        ctx.ranks
    ):
        return None
    return group


def best_orbit_packing(
    ctx: PlanContext, table: dict, count: int, beat: float = np.inf
) -> tuple[tuple, Packing] | None:
    """The orbit LP of the ``count`` packings of least fluid time in ``table`` (forest_any's
    packings; their trees start it), solved where the topology's automorphisms leave at most
    1/PACKING.orbit_share as many rank orbits as ranks: (key, the packing of least one-piece
    bandwidth time, expanded over the group), or None, also where that time per byte is not
    below ``beat`` (the program only adds latency). Only the best is expanded: the copies
    number |G| x its trees."""
    n = len(ctx.ranks)
    group = strong_group(ctx)
    if group is None:
        return None
    best: tuple[float, tuple, Packing] | None = None
    for key in sorted(table, key=lambda k: (table[k].theta, str(k)))[:count]:
        slack = n if key[1] is None else key[1]
        lp = OrbitWindowLP(ctx, ctx.memo["packing_routes"][key[0]], slack, table[key].pool, group)
        found = lp.solve_basic(PACKING.orbit_rounds, beat)
        if found is None or len(found.trees) * group.order * (n - 1) > PACKING.max_transfers:
            continue
        if best is None or found.theta < best[0]:
            best = (found.theta, key, found)
    if best is None or best[0] >= beat:
        return None
    return best[1], expand(best[2], group, ctx)
