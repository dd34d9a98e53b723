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

import functools
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.forest.effort import PiecedRun, Seed, thorough_runs
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
from syncplan.planner.algorithms.forest.settings import EFFORT_PRESETS, FOREST
from syncplan.planner.algorithms.packing import (
    PACKING,
    Budget,
    OrbitWindowLP,
    Packing,
    PairSchedule,
    WindowLP,
    WindowProgram,
    automorphisms,
    balanced_packing,
    best_orbit_packing,
    packings,
    pair_trees,
    pieced_window,
    strong_group,
)
from syncplan.planner.bound_cuts import fluid_floor

SLOWER = "forest (any topology): slower than the host-structured forest"


def price_windows(
    ctx: PlanContext, size: float, units: int, best: Pipelined, cap: float = math.inf
) -> list[Seed]:
    """Step-priced packings (``packing.window``) from the trees of the best packings and the
    unlimited one: one piece whose trees load every step evenly pays no pipeline fill (tori,
    full meshes, NVLink cube meshes: 2-6 % faster than the pipelined packings at 256 MiB).
    Returns (one-piece time, key, slack, trees) of every LP solved, for ``price_pieced``."""
    n = len(ctx.ranks)
    if size < FOREST.window_min_bytes:
        return []
    table = packings(ctx)
    keys = sorted(table, key=lambda k: (table[k].theta, str(k)))[: FOREST.window_packings]
    if n > FOREST.window_max_ranks:
        # only the unlimited packing, where it was solved (the depth limits stayed
        # PACKING.unlimited_gap from the floor) and pipelines best so far: its deep trees fill a
        # pipeline slowly, one piece with step-priced shares not at all (a 64-rank directed
        # ring of hosts 1.23x -> 1.02x); the depth-limited LPs spent the budget for nothing on
        # every 64-rank member measured, the unlimited one 2.5 s on a degraded torus whose
        # depth-limited packings pipeline better
        unlimited = ("any", None) in table and best.packing.startswith("any/None")
        keys = [("any", None)] if unlimited else []
    elif n > FOREST.window_unlimited_max_ranks:
        keys = [k for k in keys if k[1] is not None]
    elif ("any", None) in table and ("any", None) not in keys:
        keys.append(("any", None))
    tried: list[Seed] = []
    slacks = [len(ctx.ranks) if key[1] is None else key[1] for key in keys]
    lps = [
        WindowLP(ctx, ctx.memo["packing_routes"][key[0]], slack, table[key].pool)
        for key, slack in zip(keys, slacks, strict=True)
    ]
    first = min(best.time, cap) / size
    if n > FOREST.window_pieced_max_ranks:  # one budget, spent in order: one LP after the other
        budget = Budget(FOREST.window_budget)
        solved = None
    else:
        # without a budget an LP depends on the others only through ``beat``, which only
        # falls and only ends an LP early (``WindowLP.abandoned``): they solve side by side
        # with the first beat, and each is then judged against the beat of its turn
        with ThreadPoolExecutor(max_workers=max(1, len(lps)), thread_name_prefix="window") as pool:
            solved = list(pool.map(lambda lp: lp.solve(beat=first), lps))
    for k, (key, slack, lp) in enumerate(zip(keys, slacks, lps, strict=True)):
        beat = min(best.time, cap) / size
        if solved is None:
            found = lp.solve(beat=beat, budget=budget)
        else:
            found = None if solved[k] is None or lp.abandoned(beat) else solved[k]
        if found is None:
            continue
        est = _offer(ctx, found, f"{key[0]}/{key[1]} step-priced", size, units, best)
        tried.append(Seed(est, key, slack, found.trees))
    return tried


def _offer(
    ctx: PlanContext, found: Packing, label: str, size: float, units: int, best: Pipelined
) -> float:
    """The step-priced packing ``found`` pipelined at every piece count (one piece among
    them): it replaces ``best`` where its built program beats it by FOREST.window_margin. Returns
    its estimated time."""
    pairs = pair_trees(found)
    shares = np.array([p.share for p in pairs])
    mine = Pipelined()
    price_pipelines(PairSchedule(ctx, pairs), shares / shares.sum(), size, units, mine)
    est = mine.time
    if est >= best.time:
        return est
    # hundreds of trees with small shares: the rounding of units moves the balance, so the
    # built program's cost-model time is what competes
    mine.time = built_time(ctx, mine, units)
    if mine.time < best.time * (1 - FOREST.window_margin):
        best.take(mine, label)
    return est


