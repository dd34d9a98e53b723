"""Broadcast and reduce programs from one root rank (docs/planner.md, "Broadcast and reduce").

A broadcast program is a set of out-trees from the root, tree k carrying a share of the
buffer cut into ``pieces`` pieces; piece p crosses the tree edge into a rank at depth d at
step p + d - 1 (a lockstep pipeline: every edge of every tree forwards one piece a step).
A reduce program is the same schedule on in-trees run backwards: each transfer reversed
(child to parent, ``reduce: true``) and the step order reversed, so a rank sends its partial
sum of a piece one step after the last of its children's arrived.

Algorithms (``ROOTED_ALGORITHMS``, in the order ``auto`` prefers among ties):
``chain`` (the ranks in host order from the root, one chain, or two in opposite directions
with half the buffer each), ``binary-tree`` (heap-ordered over the same order), ``star``
(the root and every other rank joined directly) and ``packing`` (the LP packing of
``syncplan.planner.algorithms.rooted_packing``). Each prices every piece count 1, 2, 3, 4, 6,
8, 12, ... while the time falls, building and pricing the program with the cost model.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import PRICE_BUDGET, coarsen, host_order, price, ready
from syncplan.planner.algorithms.pipeline import round_to_total
from syncplan.planner.algorithms.rooted_packing import fewer_trees, pack_trees
from syncplan.planner.bound_rooted import rooted_bound

Path = tuple[str, ...]
SHARE_UNITS = 1024  # units per piece a multi-tree program splits by tree rate
MAX_PIECES = 1 << 14
TREE_COUNTS = (1, 2, 4, 8, 16)  # the packing also prices its fastest trees alone


@dataclass(frozen=True)
class RootedTree:
    """``parent[v]``: the rank v receives from (out-tree) or sends to (in-tree), -1 at the
    root; ``paths[v]``: the route of v's edge in the direction data moves (None: the cost
    model's route)."""

    parent: tuple[int, ...]
    paths: tuple[Path | None, ...] | None = None

    def depths(self) -> list[int]:
        depth = [-1] * len(self.parent)

        def walk(v: int) -> int:
            chain = []
            while depth[v] < 0 and self.parent[v] >= 0:
                chain.append(v)
                v = self.parent[v]
            d = 0 if depth[v] < 0 else depth[v]
            depth[v] = d
            for u in reversed(chain):
                d += 1
                depth[u] = d
            return d

        for v in range(len(self.parent)):
            walk(v)
        return depth


def pipelined_program(
    trees: Sequence[RootedTree], widths: Sequence[int], pieces: int, reduce: bool
) -> Program:
    """The lockstep program of ``trees``, tree k moving ``widths[k]`` units per piece (see the
    module doc); a broadcast, or with ``reduce`` the reduce of in-trees."""
    width = sum(widths)
    depth = [t.depths() for t in trees]
    height = max(max(d) for d in depth)
    nsteps = pieces + height - 1
    steps: list[Step] = [[] for _ in range(nsteps)]
    for p in range(pieces):
        lo = p * width
        for tree, w, dep in zip(trees, widths, depth, strict=True):
            if w == 0:
                continue
            hi = lo + w
            paths = tree.paths or (None,) * len(tree.parent)
            for v, up in enumerate(tree.parent):
                if up < 0:
                    continue
                s = p + dep[v] - 1
                if reduce:
                    steps[nsteps - 1 - s].append(Transfer(v, up, lo, hi, True, paths[v]))
                else:
                    steps[s].append(Transfer(up, v, lo, hi, False, paths[v]))
            lo = hi
    return Program(pieces * width, steps)


def pipeline_time(
    ctx: PlanContext, trees: Sequence[RootedTree], widths: Sequence[int], pieces: int, reduce: bool
) -> float:
    """The cost model's time of ``pipelined_program(trees, widths, pieces, reduce)`` on the
    request, without building it when it is long: with H the tallest tree's height, steps H-1
    to pieces-1 move a piece over every edge and cost the same, so a program of 2H pieces
    priced at the same bytes per unit plus (pieces - 2H) of its step H-1 is the same sum."""
    width = sum(widths)
    height = max(max(t.depths()) for t in trees)
    if pieces <= 2 * height + 1 or pieces * width > ctx.size_bytes:
        prog = pipelined_program(trees, widths, pieces, reduce)
        return price(ctx, coarsen(prog, min(prog.units, ctx.size_bytes)))
    short = pipelined_program(trees, widths, 2 * height, reduce)
    per_unit = ctx.size_bytes / (pieces * width)
    total = ctx.cost.program_time(ctx.ranks, short, per_unit * short.units)
    steady = ctx.cost.step_time(ctx.ranks, short.steps[height - 1], per_unit)
    return total + (pieces - 2 * height) * steady


