"""Forest all-reduce: trees rooted at different ranks, reduce and broadcast pipelined together.

Hosts are super-nodes. A *lane* fixes, on every host, one rank (its port) and one way out of
the host (a NIC and the switch behind it); lanes spread over the host's ranks and NICs, so on
a rail-optimised cluster lane i is GPU i, NIC i and rail i. Every tree lives in one lane:
inside each host the other ranks reduce straight to the port and get the result back from it
(one hop over NVLink/PCIe), and between hosts the ports form a shallow tree whose edges are
routed port -> NIC -> switches -> NIC -> port.

Host-level trees come from degree targets: a host's load on its NIC is its degree in the tree,
so degrees are water-filled in proportion to the host's bandwidth (at least 1, summing to
2 (hosts - 1)), and ``t`` trees are built in which every host is internal in about one tree and
a leaf elsewhere (t = hosts gives stars; t ~ sqrt(hosts) keeps the height at 2). A linear
program over all trees of all lanes (HiGHS) then sets the shares so that the most loaded arc,
counting every arc of every routed path, is as light as possible. Tree edges between switches
are spread over the routes no longer in latency than the router's (forest.routes, ``spread_solve``).

Schedule (lockstep cost model): each tree's share is cut into P pieces; a port at depth k
(of a tree of height <= H) sends its partial sum of piece p at step p + H + 1 - k, as late as
its parent can use it, so the root holds the piece after step p + H; the result reaches depth
k at step p + H + k. Reduce and broadcast are mirror images: a leaf under the root sends and
hears back one step apart. Intra-host transfers are either merged per lane (gathered at step
p, handed back at step p + 2 H + 1, one transfer per 1, 2 or 4 consecutive pieces) or split
per tree (a host at depth k gathers at p + H - k, when its children's sums arrive, and hands
back at p + H + 1 + k); split, a tree's root gathers while its children send, which shortens
the pipeline's fill. The reduce of later pieces overlaps the broadcast of earlier ones. P
trades the pipeline's fill against the latency every step pays; it is chosen on an exact
per-arc model of the step times. On up to 8 hosts, hub trees (a degree-1 root above a hub)
join the stars so that a saturated host can hear before it sends, as a mirrored leaf.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.forest.build import (
    build_program,
    host_fan_in,
    max_fan_in,
    plan_fan_in,
)
from syncplan.planner.algorithms.forest.general import forest_any
from syncplan.planner.algorithms.forest.lanes import (
    Arcs,
    build_lanes,
    detour_lanes,
    exit_detour_lanes,
)
from syncplan.planner.algorithms.forest.plan import HostPlan
from syncplan.planner.algorithms.forest.pricing import mixed_program, price_configs, refine_config
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.forest.trees import HostTree, build_trees, hub_trees, tree_counts
from syncplan.planner.algorithms.packing import PACKING, start_any, stop_any
from syncplan.planner.bound_cuts import fluid_floor


class GaveUp(InfeasibleError):
    """The host-structured forest stopped early: its fluid time is far above the floor."""

    def __init__(self, fluid_s: float) -> None:
        super().__init__("forest: the host-structured trees are far slower than the floor")
        self.fluid_s = fluid_s


def forest(ctx: PlanContext) -> Candidate:
    """The host-structured forest, or the any-topology packing where that is faster by more
    than FOREST.fan_in_tolerance, or faster with no more host fan-in (the host-structured programs'
    fan-in is tuned for real transports: see forest_hosts); both are priced by the cost model
    on the program they emit.

    Where every host-forest tree set is FOREST.give_up x the fluid floor or slower (lanes over
    direct-connect meshes, tori, rings of hosts: 2-14x), the host forest stops before pricing
    and the packing goes first; the host forest is priced after all (from the same tree sets)
    where the packing is no faster than those trees' fluid time."""
    try:
        return _forest(ctx)
    finally:
        stop_any(ctx)  # packings started for a forest_any that never ran


def _forest(ctx: PlanContext) -> Candidate:
    hosts = packing = stop = None
    errors: list[str] = []
    give_up = (
        FOREST.give_up * fluid_floor(ctx) * ctx.size_bytes
        if 1 < len(ctx.ranks) <= FOREST.general_max_ranks
        else None
    )
    try:
        hosts = forest_hosts(ctx, give_up)
    except GaveUp as exc:
        stop = exc.fluid_s
    except InfeasibleError as exc:
        errors.append(str(exc))
    if stop is not None:
        try:
            packing = forest_any(ctx)
        except InfeasibleError as exc:
            errors.append(str(exc))
        if packing is not None and packing.predicted_time_s < stop:
            return packing
        try:
            hosts = forest_hosts(ctx)
        except InfeasibleError as exc:
            errors.append(str(exc))
    else:
        beat = _packing_beat(ctx, hosts.predicted_time_s) if hosts is not None else None
        try:
            packing = forest_any(ctx, beat)
        except InfeasibleError as exc:
            errors.append(str(exc))
    if hosts is None or packing is None:
        only = hosts if hosts is not None else packing
        if only is None:
            raise InfeasibleError("; ".join(errors))
        return only
    if packing.predicted_time_s < hosts.predicted_time_s * (1 - FOREST.fan_in_tolerance):
        return packing
    # within the tolerance the packing still wins where it is faster without more fan-in
    # (one host: neither has any)
    if packing.predicted_time_s < hosts.predicted_time_s and host_fan_in(
        ctx, packing.build()
    ) <= host_fan_in(ctx, hosts.build()):
        return packing
    return hosts


