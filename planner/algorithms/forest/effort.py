"""How hard ``forest`` searches: the pieced LPs of effort "thorough".

Effort "fast" (the default) gives the pieced step-priced LPs of one plan a few seconds of
simplex work (``PACKING.pieces_budget``). Effort "thorough" is for a plan made once
for a long job: after the same runs, it gives pieced LPs minutes, from more packings, over
time-reversal orbits where that halves the master (docs/planner.md, "Effort").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.packing import (
    Budget,
    Group,
    ReversedLP,
    TreeColumn,
    WindowLP,
    packings,
    reverse_arcs,
)

log = logging.getLogger(__name__)  # the CLI's progress line shows its messages


class Seed(NamedTuple):
    """A packing a pieced step-priced LP starts from."""

    time: float
    """What orders the seeds of one source: the estimated seconds of its step-priced program
    (``price_windows``) or its fluid seconds per byte (``Packing.theta``)."""
    key: tuple[str, int | None]
    """Its route set and depth slack (``packings``)."""
    slack: int
    """The depth slack its LP keeps (the rank count where unlimited)."""
    trees: list[TreeColumn]
    """The trees it starts from."""


class PiecedRun(NamedTuple):
    """One pieced step-priced LP to solve (``pieced_window``)."""

    seed: Seed
    lp_of: Callable[..., WindowLP]
    budget: Budget
    limits: dict[str, Any]
    """More keyword arguments of ``pieced_window``."""


def thorough_runs(
    ctx: PlanContext, chosen: list[Seed], group: Group | None, lp_of: Callable[..., WindowLP]
) -> list[PiecedRun]:
    """The pieced LPs of effort "thorough": from the packings ``chosen`` and the pools of
    the others by fluid time (FOREST.thorough_pieced in all: deeper trees fill a pipeline at more
    steps), one FOREST.thorough_budget between them, FOREST.thorough_rounds a piece count of at most
    FOREST.thorough_round_cap new columns each, over time-reversal orbits where the topology has
    no automorphism group but every link one bandwidth both ways; progress logged."""
    n = len(ctx.ranks)
    table = packings(ctx)
    seen = {key for _, key, _, _ in chosen}
    seeds = (
        chosen
        + [
            Seed(table[key].theta, key, n if key[1] is None else key[1], table[key].pool)
            for key in sorted(table, key=lambda k: (table[k].theta, str(k)))
            if key not in seen
        ][: FOREST.thorough_pieced - len(chosen)]
    )
    if group is None and reverse_arcs(ctx) is not None:
        lp_of = ReversedLP  # half the master (a degraded 4x4 mesh: 1.049x -> 1.019x)
    t0 = time.perf_counter()

    def progress(pieces: int, t: float) -> None:
        log.info(
            "forest, thorough: %d pieces: %.4f ms (%.0f s)",
            pieces,
            t * 1e3,
            time.perf_counter() - t0,
        )

    limits: dict[str, Any] = {
        "rounds": FOREST.thorough_rounds,
        "max_columns": FOREST.thorough_max_columns,
        "round_cap": FOREST.thorough_round_cap,
        "progress": progress,
    }
    budget = Budget(FOREST.thorough_budget, time.monotonic() + FOREST.thorough_wall_s)
    return [PiecedRun(seed, lp_of, budget, limits) for seed in seeds]
