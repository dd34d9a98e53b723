"""The packing LPs of the any-topology forest: one per route set and depth slack.

Two route sets: any routes whose inner nodes only forward (``RankRoutes``) and the short
routes of ``QuickRoutes`` (where they differ). Per set, the LPs of depth slack 0, 1, 2 and no
limit, each starting from the trees of the one before; above PACKING.unlimited_max_ranks with fewer
rounds, a stall rule and a stop at the floor. ``forest_any`` pipelines and prices them; the
dual bound (``syncplan.planner.bound``) reads their prices.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.lp import Packing, PackingLP
from syncplan.planner.algorithms.packing.routes import QuickRoutes, RankRoutes
from syncplan.planner.algorithms.packing.settings import PACKING
from syncplan.planner.bound_cuts import fluid_floor


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
    milliseconds and the trees they add pipeline better, so it applies above PACKING.floor_above."""
    return fluid_floor(ctx) if len(ctx.ranks) > PACKING.floor_above else 0.0


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
    large = len(ctx.ranks) > PACKING.unlimited_max_ranks
    for slack in PACKING.slacks_large if large else PACKING.slacks:
        if cancel is not None and cancel.is_set():
            break
        if slack is None and name == "short":
            continue
        if (
            slack is None
            and large
            and start
            and min(p.theta for p in out.values()) <= floor * (1 + PACKING.unlimited_gap)
        ):
            continue  # deep trees fill for longer than the little they could gain
        lp = PackingLP(ctx, slack, routes, start, floor)
        stall = (
            PACKING.stall_rounds
            if large
            else PACKING.stall_mid
            if len(ctx.ranks) > PACKING.floor_above
            else None
        )
        out[name, slack] = lp.solve(PACKING.rounds_large if large else None, stall)
        start = out[name, slack].trees
        if large and out[name, slack].theta <= floor * (1 + PACKING.floor_gap):
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