def _packing_beat(ctx: PlanContext, host_s: float) -> float:
    """What forest_any must beat beside a host program of ``host_s`` seconds: the packing's
    program is built only where it can be returned (its estimate is the cost model's time
    up to the rounding of units: FOREST.build_margin); on one host neither program has host
    fan-in, so the packing wins wherever it is faster."""
    tolerance = FOREST.fan_in_tolerance if len(ctx.host_groups) > 1 else 0.0
    return host_s * (1 - tolerance) * (1 + FOREST.build_margin)


def spread_solve(plan: HostPlan) -> list[tuple[HostPlan, float]]:
    """Shares of ``plan`` (a new plan: the router's routes; ``HostPlan.solve_shares``), then on
    spread routes where edges between switches have a choice of route: spread with equal
    shares, then again with the LP's shares while that lowers the fluid time; the router's
    routes where those are faster in the fluid limit. Returns [(plan, fluid time)]."""
    plain = plan.solve_shares()
    if not plan.spread_routes():  # no choice: spread_routes leaves the router's routes
        return [(plan, plain)]
    fluid = plan.solve_shares()
    for _ in range(FOREST.spread_rounds):
        routes, w, busy = plan.routes, plan.w, plan.busy_arcs
        plan.spread_routes(w)
        again = plan.solve_shares()
        if again >= fluid * (1 - 1e-6):
            plan.routes, plan.w, plan.busy_arcs, plan.flat_entries = routes, w, busy, None
            break
        fluid = again
    # back to the router's routes only where they are faster (on a tie, pricing both costs
    # ~1 s more at 64 ranks for ~0.01 %, fat-tree3-64-slow)
    if plain < fluid * (1 - 1e-6):
        plan.routes, plan.flat_entries = {}, None
        fluid = plan.solve_shares()
    return [(plan, fluid)]


def tree_sets(ctx: PlanContext) -> tuple[list, list[tuple[HostPlan, float]]]:
    """The host forest's lanes and every tree set it prices, with its shares solved
    (``spread_solve``): [(plan, fluid time)]."""
    lanes = build_lanes(ctx)
    lanes = lanes + exit_detour_lanes(ctx, lanes, 2 * FOREST.max_lanes - len(lanes))
    arcs = Arcs(ctx)
    m = len(ctx.host_groups)
    t_min = min(tree_counts(m))
    detoured = False
    solved: list[tuple[HostPlan, float]] = []
    for t in tree_counts(m):
        plan = HostPlan(ctx, lanes, build_trees(lanes, t), arcs)
        # a tree set that fits fewer than FOREST.min_pieces pieces pays the whole pipeline fill
        if (
            plan.transfers_per_piece(all_trees=True) * FOREST.min_pieces > PACKING.max_transfers
            and t != t_min
        ):
            continue
        plans = spread_solve(plan)
        if not detoured and plan.leaf_bound():
            detoured = True
            extra = detour_lanes(ctx, lanes)
            if extra:
                lanes = lanes + extra
                plan = HostPlan(ctx, lanes, build_trees(lanes, t), arcs)
                plans = spread_solve(plan)
        split = HostPlan(ctx, lanes, plan.trees, arcs, split_intra=True)
        if split.transfers_per_piece(all_trees=True) * FOREST.min_pieces <= PACKING.max_transfers:
            plans += spread_solve(split)
        if plan.transfers_per_piece(all_trees=True) * FOREST.min_pieces > PACKING.max_transfers:
            # few pieces: sending at 1 + height sometimes overlaps the trees better
            early = HostPlan(ctx, lanes, plan.trees, arcs, late=False)
            plans += spread_solve(early)
        if 3 <= m <= FOREST.hub_max_hosts and t < m:
            # one tree per lane: the least fan-in per step (see FOREST.fan_in_tolerance)
            per_lane: dict[int, list[HostTree]] = defaultdict(list)
            for tr in plan.trees:
                per_lane[tr.lane].append(tr)
            for k in range(t):
                single = [trs[k] for trs in per_lane.values() if k < len(trs)]
                for late in (True, False):
                    one = HostPlan(ctx, lanes, single, arcs, late=late)
                    plans += spread_solve(one)
        solved += plans
    if 3 <= m <= FOREST.hub_max_hosts:
        hubs = hub_trees(lanes)
        if hubs:
            solved += spread_solve(
                HostPlan(ctx, lanes, build_trees(lanes, m) + hubs, arcs, split_intra=True)
            )
    return lanes, solved


