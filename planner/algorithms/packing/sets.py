"""The packing LPs of the any-topology forest: one per route set and depth slack.

Two route sets: any routes whose inner nodes only forward (``RankRoutes``) and the short
routes of ``QuickRoutes`` (where they differ). Per set, the LPs of depth slack 0, 1, 2 and no
limit, each starting from the trees of the one before; above UNLIMITED_MAX_RANKS with fewer
rounds, a stall rule and a stop at the floor. ``forest_any`` pipelines and prices them; the
dual bound (``syncplan.planner.bound``) reads their prices.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.lp import (
    FLOOR_GAP,
    Packing,
    PackingLP,
    QuickRoutes,
    RankRoutes,
)
from syncplan.planner.bound import fluid_floor

SLACKS = (0, 1, 2, None)  # depth over each rank's hop distance from the root; None: any
UNLIMITED_MAX_RANKS = 32  # above: fewer rounds, a stall rule, no unlimited short routes
SLACKS_LARGE = (0, 1, 2, None)  # above UNLIMITED_MAX_RANKS, in order until one meets the
# floor: the unlimited packing last (deep trees fill slowly, but where the depth limits keep
# the packing far from the floor, as on two switches joined by a slow trunk or a directed
# ring of hosts, it is 1.3-1.8x faster)
FLOOR_ABOVE = 16  # ranks above which the cut floor ends a packing LP (see packings)
UNLIMITED_GAP = 0.03  # above UNLIMITED_MAX_RANKS the unlimited packing is solved only where
# the depth-limited ones stay this far above the floor (a 64-rank torus: 1.8 s for a packing
# 1 % closer to the floor whose 2x deeper trees lose it in the pipeline's fill)
ROUNDS_LARGE = 15  # column-generation rounds per packing above UNLIMITED_MAX_RANKS
STALL_ROUNDS = 6  # above UNLIMITED_MAX_RANKS: column generation stops after this many rounds
# in a row that lower the fluid time by less than packing.TOLERANCE (full meshes: 40 flat
# rounds per packing at 24 ranks; not below: a 4x6 mesh's LP left a 10-round flat for the
# optimum, and an 8-GPU mesh an 18-round one)
STALL_MID = 12  # from FLOOR_ABOVE to UNLIMITED_MAX_RANKS ranks: the same after this many
# (a 32-rank full mesh's deeper short-route packings sat 40 rounds on their first value)


def start_any(ctx: PlanContext) -> None:
    """Start the any-route packings in a background thread, for ``packings`` to collect
    (the host forest runs meanwhile: these LPs route with their own Dijkstra and change
    nothing it reads, so the packings are the same). ``stop_any`` abandons them."""
    if "packings" in ctx.memo or "packings_any" in ctx.memo:
        return
    cancel = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="packing-any")
    every = RankRoutes(ctx)
    future = pool.submit(route_set_packings, ctx, "any", every, _floor(ctx), cancel)
    pool.shutdown(wait=False)
    ctx.memo["packings_any"] = (every, future, cancel)


def stop_any(ctx: PlanContext) -> None:
    """Abandon background packings that ``packings`` has not collected (they stop after
    their current LP; a later ``packings`` solves its own)."""
    started = ctx.memo.pop("packings_any", None)
    if started is not None:
        started[2].set()


def packings(ctx: PlanContext) -> dict[tuple[str, int | None], Packing]:
    """The packing of every route set and depth slack (memoised on the context): any routes
    whose inner nodes only forward, and the short routes of ``QuickRoutes``. The two route
    sets' LPs depend only on their own set's earlier LPs, so the any routes' run in a
    second thread (HiGHS releases the GIL while it solves; the result is the same as one
    after the other), started early by ``start_any`` where forest expects to need them."""
    memo = ctx.memo.get("packings")
    if memo is not None:
        return memo
    started = ctx.memo.pop("packings_any", None)
    if started is None:
        start_any(ctx)
        started = ctx.memo.pop("packings_any")
    every, future, _ = started
    short = QuickRoutes(ctx)
    route_sets = [("any", every)] + ([] if _same_routes(ctx, short) else [("short", short)])
    ctx.memo["packing_routes"] = dict(route_sets)
    out = {} if len(route_sets) == 1 else route_set_packings(ctx, "short", short, _floor(ctx))
    out = {**future.result(), **out}  # the any routes' first, as before
    ctx.memo["packings"] = out
    return out


def _floor(ctx: PlanContext) -> float:
    """The cut floor ends an optimal LP early; on few ranks the rounds after the optimum cost
    milliseconds and the trees they add pipeline better, so it applies above FLOOR_ABOVE."""
    return fluid_floor(ctx) if len(ctx.ranks) > FLOOR_ABOVE else 0.0


def route_set_packings(
    ctx: PlanContext,
    name: str,
    routes: RankRoutes | QuickRoutes,
    floor: float,
    cancel: threading.Event | None = None,
) -> dict[tuple[str, int | None], Packing]:
    """The packings of one route set, each depth slack's LP starting from the trees of the
    one before (``cancel``: stop before the next LP; the result is then incomplete)."""
    out: dict[tuple[str, int | None], Packing] = {}
    start: list = []
    large = len(ctx.ranks) > UNLIMITED_MAX_RANKS
    for slack in SLACKS_LARGE if large else SLACKS:
        if cancel is not None and cancel.is_set():
            break
        if slack is None and name == "short":
            continue
        if (
            slack is None
            and large
            and start
            and min(p.theta for p in out.values()) <= floor * (1 + UNLIMITED_GAP)
        ):
            continue  # deep trees fill for longer than the little they could gain
        lp = PackingLP(ctx, slack, routes, start, floor)
        stall = STALL_ROUNDS if large else STALL_MID if len(ctx.ranks) > FLOOR_ABOVE else None
        out[name, slack] = lp.solve(ROUNDS_LARGE if large else None, stall)
        start = out[name, slack].trees
        if large and out[name, slack].theta <= floor * (1 + FLOOR_GAP):
            break  # optimal (on fewer ranks deeper packings still pipeline better)
    return out


def _same_routes(ctx: PlanContext, short: QuickRoutes) -> bool:
    """Whether the short routes are all the routes (direct-wired ranks: every rank's links
    lead to ranks, and the short routes are those links), so their packings are the same."""
    index = {r: i for i, r in enumerate(ctx.ranks)}
    direct = set()
    for u, v in ctx.router.arc_id:
        if u in index:
            if v not in index:
                return False
            direct.add((index[u], index[v]))
    return set(short.pairs) == direct and all(len(short.paths[p]) == 2 for p in short.pairs)