def price_orbits(ctx: PlanContext, size: float, units: int, best: Pipelined) -> bool:
    """Above FOREST.window_pieced_max_ranks, the step-priced LP reduced by the topology's
    automorphisms (``packing.orbit``): a 64-rank torus's translations make it 64x smaller
    (its one-piece program 1.14x -> 1.003x the bound; the full LP is not solved above
    FOREST.window_max_ranks), a 32-rank one's 1.029x in 16 s -> 1.002x in 2 s. Whether its
    program is now the best."""
    if len(ctx.ranks) <= FOREST.window_pieced_max_ranks or size < FOREST.window_min_bytes:
        return False
    found = best_orbit_packing(
        ctx,
        packings(ctx),
        FOREST.window_packings,
        best.time / size * (1 - FOREST.window_margin),
    )
    if found is None:
        return False
    key, packing = found
    label = f"{key[0]}/{key[1]} step-priced by symmetry"
    _offer(ctx, packing, label, size, units, best)
    return best.packing == label


def price_pieced(
    ctx: PlanContext, tried: list[Seed], units: int, best_s: float
) -> tuple[WindowProgram, str] | None:
    """Pieced step-priced packings (``packing.pieced.pieced_window``) from the FOREST.window_pieced
    step-priced packings of least one-piece time: the fastest, where it beats ``best_s``
    (the best pipelined program's time) by FOREST.window_margin (a degraded cube mesh 1.083x ->
    1.009x, a full mesh with a slow pair 1.026x -> 1.004x), over tree orbits where the
    topology has automorphisms (a 4x4 mesh 1.043x -> 1.022x)."""
    n = len(ctx.ranks)
    if ctx.size_bytes < FOREST.window_min_bytes:  # latency: fewer, shallower trees (as one piece)
        return None
    if best_s * (1 - FOREST.window_margin) <= fluid_floor(ctx) * ctx.size_bytes:
        return None  # no program beats the fluid floor: a torus's one piece at 1.003x
    # by symmetry where the topology has any: the same LP optimum (the LP is convex and the
    # group maps its solutions to solutions), a master |G| x smaller; above
    # FOREST.window_pieced_max_ranks only where the group is strong (a ring of 12 2-GPU hosts, one
    # rank orbit: 1.017x -> 1.003x), and not above FOREST.window_max_ranks (a 64-rank mesh of
    # 4-GPU hosts: 15 s of pricing for no gain)
    if n > FOREST.window_max_ranks:
        return None
    if n > FOREST.window_pieced_max_ranks:
        group = strong_group(ctx)
        if group is None:
            return None
    else:
        group = automorphisms(ctx)
    if group is not None and not tried:
        # every one-piece LP abandoned (a mesh: 1.47x the bound in one piece, 1.02x in 64):
        # the orbit LPs start from the pools of the packings of least fluid time
        table = packings(ctx)
        tried = [
            Seed(table[key].theta, key, n if key[1] is None else key[1], table[key].pool)
            for key in sorted(table, key=lambda k: (table[k].theta, str(k)))
        ]
    chosen = sorted(tried, key=lambda t: (t[0], str(t[1])))[: FOREST.window_pieced]
    lp_of: Callable[..., WindowLP] = (
        WindowLP if group is None else functools.partial(OrbitWindowLP, group=group)
    )
    budget = Budget(PACKING.pieces_budget)
    runs = [PiecedRun(seed, lp_of, budget, {}) for seed in chosen]
    if EFFORT_PRESETS.get(ctx.effort, FOREST).thorough:  # the same runs first, then these
        runs += thorough_runs(ctx, chosen, group, lp_of)
    out = None
    for (_, key, slack, trees), lp_of, budget, limits in runs:
        found = pieced_window(
            ctx,
            ctx.memo["packing_routes"][key[0]],
            slack,
            trees,
            units,
            best_s * (1 - FOREST.window_margin),
            budget,
            lp_of,
            PACKING.max_transfers,
            **limits,
        )
        if found is not None and found.time_s < best_s * (1 - FOREST.window_margin):
            best_s = found.time_s
            out = found, f"{key[0]}/{key[1]} step-priced, {found.pieces} pieces"
    return out


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