def best_pipeline(
    ctx: PlanContext,
    name: str,
    variants: dict[str, tuple[list[RootedTree], list[int]]],
    reduce: bool,
    details: dict | None = None,
) -> Candidate:
    """Price every variant at piece counts 1, 2, 3, 4, 6, 8, 12, ... (while the time falls,
    the units fit in the buffer and the program in PRICE_BUDGET transfers); the fastest as a
    Candidate whose program is built when asked for."""
    best: tuple[float, str, int, list[RootedTree], list[int]] | None = None
    n = len(ctx.ranks)
    for label, (trees, widths) in variants.items():
        per_piece = sum(n - 1 for w in widths if w)
        prev, rises, pieces = float("inf"), 0, 1
        while pieces <= MAX_PIECES and (pieces == 1 or pieces * per_piece <= PRICE_BUDGET):
            t = pipeline_time(ctx, trees, widths, pieces, reduce)
            if best is None or t < best[0]:
                best = (t, label, pieces, trees, widths)
            rises = rises + 1 if t >= prev else 0
            if rises >= 2 or pieces * sum(widths) >= ctx.size_bytes:
                break
            prev, pieces = t, _next_pieces(pieces)
    if best is None:
        raise InfeasibleError(f"{name}: no variant applies")
    t, label, pieces, trees, widths = best
    height = max(max(tr.depths()) for tr in trees)
    info = {"variant": label, "pieces": pieces, "steps": pieces + height - 1, **(details or {})}
    return Candidate(name, t, partial(_build, ctx.size_bytes, trees, widths, pieces, reduce), info)


def _build(
    size: int, trees: list[RootedTree], widths: list[int], pieces: int, reduce: bool
) -> Program:
    prog = pipelined_program(trees, widths, pieces, reduce)
    return coarsen(prog, min(prog.units, size))


def _next_pieces(pieces: int) -> int:
    """1, 2, 3, 4, 6, 8, 12, 16, ...: powers of two and the halfway points between them."""
    return pieces + max(1, pieces // 2) if pieces & (pieces - 1) == 0 else pieces * 4 // 3


def _order_from(ctx: PlanContext, root: int) -> list[int]:
    order = host_order(ctx)
    i = order.index(root)
    return order[i:] + order[:i]


def _chain(order: list[int], n: int) -> RootedTree:
    parent = [-1] * n
    for a, b in itertools.pairwise(order):
        parent[b] = a
    return RootedTree(tuple(parent))


def chain(ctx: PlanContext, root: int, reduce: bool) -> Candidate:
    order, n = _order_from(ctx, root), len(ctx.ranks)
    variants = {"1 chain": ([_chain(order, n)], [1])}
    if n > 2:
        back = [root, *order[1:][::-1]]
        variants["2 chains (both directions)"] = ([_chain(order, n), _chain(back, n)], [1, 1])
    return best_pipeline(ctx, "chain", variants, reduce)


def binary_tree(ctx: PlanContext, root: int, reduce: bool) -> Candidate:
    order, n = _order_from(ctx, root), len(ctx.ranks)
    parent = [-1] * n
    for i in range(1, n):
        parent[order[i]] = order[(i - 1) // 2]
    variants = {"heap order": ([RootedTree(tuple(parent))], [1])}
    return best_pipeline(ctx, "binary-tree", variants, reduce)


def star(ctx: PlanContext, root: int, reduce: bool) -> Candidate:
    n = len(ctx.ranks)
    parent = tuple(-1 if v == root else root for v in range(n))
    return best_pipeline(ctx, "star", {"direct": ([RootedTree(parent)], [1])}, reduce)


def packing(ctx: PlanContext, root: int, reduce: bool) -> Candidate:
    packed = pack_trees(ctx, root, reduce, rooted_bound(ctx, root, reduce).flow_Bps)
    total = sum(t.rate for t in packed)
    variants = {}
    for keep in (*TREE_COUNTS, len(packed)):
        if keep > len(packed) or (keep < len(packed) and keep in variants):
            continue
        trees = fewer_trees(ctx, packed, keep)
        rates = np.asarray([t.rate for t in trees])
        widths = [1]
        if len(trees) > 1:
            shares = round_to_total(rates / rates.sum() * SHARE_UNITS, SHARE_UNITS)
            widths = [int(w) for w in shares]
        rooted = [RootedTree(tuple(int(p) for p in t.parent), tuple(t.paths)) for t in trees]
        label = f"{sum(1 for w in widths if w)} of {len(packed)} trees"
        variants[label] = (rooted, widths)
    details = {"trees": len(packed), "fluid_time_s": ctx.size_bytes / total}
    return best_pipeline(ctx, "packing", variants, reduce, details)


RootedAlgorithm = Callable[[PlanContext, int, bool], Candidate]

ROOTED_ALGORITHMS: dict[str, RootedAlgorithm] = {
    "chain": chain,
    "binary-tree": binary_tree,
    "star": star,
    "packing": packing,
}


def single_rank() -> Candidate:
    """The empty program of a one-rank request."""
    return Candidate("chain", 0.0, ready(Program(1, [])), {"pieces": 0})
