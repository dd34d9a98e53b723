"""Step-priced tree packings (planner.algorithms.packing.window): depth-priced greedy trees,
the LP's bandwidth time against the bound, and one-piece programs that pay no fill."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from syncplan.core.program import program_to_doc
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing import PACKING
from syncplan.planner.algorithms.packing import window as packing_window
from syncplan.planner.algorithms.packing.arborescence import (
    layered_trees,
    layered_trees_costed,
    shallow_trees,
    tree_depths,
)
from syncplan.planner.algorithms.packing.pieced import pieced_window, window_program
from syncplan.planner.algorithms.packing.schedule import PairSchedule, pair_trees
from syncplan.planner.algorithms.packing.sets import packings
from syncplan.planner.algorithms.packing.window import (
    Budget,
    WindowLP,
)
from syncplan.planner.algorithms.pipeline import model_time, piece_fractions
from syncplan.planner.bound import lower_bound
from syncplan.planner.families import FAMILY_EXAMPLES
from syncplan.planner.family_grids import host_ring, torus
from syncplan.planner.family_hosts import directed_cluster, full_mesh, hybrid_cube_mesh
from syncplan.planner.plan import make_plan, with_routes
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

SIZE = 256 << 20


def test_layered_trees_respect_depth_limits_and_match_flat_prices() -> None:
    rng = np.random.default_rng(11)
    n = 8
    cost = rng.random((n, n))
    limit = np.full((n, n), 3)
    steps = np.arange(4)
    layered = layered_trees(np.stack([cost] * 4), steps, limit)
    assert (layered == shallow_trees(cost, limit)).all()  # same prices at every depth
    deep = rng.random((4, n, n))
    for r, parent in enumerate(layered_trees(deep, steps, limit)):
        depth = tree_depths(parent)
        assert parent[r] == -1 and depth[r] == 0 and depth.max() <= 3
        assert sorted(np.nonzero(parent < 0)[0]) == [r]


def test_layered_trees_report_what_their_edges_cost() -> None:
    rng = np.random.default_rng(12)
    n = 9
    deep = rng.random((5, n, n))
    steps = np.array([0, 3, 1, 4, 2])
    parents, costs = layered_trees_costed(deep, steps, np.full((n, n), 4))
    for r, (parent, cost) in enumerate(zip(parents, costs, strict=True)):
        depth = tree_depths(parent)
        edges = [deep[steps[depth[v]], parent[v], v] for v in range(n) if v != r]
        assert cost == pytest.approx(sum(edges), rel=1e-12)


def test_layered_trees_of_many_step_maps_at_once_are_each_solved_alone() -> None:
    """The pieced LP grows every piece's trees in one call (one step map per piece): the
    same parents and the same float costs as one call per piece, ties included."""
    rng = np.random.default_rng(13)
    n, steps = 7, 9
    deep = np.round(rng.random((steps, n, n)), 1)  # coarse prices: many ties
    limit = rng.integers(1, 5, (n, n))  # per root and rank: its deepest place
    np.fill_diagonal(limit, 0)
    maps = np.array([p + np.concatenate([[0], 4 - np.arange(1, 5)]) for p in range(5)])
    parents, costs = layered_trees_costed(deep, maps, limit)
    assert parents.shape == (5, n, n) and costs.shape == (5, n)
    for p, step_of in enumerate(maps):
        alone_parents, alone_costs = layered_trees_costed(deep, step_of, limit)
        assert np.array_equal(parents[p], alone_parents)
        assert np.array_equal(costs[p], alone_costs)  # bit for bit
        for r, parent in enumerate(alone_parents):  # and what a step map means
            depth = tree_depths(parent)
            edges = [deep[step_of[depth[v]], parent[v], v] for v in range(n) if v != r]
            assert alone_costs[r] == pytest.approx(sum(edges), rel=1e-12)
            assert (depth <= limit[r]).all()


def test_window_pricing_builds_only_trees_that_can_price_in() -> None:
    """The pricing skips trees whose layered cost (an upper bound on the reduced cost by at
    most the routes' tie-breaks) cannot price in: it returns the same trees as building and
    pricing every root's trees of every piece."""
    t = Topology.from_dict(hybrid_cube_mesh(degraded=(0, 3), factor=0.5))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    lp = WindowLP(ctx, ctx.memo["packing_routes"][key[0]], key[1], table[key].trees, 4)
    _, obj, _, prices, duals = lp.solve_master(Budget(np.inf))
    threshold = PACKING.tolerance * obj
    fast = lp.price_columns(prices, duals, threshold)
    saved = packing_window.PACKING
    # every tree passes the filter: each is built and priced
    packing_window.PACKING = replace(saved, price_tie=1e30)
    try:
        every = lp.price_columns(prices, duals, threshold)
    finally:
        packing_window.PACKING = saved
    assert fast, "the first round prices trees in"

    def keys(cols: list) -> list:
        return [(p, c.inward, c.root, c.parent.tobytes()) for c, p in cols]

    assert keys(fast) == keys(every)


def test_a_round_of_columns_added_at_once_is_the_lp_of_one_at_a_time() -> None:
    """WindowLP adds a round's priced columns in one call (a repeat once): the master has
    the same columns and solves to the same shares and prices as adding them one by one."""
    t = Topology.from_dict(hybrid_cube_mesh(degraded=(0, 3), factor=0.5))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    routes = ctx.memo["packing_routes"][key[0]]
    lps = [WindowLP(ctx, routes, key[1], table[key].trees, 4) for _ in range(2)]
    _, obj, _, prices, duals = lps[0].solve_master(Budget(np.inf))
    lps[1].solve_master(Budget(np.inf))  # both warm from the same basis
    cols = lps[0].price_columns(prices, duals, PACKING.tolerance * obj)
    assert len(cols) > 1
    before = len(lps[0].trees)
    assert lps[0].add_all(cols + cols[:1]) == len(cols)  # the repeat is not added
    assert [lps[1].add_all([(c, p)]) for c, p in cols] == [1] * len(cols)  # one by one
    assert len(lps[0].trees) == len(lps[1].trees) == before + len(cols)
    assert lps[0].master.cols == lps[1].master.cols
    one, other = lps[0].solve_master(Budget(np.inf)), lps[1].solve_master(Budget(np.inf))
    assert one[0] == other[0]
    assert np.array_equal(one[2], other[2]) and np.array_equal(one[3], other[3])


def test_depth_prices_change_the_tree() -> None:
    """A path 0 -> 1 -> 2 is cheap at depth 1 and dear at depth 2: the tree goes 0 -> 2."""
    cost = np.full((2, 3, 3), 1.0)
    cost[1, 0, 1] = 0.1  # depth 1 via step 1
    cost[1, 0, 2] = 0.5
    cost[1, 1, 2] = 0.05  # 1 -> 2 is cheap at step 1...
    cost[0, 1, 2] = 9.0  # ...and dear at step 0, where depth 2 runs
    limit = np.full((3, 3), 2)
    assert layered_trees(cost, np.array([0, 1, 0]), limit)[0].tolist() == [-1, 0, 0]
    assert layered_trees(cost, np.array([0, 1, 1]), limit)[0].tolist() == [-1, 0, 1]


@pytest.mark.parametrize(
    "name, topo",
    [
        ("torus-4x4", torus(4, 4)),
        ("cube-mesh", hybrid_cube_mesh()),
        ("full-mesh-8-slow", full_mesh(8, slow_pair=(2, 5))),
    ],
)
def test_step_priced_packing_is_never_below_the_bound(name: str, topo: dict) -> None:
    t = Topology.from_dict(topo)
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    found = WindowLP(ctx, ctx.memo["packing_routes"][key[0]], key[1], table[key].pool).solve()
    assert found is not None
    bound = lower_bound(ctx)
    # the sum of the steps' busiest arcs is at least the busiest arc over all steps
    assert found.theta * SIZE >= bound.bandwidth_s * (1 - 1e-6), name
    pairs = pair_trees(found)
    sched = PairSchedule(ctx, pairs)
    load, lat = sched.profile(np.array([p.share for p in pairs]))
    one = model_time(load, lat, SIZE, piece_fractions(1, 0))
    assert one >= found.theta * SIZE * (1 - 1e-6)  # the LP leaves out only latency


@pytest.mark.parametrize(
    "topo, within",
    [(torus(4, 4), 1.01), (hybrid_cube_mesh(), 1.02), (host_ring(8), 1.01)],
    ids=["torus-4x4", "cube-mesh", "host-ring-8x2"],
)
def test_one_piece_programs_reach_the_bound_on_symmetric_graphs(topo: dict, within: float) -> None:
    """Translated trees load every step of a torus, a cube mesh or a ring of hosts evenly: one
    piece, no fill (the pipelined packings were 1.041x, 1.057x and 1.024x the bound)."""
    t = Topology.from_dict(topo)
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert "step-priced" in doc["details"]["packing"]
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * within


@pytest.mark.parametrize(
    "topo, before",
    [
        (hybrid_cube_mesh(degraded=(0, 3), factor=0.5), 1.083),
        (full_mesh(8, slow_pair=(2, 5)), 1.026),
    ],
    ids=["cube-mesh-degraded", "full-mesh-8-slow"],
)
def test_pieces_with_trees_of_their_own_fill_the_steps(topo: dict, before: float) -> None:
    """Where no one-piece tree set loads every step evenly, the pieced LP gives each piece
    its own trees and shares: within 1.5 % of the bound (the pipelined packings were
    ``before``), and every program it builds is a correct all-reduce."""
    t = Topology.from_dict(topo)
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    bound = lower_bound(ctx)
    routes = ctx.memo["packing_routes"][key[0]]
    for pieces in (2, 4):
        lp = WindowLP(ctx, routes, key[1], table[key].trees, pieces)
        found = lp.solve()
        assert found is not None
        assert found.theta * SIZE >= bound.bandwidth_s * (1 - 1e-6)  # never below the bound
        assert set(lp.live_offsets.tolist()) <= set(range(pieces))
        program = window_program(found, lp.live_offsets, lp.height, 1 << 20)
        assert len(program.steps) <= 2 * lp.height + pieces - 1
        doc = {
            "ranks": ctx.ranks,
            "size_bytes": SIZE,
            "program": program_to_doc(with_routes(program, ctx.ranks, ctx.router)),
        }
        report = verify_plan(doc, t)
        assert report.ok, report.error
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert "pieces" in doc["details"]["packing"] and doc["details"]["pieces"] > 1
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.015 < before


def test_pieced_lps_stop_on_their_budget_and_plans_repeat() -> None:
    """The pieced LPs' work is counted in simplex iterations x rows, not seconds: no budget,
    no pieced program; and the same request plans the same program twice."""
    t = Topology.from_dict(hybrid_cube_mesh(degraded=(0, 3), factor=0.5))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    routes = ctx.memo["packing_routes"][key[0]]
    beat = lower_bound(ctx).time_s * 1.08  # the pipelined packing's time, about
    assert (
        pieced_window(ctx, routes, key[1], table[key].trees, 1 << 20, beat, budget=Budget(0))
        is None
    )
    budget = Budget(1e12)
    found = pieced_window(ctx, routes, key[1], table[key].trees, 1 << 20, beat, budget=budget)
    assert found is not None and found.pieces > 1 and found.time_s < beat
    assert budget.left < 1e12
    first = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    again = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert first["program"] == again["program"]


def test_enough_pieces_fill_a_ring_of_hosts_with_a_slow_host() -> None:
    """A ring of hosts with one slow host fills only at 32 or more pieces (1.036x the bound
    pipelined, 1.059x with 16 pieces of their own): the pieced LP doubles on to 64 pieces
    while each doubling gains, and the program is a correct all-reduce within 1.5 %."""
    t = Topology.from_dict(FAMILY_EXAMPLES["host-ring-4x2-slow"]())
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert doc["details"]["pieces"] >= 32
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.015


def test_one_piece_step_priced_packings_up_to_32_ranks() -> None:
    """A 4x6 torus (24 ranks) loads every step of one piece evenly, as smaller tori do: the
    step-priced LP runs up to 32 ranks (on its own budget), within 1 % of the bound where
    the pipelined packing was 1.043x."""
    t = Topology.from_dict(torus(4, 6))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert "step-priced" in doc["details"]["packing"]
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.01


def test_abandoned_tells_what_a_solve_with_a_lower_beat_returns() -> None:
    """Side by side, forest's one-piece LPs solve with the first beat and are judged later
    against the beat of their turn: ``abandoned`` must agree with solving again."""
    t = Topology.from_dict(torus(3, 3, degraded=0))
    ctx = PlanContext.create(t, t.endpoints(), 256 << 20)
    table = packings(ctx)
    routes = ctx.memo["packing_routes"]["any"]

    def fresh() -> WindowLP:
        return WindowLP(ctx, routes, 1, table["any", 1].pool)

    first = fresh()
    found = first.solve()
    assert found is not None and len(first.values) > PACKING.abandon_after + 2
    worst = (
        max(first.values[PACKING.abandon_after :]) / PACKING.abandon_above
    )  # a beat below ends the LP
    for beat, gone in ((worst * 0.999, True), (worst * 1.001, False)):
        assert first.abandoned(beat) is gone
        again = fresh().solve(beat=beat)
        assert (again is None) is gone
        if again is not None:
            assert again.theta == found.theta and len(again.trees) == len(found.trees)


def test_a_budget_spent_mid_way_keeps_the_last_optimum() -> None:
    """Where the budget ends a re-solve, the LP returns the optimum it had before it (not
    None): the first solve's shares are a step-priced packing already."""
    t = Topology.from_dict(torus(3, 3, degraded=0))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    routes = ctx.memo["packing_routes"]["any"]
    start = 1e15
    once = Budget(start)
    first = WindowLP(ctx, routes, 1, table["any", 1].pool)
    found = first.solve(rounds=0, budget=once)
    assert found is not None and len(first.values) == 0
    full = WindowLP(ctx, routes, 1, table["any", 1].pool).solve()
    assert full is not None and full.theta < found.theta  # later rounds do lower it
    # the first solve and one more simplex iteration
    budget = Budget(start - once.left + first.master.nonzeros())
    lp = WindowLP(ctx, routes, 1, table["any", 1].pool)
    kept = lp.solve(budget=budget)
    assert kept is not None and budget.left <= 0
    assert kept.theta == pytest.approx(found.theta, rel=1e-9)
    assert len(lp.live_offsets) == len(kept.trees)
    doc = {
        "ranks": ctx.ranks,
        "size_bytes": SIZE,
        "program": program_to_doc(
            with_routes(
                window_program(kept, lp.live_offsets, lp.height, 1 << 20), ctx.ranks, ctx.router
            )
        ),
    }
    assert verify_plan(doc, t).ok


def test_a_64_rank_directed_ring_runs_its_unlimited_trees_as_one_step_priced_piece() -> None:
    """Above 32 ranks the unlimited packing (solved where the depth limits stay far from the
    floor) seeds a one-piece step-priced LP: a directed ring of 32 hosts of 2 GPUs, whose
    pipelined deep trees were 1.23x the bound, within 3 %."""
    t = Topology.from_dict(directed_cluster(32, 2))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert doc["details"]["packing"] == "any/None step-priced"
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.03
