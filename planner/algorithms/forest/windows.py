"""Step-priced packings for the forest on any topology (forest.general): one piece whose
trees load every step evenly (``packing.window``, ``price_windows``), the same LP reduced by
the topology's automorphisms (``packing.orbit``, ``price_orbits``), and in pieces
(``packing.pieced``, ``price_pieced``). Each competes with the best pipelined packing."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.effort import PiecedRun, Seed, thorough_runs
from syncplan.planner.algorithms.forest.pipelined import Pipelined, built_time, price_pipelines
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
    best_orbit_packing,
    packings,
    pair_trees,
    pieced_window,
    strong_group,
)
from syncplan.planner.bound_cuts import fluid_floor


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
