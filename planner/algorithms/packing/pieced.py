"""Pieced step-priced packings doubled to a program (``pieced_window``), and the lockstep
program of a pieced LP's solution (``window_program``).

The LP is ``packing.window.WindowLP`` with P pieces (``OrbitWindowLP`` and ``ReversedLP``
solve the same LP over a topology's symmetries); ``pieced_window`` doubles P from 2 to 64,
each LP starting from the trees of the one before, while the programs keep gaining.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn
from syncplan.planner.algorithms.packing.routes import QuickRoutes, RankRoutes
from syncplan.planner.algorithms.packing.schedule import Pair, pair_trees
from syncplan.planner.algorithms.packing.settings import PACKING
from syncplan.planner.algorithms.packing.window import Budget, WindowLP
from syncplan.planner.algorithms.pipeline import round_to_total
from syncplan.planner.bound_cuts import fluid_floor


def window_program(found: Packing, offsets: np.ndarray, height: int, units: int) -> Program:
    """The lockstep program of a step-priced packing with pieces: per piece the in- and
    out-trees of each root paired by share (``pair_trees``), each pair a contiguous range of
    units; a rank at depth k of piece p's in-tree sends at step p + height - k, one at
    depth k of its out-tree hears at step p + height + k - 1."""
    pairs: list[tuple[int, Pair, float]] = []
    for p in np.unique(offsets):
        mine = offsets == p
        trees = [t for t, m in zip(found.trees, mine, strict=True) if m]
        share = found.share[mine]
        weight = float(sum(x for t, x in zip(trees, share, strict=True) if t.inward))
        if weight <= 0:
            continue
        for pair in pair_trees(Packing(trees, share, found.theta, found.prices)):
            pairs.append((int(p), pair, pair.share * weight))
    per_pair = round_to_total(
        np.array([w for _, _, w in pairs]) * units / sum(w for _, _, w in pairs), units
    )
    last = max(p for p, _, _ in pairs)
    steps: list[Step] = [[] for _ in range(last + 2 * height)]
    base = 0
    for (p, pair, _), u in zip(pairs, per_pair, strict=True):
        a, b = base, base + int(u)
        base = b
        if a == b:
            continue
        red, bc = pair.reduce, pair.broadcast
        for v, q in enumerate(red.parent):
            if q >= 0:
                steps[p + height - int(red.depth[v])].append(
                    Transfer(v, int(q), a, b, True, red.paths[v])
                )
        for v, q in enumerate(bc.parent):
            if q >= 0:
                steps[p + height + int(bc.depth[v]) - 1].append(
                    Transfer(int(q), v, a, b, False, bc.paths[v])
                )
    return Program(units, [s for s in steps if s])


@dataclass
class WindowProgram:
    time_s: float  # under the cost model
    program: Program
    pieces: int
    height: int


def pieced_window(
    ctx: PlanContext,
    routes: RankRoutes | QuickRoutes,
    slack: int,
    start: list[TreeColumn],
    units: int,
    beat_s: float = np.inf,
    budget: Budget | None = None,
    lp_of: Callable[..., WindowLP] = WindowLP,
    max_transfers: int = 1 << 62,
    rounds: int = PACKING.window_rounds,
    max_columns: int = PACKING.pieces_max_columns,
    round_cap: int | None = None,
    progress: Callable[[int, float], None] | None = None,
) -> WindowProgram | None:
    """The fastest program of the pieced step-priced LP over PACKING.pieces piece counts, each LP
    starting from the trees of the one before (each tree in the two pieces its piece splits
    into). The next count is tried while the last one's program gained PACKING.pieces_gain over the
    one before (2 pieces are often slower than the pipelined programs, 4 or 8 faster), its
    LP stayed under PACKING.pieces_max_columns columns, its program under ``max_transfers``
    transfers, and ``budget`` is left. ``lp_of`` makes each LP (``WindowLP``'s arguments,
    the pieces by keyword): ``OrbitWindowLP`` with a group where the topology has one.
    ``rounds``, ``max_columns`` (in place of PACKING.pieces_max_columns) and ``round_cap`` (new
    columns a round) bound each LP; ``progress(pieces, seconds)`` hears every program
    built."""
    size = float(ctx.size_bytes)
    floor_s = fluid_floor(ctx) * size
    best: WindowProgram | None = None
    last_s = np.inf
    budget = budget or Budget(np.inf)
    split = None  # each tree of the last LP in the two pieces its piece splits into
    for pieces in PACKING.pieces:
        if budget.left <= 0 or budget.expired():
            break
        lp = lp_of(ctx, routes, slack, start, pieces=pieces, start_pieces=split)
        lp.round_cap = round_cap
        found = lp.solve(
            rounds,
            beat=beat_s / size,
            floor=floor_s / size * (1 + PACKING.pieces_floor_gap),
            max_columns=max_columns,
            budget=budget,
        )
        if found is None:
            break
        trees, offsets = lp.program_trees(found)
        if len(trees.trees) * 2 * (len(ctx.ranks) - 1) > max_transfers:  # pairs <= trees
            break
        program = window_program(trees, offsets, lp.height, units)
        mine = WindowProgram(
            ctx.cost.program_time(ctx.ranks, program, size), program, pieces, lp.height
        )
        if progress is not None:
            progress(pieces, mine.time_s)
        if mine.time_s >= last_s * (1 - PACKING.pieces_gain) or len(lp.trees) > max_columns:
            return mine if mine.time_s < min(last_s, beat_s) else best
        if mine.time_s < beat_s:
            best, beat_s = mine, mine.time_s
        last_s = mine.time_s
        start = found.trees
        split = [[2 * int(p), 2 * int(p) + 1] for p in lp.live_offsets]
    return best
