"""Pricing the host forest's configurations on the per-arc model of the step times: every
stagger, intra-host grouping, piece count and ramp of a solved tree set (``price_configs``),
piece sizes from the LP near the best piece count (``refine_config``), and per-piece tree
mixes over the best configurations (``mixed_program``, forest.mix)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from syncplan.core.program import Program
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.mix import (
    build_mix,
    host_moves,
    mix_cost,
    mix_lps,
    mix_transfers,
    tree_profiles,
)
from syncplan.planner.algorithms.forest.plan import HostPlan
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.packing import PACKING
from syncplan.planner.algorithms.pipeline import (
    lp_fractions,
    model_time,
    model_times,
    piece_fractions,
)


def price_configs(
    plan: HostPlan,
    fluid: float,
    size: float,
    max_units: int,
    configs: dict[tuple[int, int, int], tuple],
    max_transfers: int = PACKING.max_transfers,
) -> None:
    """Price every stagger, intra-host grouping, piece count and ramp of ``plan`` on the
    per-arc model; keep the best per (plan, stagger, grouping) in ``configs``. Piece counts
    are tried up to the most that fit ``max_transfers``."""
    if len(plan.arc_entries()[0]) <= FOREST.balance_max_crossings:
        plan.balance_phases(fluid)
    t = max(Counter(tr.lane for tr in plan.trees).values())
    min_step = plan.ctx.cost.min_step_s
    live = int((plan.w > 0).sum())
    if live > max_units:
        return
    for width in FOREST.stagger_widths:
        if width > 1 and width > t:
            break
        plan.set_stagger(width)
        load, lat = plan.profile()
        count = plan.transfer_counter()
        for group in (1,) if plan.split_intra else FOREST.intra_groups:
            most = 0
            while (
                most < FOREST.piece_choices[-1]
                and (most + 1) * live <= max_units
                and count(most + 1, group) <= max_transfers
            ):
                most += 1
            if group > 1 and most <= group:
                continue
            # the size limits often bind: the most pieces they allow is a candidate too
            fits = sorted(
                {p for p in FOREST.piece_choices if p <= most} | ({most} if most else set())
            )
            key = (id(plan), width, group)
            for pieces in fits:
                ramps = [
                    piece_fractions(pieces, r) for r in FOREST.ramps if 2 * r <= pieces or not r
                ]
                for fracs, est in zip(
                    ramps, model_times(load, lat, size, ramps, group, min_step), strict=True
                ):
                    if est < configs.get(key, (math.inf,))[0]:
                        configs[key] = (est, plan, width, group, fracs, fits, fluid * size)


def refine_config(
    config: tuple, size: float
) -> tuple[float, HostPlan, int, int, np.ndarray, float]:
    """A configuration with piece sizes from the LP near its piece count, where that is
    faster: (model time, plan, stagger, intra-host grouping, fractions, fluid time)."""
    est0, plan, width, group, fracs0, fits, fluid = config
    best = (est0, plan, width, group, fracs0, fluid)
    plan.set_stagger(width)
    load, lat = plan.profile()
    k = fits.index(len(fracs0))
    for pieces in fits[max(0, k - FOREST.lp_pieces_below) : k + 2]:
        if load.shape[0] * (pieces + load.shape[1] - 1) > FOREST.host_lp_max_rows:
            continue  # seconds of HiGHS for < 0.05 % (a 64-rank fat tree with a slow host)
        fracs = lp_fractions(
            load, lat, size, pieces, group, intra=True, min_step=plan.ctx.cost.min_step_s
        )
        if fracs is None:
            continue
        est = model_time(
            load, lat, size, fracs, group, intra=True, min_step=plan.ctx.cost.min_step_s
        )
        if est < best[0]:
            best = (est, plan, width, group, fracs, fluid)
    return best


def mixed_program(
    ctx: PlanContext, ranked: list[tuple], max_units: int
) -> tuple[float, HostPlan, int, Program, int] | None:
    """The fastest program with per-piece tree mixes (forest.mix) over the FOREST.mix_configs best
    configurations whose merged intra-host transfers cover one piece, at the FOREST.mix_pieces
    largest piece counts from half the configuration's up to it (smallest first), within the
    mix LPs' budget (FOREST.mix_budget), up to FOREST.mix_max_ranks ranks: (cost-model time,
    plan, stagger, program, pieces); None where none fit."""
    best = None
    if len(ctx.ranks) > FOREST.mix_max_ranks:
        return best
    size = float(ctx.size_bytes)
    done = spent = 0
    jobs, calls = [], []  # every LP is chosen before any is solved: they run side by side
    for _, plan, width, group, fracs, *_ in ranked:
        if done >= FOREST.mix_configs:
            break
        if group != 1:
            continue
        done += 1
        trees = [j for j in range(len(plan.trees)) if plan.w[j] > 0]
        counts = [p for p in FOREST.piece_choices if len(fracs) / 2 <= p <= len(fracs)][
            -FOREST.mix_pieces :
        ]
        fit = []
        for pieces in counts:
            if spent + mix_cost(pieces, len(trees)) <= FOREST.mix_budget:
                spent += mix_cost(pieces, len(trees))
                fit.append(pieces)
        if not fit:
            continue
        plan.set_stagger(width)
        profiles = tree_profiles(plan, trees)
        moves, groups = host_moves(plan, trees)
        for pieces in fit:
            jobs.append((plan, width, plan.offsets, moves, groups, pieces))
            calls.append(
                (
                    profiles,
                    plan.w[trees],
                    plan.offsets,
                    len(ctx.router.bw),
                    pieces,
                    size,
                    ctx.cost.min_step_s,
                )
            )
    for (plan, width, offsets, moves, groups, pieces), x in zip(jobs, mix_lps(calls), strict=True):
        if x is None or mix_transfers(moves, groups, x, max_units) > PACKING.max_transfers:
            continue
        prog = build_mix(moves, groups, x, max_units, offsets)
        t = ctx.cost.program_time(ctx.ranks, prog, size)
        if best is None or t < best[0]:
            best = (t, plan, width, prog, pieces)
    return best