def forest_hosts(ctx: PlanContext, give_up: float | None = None) -> Candidate:
    """Host-structured forest: lanes of ports and NICs, host-level trees (module docstring);
    raises GaveUp before pricing piece counts where every tree set's fluid time is above
    ``give_up`` seconds (its solved tree sets are kept on the context for the next call)."""
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("forest", 0.0, lambda: Program(1, []), {"trees": 0})
    m = len(ctx.host_groups)
    size = float(ctx.size_bytes)
    max_units = min(FOREST.max_units, ctx.size_bytes)
    configs: dict[tuple[int, int, int], tuple] = {}
    # unpriced tree sets left by a call that gave up (pricing changes a plan: used once)
    found = ctx.memo.pop("forest_tree_sets", None) or tree_sets(ctx)
    lanes, solved = found
    # the shares LPs are cheap, pricing every piece count is not: stop where nothing can win
    seen = min((fluid for _, fluid in solved), default=math.inf) * size
    if give_up is not None and math.inf > seen > give_up:
        ctx.memo["forest_tree_sets"] = found
        raise GaveUp(seen)
    floor = fluid_floor(ctx) * size
    if 1 < n <= FOREST.general_max_ranks and (m == 1 or seen > floor * FOREST.speculate_above):
        start_any(ctx)  # forest will want the packings: see FOREST.speculate_above
    for plan, fluid in solved:
        price_configs(plan, fluid, size, max_units, configs)
    if not configs:
        raise InfeasibleError("forest: no tree set fits the plan size limits")
    # piece sizes from an LP, for the best configurations, near their best piece count
    ranked = sorted(configs.values(), key=lambda c: c[0])
    if 1 < n <= FOREST.general_max_ranks and _packing_beat(ctx, ranked[0][0]) > floor:
        start_any(ctx)  # forest_any stops at once only where its beat is at the floor
    best = min((refine_config(c, size) for c in ranked[: FOREST.lp_configs]), key=lambda c: c[0])
    # Many-to-one fan-in costs real transports more than the model says (incast at a star's
    # root): among configurations within FOREST.fan_in_tolerance of the best, take the least fan-in.
    calm = [c for c in ranked if c[0] <= best[0] * (1 + FOREST.fan_in_tolerance)][
        : FOREST.fan_in_configs
    ]

    def fan_in(plan: HostPlan, width: int, fracs: np.ndarray) -> int:
        if m > FOREST.hub_max_hosts:  # many hosts: the trees' fan-in
            return max_fan_in(plan)
        plan.set_stagger(width)
        return plan_fan_in(ctx, plan, fracs, max_units)

    pick = min(calm, key=lambda c: (fan_in(c[1], c[2], c[4]), c[0]), default=None)
    if pick is not None and (fan_in(pick[1], pick[2], pick[4]) < fan_in(best[1], best[2], best[4])):
        best = refine_config(pick, size)
    _, plan, width, group, fracs, fluid = best
    plan.set_stagger(width)
    program = build_program(plan, fracs, max_units, group)
    predicted = ctx.cost.program_time(ctx.ranks, program, size)
    details = {
        "trees": int((plan.w > 0).sum()),
        "lanes": len(lanes),
        "pieces": len(fracs),
        "smallest_piece": round(float(fracs.min() / fracs.max()), 4),
        "stagger": width,
        "intra_group": group,
        "host_tree_height": plan.hmax,
        "fluid_time_s": fluid,
    }
    mixed = mixed_program(ctx, ranked, max_units)
    if mixed is not None and mixed[0] < predicted * (1 - 1e-6):
        t, mplan, mwidth, mprog, mpieces = mixed
        if m > FOREST.hub_max_hosts:
            calmer = max_fan_in(mplan) <= max_fan_in(plan)
        else:
            calmer = host_fan_in(ctx, mprog) <= host_fan_in(ctx, program)
        if calmer or t < predicted * (1 - FOREST.fan_in_tolerance):
            program, predicted = mprog, t
            details = {
                "trees": int((mplan.w > 0).sum()),
                "lanes": len(lanes),
                "pieces": mpieces,
                "mixed": True,
                "stagger": mwidth,
                "intra_group": 1,
                "host_tree_height": mplan.hmax,
                "fluid_time_s": fluid,
            }
    return Candidate("forest", predicted, lambda: program, details)
