"""How hard ``forest`` searches: the pieced LPs of effort "thorough".

Effort "fast" (the default) gives the pieced step-priced LPs of one plan a few seconds of
simplex work (``packing_pieced.PIECES_BUDGET``). Effort "thorough" is for a plan made once
for a long job: after the same runs, it gives pieced LPs minutes, from more packings, over
time-reversal orbits where that halves the master (docs/planner.md, "Effort").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing import (
    Budget,
    Group,
    ReversedLP,
    WindowLP,
    packings,
    reverse_arcs,
)

log = logging.getLogger(__name__)  # the CLI's progress line shows its messages

THOROUGH_BUDGET = 2e10  # simplex iterations x master nonzeros the thorough LPs of one plan
# may spend together (8-23 ns a unit here: 3-8 min at most)
THOROUGH_ROUNDS = 8  # rounds a piece count (the 64-piece rounds take 10-20 s each)
THOROUGH_ROUND_CAP = 256  # new columns a round, the most negative (all: 5,000-column masters)
THOROUGH_MAX_COLUMNS = 16_000  # in place of packing_pieced.PIECES_MAX_COLUMNS
THOROUGH_WALL_S = 600  # no thorough LP round starts after this (their pricing is not in the
# budget: a 16-rank cube mesh's took 9 min in all with another bench beside it)
THOROUGH_PIECED = 2  # packings given pieces (WINDOW_PIECED by one-piece time, then by fluid)


def thorough_runs(
    ctx: PlanContext, chosen: list[tuple], group: Group | None, lp_of: Callable[..., WindowLP]
) -> list[tuple]:
    """The pieced LPs of effort "thorough": from the packings ``chosen`` and the pools of
    the others by fluid time (THOROUGH_PIECED in all: deeper trees fill a pipeline at more
    steps), one THOROUGH_BUDGET between them, THOROUGH_ROUNDS a piece count of at most
    THOROUGH_ROUND_CAP new columns each, over time-reversal orbits where the topology has
    no automorphism group but every link one bandwidth both ways; progress logged."""
    n = len(ctx.ranks)
    table = packings(ctx)
    seen = {key for _, key, _, _ in chosen}
    seeds = (
        chosen
        + [
            (table[key].theta, key, n if key[1] is None else key[1], table[key].pool)
            for key in sorted(table, key=lambda k: (table[k].theta, str(k)))
            if key not in seen
        ][: THOROUGH_PIECED - len(chosen)]
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

    limits = {
        "rounds": THOROUGH_ROUNDS,
        "max_columns": THOROUGH_MAX_COLUMNS,
        "round_cap": THOROUGH_ROUND_CAP,
        "progress": progress,
    }
    budget = Budget(THOROUGH_BUDGET, time.monotonic() + THOROUGH_WALL_S)
    return [(seed, lp_of, budget, limits) for seed in seeds]
