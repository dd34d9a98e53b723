"""Pipelined tree pairs priced for the any-topology forest (``forest_any``).

A packing's pairs run in pieces (``packing_schedule.PairSchedule``): every piece count that
fits the plan's size limits is priced with equal and ramped pieces (``price_pipelines``),
and the best program's piece count, half and 1.5x it again with the piece-size LP's
fractions (``refine_pieces``). ``pair_variants`` gives the pair subsets priced (fewer,
larger pairs at small sizes); ``built_time`` and ``program_builder`` price and build the
chosen program once.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing import MIN_SHARE, UNLIMITED_MAX_RANKS, Pair, PairSchedule
from syncplan.planner.algorithms.pipeline import lp_fractions, model_time, piece_fractions
from syncplan.planner.program import Program

FEW_PAIRS = (1, 2, 4, 8, 16, 32, 64)  # the largest pairs: fewer transfers, more pieces
PIECES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
RAMPS = (0, 1, 2, 3)
MAX_TRANSFERS = 800_000
LP_MAX_ROWS = 20_000  # arcs x steps of the piece-size LP (pipeline.lp_fractions); above: none
LP_MAX_ROWS_LARGE = 10_000  # the same above UNLIMITED_MAX_RANKS: 64-rank plans at 256 MiB
# spent 0.2-1.8 s on 12-18k-row LPs and 14 of 15 planned the same without them; at 1 MiB
# their LPs have 4-9k rows, take 0.04-0.2 s and gain up to 0.4 % (docs/status.md, session 17)


def pair_variants(pairs: list[Pair]) -> list[list[Pair]]:
    """The pairs above MIN_SHARE, and the few largest (small sizes: less fill per step)."""
    ranked = sorted(pairs, key=lambda p: -p.share)
    kept = [p for p in ranked if p.share >= MIN_SHARE] or ranked[:1]
    out = [kept]
    for k in FEW_PAIRS:
        if k < len(kept):
            out.append(kept[:k])
    shallow = min(ranked, key=lambda p: (p.reduce.height + p.broadcast.height, -p.share))
    out.append([shallow])
    return out


def price_pipelines(
    sched: PairSchedule, shares: np.ndarray, size: float, units: int, best: dict
) -> None:
    """Every piece count that fits with equal pieces, then ramps at the best three."""
    load, lat = sched.profile(shares)
    min_step = sched.ctx.cost.min_step_s
    per_piece = sched.transfers_per_piece
    live = int((shares > 0).sum())
    fits = [p for p in PIECES if p * live <= units and p * per_piece <= MAX_TRANSFERS]
    if not fits:
        return
    equal = sorted(
        (model_time(load, lat, size, piece_fractions(p, 0), min_step=min_step), p) for p in fits
    )
    tried = [(est, p, 0) for est, p in equal]
    for _, pieces in equal[:3]:
        for ramp in RAMPS[1:]:
            if 2 * ramp > pieces:
                break
            est = model_time(load, lat, size, piece_fractions(pieces, ramp), min_step=min_step)
            tried.append((est, pieces, ramp))
    est, pieces, ramp = min(tried)
    if est < best.get("time", math.inf):
        best.update(
            time=est,
            sched=sched,
            shares=shares,
            fracs=piece_fractions(pieces, ramp),
            load=load,
            lat=lat,
        )


def built_time(ctx: PlanContext, best: dict, units: int) -> float:
    """The cost-model time of the program ``best`` builds (``PairSchedule.program_time``:
    0.01 s where building and pricing 700,000 transfers takes a second), remembered for its
    pieces; where the cost model has overhead terms, the built program's."""
    timed = best.get("timed")
    if timed is not None and timed[0] is best["fracs"]:
        return timed[1]
    size = float(ctx.size_bytes)
    t = best["sched"].program_time(best["shares"], best["fracs"], units, size)
    if t is None:
        t = ctx.cost.program_time(ctx.ranks, program_builder(best, units)(), size)
    best["timed"] = (best["fracs"], t)
    return t


def program_builder(best: dict, units: int) -> Callable[[], Program]:
    """A builder of ``best``'s program that builds it once, when first asked."""
    sched, shares, fracs = best["sched"], best["shares"], best["fracs"]
    built = best.get("built")
    if built is not None and built[0] is fracs:
        return built[1]
    build = functools.cache(lambda: sched.build(shares, fracs, units))
    best["built"] = (fracs, build)
    return build


def refine_pieces(ctx: PlanContext, best: dict, units: int) -> None:
    """The best pipelined program at half, the same and 1.5x its piece count, with ramped
    pieces and the piece-size LP's (``pipeline.lp_fractions``): ``best`` takes the fastest.
    The LPs (up to a second of HiGHS each, which runs without the GIL) solve side by side
    before any is compared, so the choice is the one made one after the other."""
    sched, size = best["sched"], float(ctx.size_bytes)
    pieces = len(best["fracs"])
    # the LP takes seconds of HiGHS on many pieces, for < 0.1 % over ramped pieces
    limit = LP_MAX_ROWS if len(ctx.ranks) <= UNLIMITED_MAX_RANKS else LP_MAX_ROWS_LARGE
    counts = [
        k
        for k in (pieces // 2, pieces, pieces * 3 // 2)
        if k >= 2
        and k * len(sched.pairs) <= units
        and k * sched.transfers_per_piece <= MAX_TRANSFERS
    ]
    solved = [k for k in counts if len(best["load"]) * (k + sched.columns - 1) <= limit]
    load, lat, min_step = best["load"], best["lat"], ctx.cost.min_step_s
    with ThreadPoolExecutor(
        max_workers=max(1, len(solved)), thread_name_prefix="fractions"
    ) as pool:
        lps = dict(
            zip(
                solved,
                pool.map(lambda k: lp_fractions(load, lat, size, k, min_step=min_step), solved),
                strict=True,
            )
        )
    for k in counts:
        tries = [piece_fractions(k, ramp) for ramp in RAMPS if 2 * ramp <= k]
        if k in lps:
            tries.append(lps[k])
        for fracs in tries:
            if fracs is None:
                continue
            est = model_time(load, lat, size, fracs, min_step=min_step)
            if est < best["time"]:
                best.update(time=est, fracs=fracs)
