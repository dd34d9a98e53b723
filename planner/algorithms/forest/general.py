"""Forest on any topology: tree packings of several depth limits, pipelined and priced.

For each route set and depth slack the packing LP (``packing.sets``) gives trees and shares;
the pairs are pipelined (``forest.pipelined``: every piece count that fits the plan's size
limits, equal or ramped pieces, and LP-sized pieces near the best count). At small sizes
fewer, shallower trees win (the fill and each step's latency dominate), so the few largest
pairs of each packing and the shallowest single pair are priced too. From 1 MiB the
step-priced packings (``packing.window``: one piece, by symmetry, in pieces) and the
per-piece mixes of the best pipeline's pairs (``forest.mix``) compete as well. The fastest
program under the cost model wins.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.forest.mix import (
    Move,
    build_mix,
    mix_cost,
    mix_lps,
    mix_transfers,
    pair_profiles,
)
from syncplan.planner.algorithms.forest.pipelined import (
    Pipelined,
    built_time,
    pair_variants,
    price_pipelines,
    program_builder,
    refine_pieces,
)
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.forest.windows import price_orbits, price_pieced, price_windows
from syncplan.planner.algorithms.packing import (
    PACKING,
    PairSchedule,
    balanced_packing,
    packings,
    pair_trees,
)
from syncplan.planner.bound_cuts import fluid_floor

SLOWER = "forest (any topology): slower than the host-structured forest"


def mixed_program(
    ctx: PlanContext, best: Pipelined, units: int, cap: float
) -> tuple[float, Program, int] | None:
    """The best pipelined packing's pairs with per-piece mixes (forest.mix): at the largest
    piece count up to FOREST.mix_share of its own and the one below it (smallest first)
    within the mix budget, up to FOREST.mix_max_ranks ranks, where the pipelined time is
    within FOREST.mix_reach of ``cap``; the first and last FOREST.mix_ends x (phase offsets)
    pieces mix freely
    (fewer where the LP would have more than FOREST.mix_max_columns columns), the steady
    middle keeps the packing's shares: (cost-model time, program, pieces) of the
    fastest, or None."""
    if best.time > cap * FOREST.mix_reach or len(ctx.ranks) > FOREST.mix_max_ranks:
        return None
    sched, shares, fracs, _, _ = best.found()
    size = float(ctx.size_bytes)
    pairs = [j for j in range(len(shares)) if shares[j] > 0]
    counts = [p for p in FOREST.pipeline_pieces if p <= len(fracs) * FOREST.mix_share][-2:]
    k = len(pairs)
    fit = []  # every LP is chosen before any is solved: they run side by side
    spent = 0
    for pieces in counts:
        # free ends as long as the LP stays within FOREST.mix_max_columns
        ends = min(
            FOREST.mix_ends * sched.columns,
            (FOREST.mix_max_columns - pieces) // max(1, 2 * (k - 1)),
        )
        if ends < 1:
            continue
        cost = mix_cost(pieces, k, ends)
        if spent + cost > FOREST.mix_budget or pieces * k > units:
            continue
        spent += cost
        fit.append((pieces, ends))
    if not fit:
        return None
    profiles = pair_profiles(sched, pairs)
    moves = [sched.transfers[j] for j in pairs]
    groups: list[tuple[list[int], list[Move]]] = [(list(range(k)), [])]
    calls = [
        (
            profiles,
            shares[pairs],
            sched.columns,
            len(ctx.router.bw),
            pieces,
            size,
            ctx.cost.min_step_s,
            ends,
        )
        for pieces, ends in fit
    ]
    out = None
    for (pieces, _), x in zip(fit, mix_lps(calls), strict=True):
        if x is None or mix_transfers(moves, groups, x, units) > PACKING.max_transfers:
            continue
        program = build_mix(moves, groups, x, units, sched.columns)
        t = ctx.cost.program_time(ctx.ranks, program, size)
        if out is None or t < out[0]:
            out = (t, program, pieces)
    return out


def forest_any(ctx: PlanContext, beat: float | None = None) -> Candidate:
    """The fastest pipelined tree packing under the cost model (any topology); with ``beat``,
    InfeasibleError before building a program whose estimated time is above it."""
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("forest", 0.0, lambda: Program(1, []), {"trees": 0})
    if n > FOREST.general_max_ranks:
        raise InfeasibleError(f"forest (any topology): more than {FOREST.general_max_ranks} ranks")
    t0 = time.perf_counter()
    size = float(ctx.size_bytes)
    units = min(FOREST.max_units, ctx.size_bytes)
    # no program of a packing beats its fluid time (every step lasts at least its busiest
    # arc's load), nor the family's fluid floor: packings and tree subsets whose fluid time
    # is above ``beat`` or the best program's time so far are not priced (lowest first)
    cap = math.inf if beat is None else beat
    if cap <= fluid_floor(ctx) * size:
        raise InfeasibleError(SLOWER)
    best = Pipelined()
    ranked = []
    pruned = False
    for key, packing in sorted(packings(ctx).items(), key=lambda kv: kv[1].theta):
        if packing.theta * size >= min(best.time, cap):
            pruned = True
            continue
        mine = Pipelined()
        variants = pair_variants(pair_trees(packing))
        for subset in variants:
            sched = PairSchedule(ctx, subset)
            shares, theta = sched.fluid_shares()
            if theta * size < min(best.time, mine.time):
                price_pipelines(sched, shares, size, units, mine)
        if mine.sched is not None:
            ranked.append((mine.time, len(mine.found().fracs), key))
            if mine.time < best.time:
                best = mine
                best.packing = f"{key[0]}/{key[1]}"
    # shares for the pipeline (fill and drain) on the best packings, at their piece counts,
    # up to PACKING.unlimited_max_ranks (above, this LP takes up to a second and lowered no 64-rank
    # member's time: docs/planner.md, session 12)
    for _, pieces, key in sorted(ranked, key=lambda r: r[:2])[: FOREST.balance_packings]:
        if n > PACKING.unlimited_max_ranks:
            break
        packing = packings(ctx)[key]
        balanced = balanced_packing(ctx, packing, packing.pool, max(pieces, 8))
        if balanced is None:
            continue
        pairs = [p for p in pair_trees(balanced) if p.share >= PACKING.min_share]
        sched = PairSchedule(ctx, pairs)
        shares = np.array([p.share for p in pairs])
        before = best.time
        price_pipelines(sched, shares / shares.sum(), size, units, best)
        if best.time < before:
            best.packing = f"{key[0]}/{key[1]} balanced"
    if best.sched is None and pruned:  # every packing's fluid time is above ``beat``
        raise InfeasibleError(SLOWER)
    # above 16 ranks the orbit LP first: where it wins, the full step-priced LPs (seconds on
    # 17-32 ranks, a budget they often spend for nothing) are not solved
    tried = (
        [] if price_orbits(ctx, size, units, best) else price_windows(ctx, size, units, best, cap)
    )
    if best.sched is None:
        raise InfeasibleError("forest (any topology): no tree set fits the plan size limits")
    sched, shares, _, _, _ = best.found()
    refine_pieces(ctx, best, units)
    # the mixes (interior point, in HiGHS without the GIL) and the pieced step-priced LPs
    # depend on nothing the other computes: side by side (every program they build pins
    # its paths, so no new rank pair is routed), the same outcome as one after the other
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mix") as pool:
        later = pool.submit(mixed_program, ctx, best, units, cap)
        pieced = price_pieced(ctx, tried, units, min(best.time, cap))
        mixed = later.result()
    fluid = min(p.theta for k, p in packings(ctx).items() if k[0] == "any") * size
    if pieced is not None and mixed is not None and mixed[0] < pieced[0].time_s:
        pieced = None
    if pieced is not None:  # built and timed already
        found, name = pieced
        if beat is not None and found.time_s > beat:
            raise InfeasibleError(SLOWER)
        details = {
            "path": "any-topology packing",
            "packing": name,
            "trees": sum(len(s) for s in found.program.steps) // (2 * (n - 1)),
            "fluid_time_s": fluid,
            "pieces": found.pieces,
            "reduce_height": found.height,
            "broadcast_height": found.height,
            "solve_s": round(time.perf_counter() - t0, 3),
        }
        return Candidate("forest", found.time_s, lambda: found.program, details)
    sched, _, fracs, _, _ = best.found()
    # the pipelined estimate is the cost model's time up to the rounding of units
    if (
        mixed is not None
        and mixed[0] < best.time * (1 + FOREST.build_check)
        and mixed[0] < built_time(ctx, best, units)
    ):
        if beat is not None and mixed[0] > beat:
            raise InfeasibleError(SLOWER)
        t, program, pieces = mixed
        details = {
            "path": "any-topology packing",
            "packing": best.packing + ", mixed",
            "trees": int((shares > 0).sum()),
            "fluid_time_s": fluid,
            "pieces": pieces,
            "reduce_height": sched.h_in,
            "broadcast_height": sched.h_out,
            "solve_s": round(time.perf_counter() - t0, 3),
        }
        return Candidate("forest", t, lambda: program, details)
    if beat is not None and best.time > beat:
        raise InfeasibleError(SLOWER)
    predicted = built_time(ctx, best, units)
    details = {
        "path": "any-topology packing",
        "packing": best.packing,
        "trees": int((shares > 0).sum()),
        "fluid_time_s": fluid,
        "pieces": len(fracs),
        "reduce_height": sched.h_in,
        "broadcast_height": sched.h_out,
        "solve_s": round(time.perf_counter() - t0, 3),
    }
    return Candidate("forest", predicted, program_builder(best, units), details)
