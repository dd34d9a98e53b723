"""Pipelined tree pairs priced for the any-topology forest (``forest_any``).

A packing's pairs run in pieces (``packing.schedule.PairSchedule``): every piece count that
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
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
from syncplan.core.program import Program
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.packing import PACKING, Pair, PairSchedule
from syncplan.planner.algorithms.pipeline import lp_fractions, model_time, piece_fractions


def pair_variants(pairs: list[Pair]) -> list[list[Pair]]:
    """The pairs above PACKING.min_share, and the few largest (small sizes: less fill per step)."""
    ranked = sorted(pairs, key=lambda p: -p.share)
    kept = [p for p in ranked if p.share >= PACKING.min_share] or ranked[:1]
    out = [kept]
    for k in FOREST.few_pairs:
        if k < len(kept):
            out.append(kept[:k])
    shallow = min(ranked, key=lambda p: (p.reduce.height + p.broadcast.height, -p.share))
    out.append([shallow])
    return out


class Found(NamedTuple):
    """The parts of the program a ``Pipelined`` found (``Pipelined.found``)."""

    sched: PairSchedule
    shares: np.ndarray
    fracs: np.ndarray
    load: np.ndarray
    lat: np.ndarray


@dataclass
class Pipelined:
    """The fastest pipelined program of a packing's pairs found so far (none: ``sched`` None)."""

    time: float = math.inf
    """Its cost-model estimate in seconds (the built program's once ``built_time`` ran)."""
    sched: PairSchedule | None = None
    """The pairs it pipelines."""
    shares: np.ndarray | None = None
    """Each pair's share of the buffer."""
    fracs: np.ndarray | None = None
    """Each piece's fraction of a share."""
    load: np.ndarray | None = None
    """The per-arc load profile of ``sched`` with ``shares``."""
    lat: np.ndarray | None = None
    """The per-step latency profile of the same."""
    packing: str = ""
    """Which packing it comes from (the plan's details)."""
    timed: tuple[np.ndarray, float] | None = None
    """(fracs, time) of the last ``built_time``."""
    built: tuple[np.ndarray, Callable[[], Program]] | None = None
    """(fracs, builder) of the last ``program_builder``."""

    def found(self) -> Found:
        """Its program's parts, once one was found (``price_pipelines`` sets them together)."""
        sched, shares, fracs, load, lat = self.sched, self.shares, self.fracs, self.load, self.lat
        assert sched is not None and shares is not None and fracs is not None, "none found"
        assert load is not None and lat is not None, "none found"
        return Found(sched, shares, fracs, load, lat)

    def take(self, other: Pipelined, packing: str) -> None:
        """Become ``other`` (every field), from ``packing``."""
        for f in fields(self):
            setattr(self, f.name, getattr(other, f.name))
        self.packing = packing


def price_pipelines(
    sched: PairSchedule, shares: np.ndarray, size: float, units: int, best: Pipelined
) -> None:
    """Every piece count that fits with equal pieces, then ramps at the best three."""
    load, lat = sched.profile(shares)
    min_step = sched.ctx.cost.min_step_s
    per_piece = sched.transfers_per_piece
    live = int((shares > 0).sum())
    fits = [
        p
        for p in FOREST.pipeline_pieces
        if p * live <= units and p * per_piece <= PACKING.max_transfers
    ]
    if not fits:
        return
    equal = sorted(
        (model_time(load, lat, size, piece_fractions(p, 0), min_step=min_step), p) for p in fits
    )
    tried = [(est, p, 0) for est, p in equal]
    for _, pieces in equal[:3]:
        for ramp in FOREST.ramps[1:]:
            if 2 * ramp > pieces:
                break
            est = model_time(load, lat, size, piece_fractions(pieces, ramp), min_step=min_step)
            tried.append((est, pieces, ramp))
    est, pieces, ramp = min(tried)
    if est < best.time:
        best.time, best.sched, best.shares = est, sched, shares
        best.fracs, best.load, best.lat = piece_fractions(pieces, ramp), load, lat


def built_time(ctx: PlanContext, best: Pipelined, units: int) -> float:
    """The cost-model time of the program ``best`` builds (``PairSchedule.program_time``:
    0.01 s where building and pricing 700,000 transfers takes a second), remembered for its
    pieces; where the cost model has overhead terms, the built program's."""
    found = best.found()
    timed = best.timed
    if timed is not None and timed[0] is found.fracs:
        return timed[1]
    size = float(ctx.size_bytes)
    t = found.sched.program_time(found.shares, found.fracs, units, size)
    if t is None:
        t = ctx.cost.program_time(ctx.ranks, program_builder(best, units)(), size)
    best.timed = (found.fracs, t)
    return t


def program_builder(best: Pipelined, units: int) -> Callable[[], Program]:
    """A builder of ``best``'s program that builds it once, when first asked."""
    sched, shares, fracs, _, _ = best.found()
    built = best.built
    if built is not None and built[0] is fracs:
        return built[1]
    build = functools.cache(lambda: sched.build(shares, fracs, units))
    best.built = (fracs, build)
    return build


def refine_pieces(ctx: PlanContext, best: Pipelined, units: int) -> None:
    """The best pipelined program at half, the same and 1.5x its piece count, with ramped
    pieces and the piece-size LP's (``pipeline.lp_fractions``): ``best`` takes the fastest.
    The LPs (up to a second of HiGHS each, which runs without the GIL) solve side by side
    before any is compared, so the choice is the one made one after the other."""
    found, size = best.found(), float(ctx.size_bytes)
    sched, pieces = found.sched, len(found.fracs)
    # the LP takes seconds of HiGHS on many pieces, for < 0.1 % over ramped pieces
    limit = (
        FOREST.lp_max_rows
        if len(ctx.ranks) <= PACKING.unlimited_max_ranks
        else FOREST.lp_max_rows_large
    )
    counts = [
        k
        for k in (pieces // 2, pieces, pieces * 3 // 2)
        if k >= 2
        and k * len(sched.pairs) <= units
        and k * sched.transfers_per_piece <= PACKING.max_transfers
    ]
    solved = [k for k in counts if len(found.load) * (k + sched.columns - 1) <= limit]
    load, lat, min_step = found.load, found.lat, ctx.cost.min_step_s
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
        tries: list[np.ndarray | None] = [
            piece_fractions(k, ramp) for ramp in FOREST.ramps if 2 * ramp <= k
        ]
        if k in lps:
            tries.append(lps[k])
        for fracs in tries:
            if fracs is None:
                continue
            est = model_time(load, lat, size, fracs, min_step=min_step)
            if est < best.time:
                best.time, best.fracs = est, fracs
