"""The any-topology tree packing: exact arborescences, the LP's fluid optimum against the
bound, and verified programs on direct-connect and directed families."""

from __future__ import annotations

from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from syncplan.core.options import PlanOptions
from syncplan.core.program import program_to_doc
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest import FOREST
from syncplan.planner.algorithms.forest.general import forest_any
from syncplan.planner.algorithms.packing import PACKING
from syncplan.planner.algorithms.packing.arborescence import (
    min_arborescence,
    shallow_trees,
    tree_depths,
)
from syncplan.planner.algorithms.packing.lp import PackingLP, fluid_lower_bound
from syncplan.planner.algorithms.packing.routes import QuickRoutes, RankRoutes
from syncplan.planner.bound import lower_bound
from syncplan.planner.family_grids import mesh2d, torus
from syncplan.planner.family_hosts import directed_cluster, hybrid_cube_mesh
from syncplan.planner.plan import make_plan, with_routes
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

SIZE = 256 << 20


@pytest.mark.parametrize("seed", range(20))
def test_min_arborescence_matches_networkx(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 10))
    cost = rng.random((n, n)) * 10
    cost[rng.random((n, n)) < 0.3] = np.inf
    np.fill_diagonal(cost, np.inf)
    cost[0, 1:] = rng.random(n - 1)  # root 0 reaches everyone
    g = nx.DiGraph()
    g.add_weighted_edges_from(
        (u, v, cost[u, v])
        for u in range(n)
        for v in range(1, n)
        if u != v and np.isfinite(cost[u, v])
    )
    ref = sum(d["weight"] for *_, d in nx.minimum_spanning_arborescence(g).edges(data=True))
    parent = min_arborescence(cost, 0)
    assert parent[0] == -1 and (tree_depths(parent) >= 0).all()
    assert sum(cost[parent[v], v] for v in range(1, n)) == pytest.approx(ref)


def test_shallow_trees_respect_depth_limits() -> None:
    rng = np.random.default_rng(3)
    n = 9
    cost = rng.random((n, n))
    limit = np.full((n, n), 2)
    for r, parent in enumerate(shallow_trees(cost, limit)):
        depth = tree_depths(parent)
        assert depth[r] == 0 and depth.max() <= 2 and parent[r] == -1


@pytest.mark.parametrize(
    "name, topo",
    [
        ("torus-3x3", torus(3, 3, degraded=0)),
        ("cube-mesh", hybrid_cube_mesh()),
        ("directed", directed_cluster()),
    ],
)
def test_packing_reaches_the_bandwidth_bound(name: str, topo: dict) -> None:
    t = Topology.from_dict(topo)
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    packing = PackingLP(ctx, None).solve()
    bound = lower_bound(ctx)
    lb = fluid_lower_bound(ctx, packing.prices) * SIZE
    # the dual bound never exceeds the LP's value, and the LP is never below the cut bound
    assert lb <= packing.theta * SIZE * (1 + 1e-6)
    assert packing.theta * SIZE >= bound.bandwidth_s * (1 - 1e-6)
    assert packing.theta * SIZE <= bound.bandwidth_s * 1.01, name


@pytest.mark.parametrize("size", [1, 3, 1000, SIZE])
def test_forest_any_programs_verify(size: int) -> None:
    t = Topology.from_dict(torus(3, 3, degraded=0))
    ctx = PlanContext.create(t, t.endpoints(), size)
    cand = forest_any(ctx)
    program = with_routes(cand.build(), ctx.ranks, ctx.router)
    assert program.units <= size
    doc = {"ranks": ctx.ranks, "size_bytes": size, "program": program_to_doc(program)}
    report = verify_plan(doc, t)
    assert report.ok, report.error
    assert report.simulated_time_s == pytest.approx(cand.predicted_time_s, rel=1e-6)


@pytest.mark.parametrize(
    "topo", [torus(3, 3, degraded=0), directed_cluster()], ids=["torus", "directed"]
)
def test_forest_plan_verifies_and_is_near_the_bound(topo: dict) -> None:
    t = Topology.from_dict(topo)
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    verify_plan(doc, t)
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.10


def test_interior_duals_end_on_a_vertex_of_the_same_optimum() -> None:
    """The master's interior-point solve and its closing simplex solve agree on the fluid
    time, and the simplex one is basic: no more trees carry share than the LP has rows."""
    t = Topology.from_dict(torus(3, 6, degraded=0))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    lp = PackingLP(ctx, 1)
    lp.solve(rounds=3)
    lp.master.go_interior()
    inner, _, inner_share, _, _ = lp.master.solve()
    theta, _, share, _, _ = lp.master.vertex()
    assert not lp.master.interior
    assert theta == pytest.approx(inner, rel=1e-6)
    rows = len(ctx.router.bw) + len(ctx.ranks) + 1
    assert (share > 1e-9).sum() <= min(rows, (inner_share > 1e-9).sum())


def test_long_column_generation_switches_to_interior_duals(monkeypatch) -> None:
    import syncplan.planner.algorithms.packing.lp as packing

    monkeypatch.setattr(packing, "PACKING", replace(PACKING, interior_after=0))
    t = Topology.from_dict(torus(3, 6, degraded=0))  # 18 ranks: inside INTERIOR_RANKS
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    result = PackingLP(ctx, None).solve()
    bound = lower_bound(ctx)
    assert result.theta * SIZE <= bound.bandwidth_s * 1.01
    assert len(result.trees) <= len(ctx.router.bw) + len(ctx.ranks) + 1


def test_a_program_never_beats_its_packings_fluid_time() -> None:
    """forest_any skips packings and tree subsets whose fluid time is above the best
    program's time: sound only because no piece schedule beats the fluid time."""
    from syncplan.planner.algorithms.packing.schedule import PairSchedule, pair_trees
    from syncplan.planner.algorithms.pipeline import model_time, piece_fractions

    rng = np.random.default_rng(5)
    for topo in (torus(3, 3, degraded=0), directed_cluster(), hybrid_cube_mesh()):
        t = Topology.from_dict(topo)
        ctx = PlanContext.create(t, t.endpoints(), SIZE)
        packing = PackingLP(ctx, 1).solve()
        sched = PairSchedule(ctx, pair_trees(packing))
        shares, theta = sched.fluid_shares()
        assert theta >= packing.theta * (1 - 1e-6)
        for _ in range(20):
            mix = rng.dirichlet(np.ones(len(shares)))
            load, lat = sched.profile(mix)
            fluid = float(load.sum(axis=1).max())
            for pieces, ramp in ((1, 0), (8, 0), (8, 2), (64, 1)):
                est = model_time(load, lat, SIZE, piece_fractions(pieces, ramp))
                assert est >= fluid * SIZE * (1 - 1e-9) >= packing.theta * SIZE * (1 - 1e-6)


@pytest.mark.slow
def test_unlimited_depth_above_32_ranks_where_limits_keep_the_packing_far() -> None:
    """36 ranks on a directed ring of hosts with one slow link: depth-limited trees stay
    far from the floor (1.56x the bound before), the unlimited packing is near it."""
    t = Topology.from_dict(directed_cluster(12, 3, slow=2))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert doc["details"]["packing"].startswith("any/None")
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.10


def test_unlimited_packing_prices_exact_trees_where_the_greedy_stops() -> None:
    """On a directed cluster the greedy (Prim-like) pricing finds no improving tree while the
    unlimited LP, started from the depth-limited packings' trees, is still 1.26x the cut;
    the exact cheapest arborescences take it to the cut, and the depth-limited packings'
    trees keep to their limits."""
    from syncplan.planner.algorithms.packing.sets import packings
    from syncplan.planner.bound_cuts import fluid_floor
    from syncplan.planner.families import random_family

    t = Topology.from_dict(random_family("directed_cluster", 3, 32))
    ctx = PlanContext.create(t, t.endpoints(), 256 << 20)
    assert packings(ctx)["any", None].theta <= fluid_floor(ctx) * 1.001
    limited = PackingLP(ctx, 2)
    packing = limited.solve()
    limit_in, limit_out = limited.limits
    for tree in packing.trees:
        limit = (limit_in if tree.inward else limit_out)[tree.root]
        assert (tree.depth <= limit).all()


@pytest.mark.parametrize("seed", range(12))
def test_min_arborescence_with_ties_matches_networkx(seed: int) -> None:
    """Integer prices (many ties, so contracted cycles at several levels) up to 24 nodes."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(8, 25))
    cost = rng.integers(1, 4, size=(n, n)).astype(float)
    cost[rng.random((n, n)) < 0.4] = np.inf
    np.fill_diagonal(cost, np.inf)
    root = int(rng.integers(n))
    cost[root, :] = np.where(np.arange(n) == root, np.inf, 5.0)  # the root reaches everyone
    g = nx.DiGraph()
    g.add_weighted_edges_from(
        (u, v, cost[u, v])
        for u in range(n)
        for v in range(n)
        if v != root and u != v and np.isfinite(cost[u, v])
    )
    ref = sum(d["weight"] for *_, d in nx.minimum_spanning_arborescence(g).edges(data=True))
    parent = min_arborescence(cost, root)
    assert parent[root] == -1 and (tree_depths(parent) >= 0).all()
    assert sum(cost[parent[v], v] for v in range(n) if v != root) == pytest.approx(ref)


@pytest.mark.parametrize("through_ranks", [False, True])
def test_rank_routes_put_prices_in_a_layout_built_once(through_ranks: bool) -> None:
    """RankRoutes builds its graph's sparse layout once and only writes each solve's
    weights into it: the same costs and routes as building the graph from its arcs."""
    rng = np.random.default_rng(5)
    for topo in (hybrid_cube_mesh(), directed_cluster(), torus(3, 3)):
        t = Topology.from_dict(topo)
        routes = RankRoutes(PlanContext.create(t, t.endpoints(), SIZE), through_ranks=through_ranks)
        assert routes.graph_layout is not None
        price = rng.random(len(routes.physical)) * (rng.random(len(routes.physical)) < 0.7)
        cost, pred = routes.solve(price)
        routes.graph_layout = None  # the graph built from (weights, (tail, head)) each time
        again, pred_again = routes.solve(price)
        assert np.array_equal(cost, again) and pred == pred_again


def test_tree_depths_of_paths_stars_and_cycles() -> None:
    assert tree_depths(np.array([-1, 0, 1, 2, 3])).tolist() == [0, 1, 2, 3, 4]
    assert tree_depths(np.array([2, 2, -1, 2])).tolist() == [1, 1, 0, 1]
    assert tree_depths(np.array([-1])).tolist() == [0]
    # a cycle never reaches a root: -1 there, the tree part keeps its depths
    assert tree_depths(np.array([-1, 0, 3, 2])).tolist() == [0, 1, -1, -1]


def test_packings_in_two_threads_equal_one_route_set_after_the_other() -> None:
    """packing_sets.packings solves the any-route set in a second thread; the packings must
    be those of solving each set alone (same fluid times, trees and shares)."""
    from syncplan.planner.algorithms.packing import sets as packing_sets

    t = Topology.from_dict(hybrid_cube_mesh())  # PCIe beside NVLink: two route sets
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    both = packing_sets.packings(ctx)
    assert {name for name, _ in both} == {"any", "short"}
    alone = PlanContext.create(t, t.endpoints(), SIZE)
    assert len(alone.ranks) <= PACKING.floor_above  # no floor stop on these LPs
    order = []  # the keys' order matters: sorting by fluid time keeps it among ties
    for name, routes in (("any", RankRoutes(alone)), ("short", QuickRoutes(alone))):
        mine = packing_sets.route_set_packings(alone, name, routes, 0.0)
        order.extend(mine)
        for key, packing in mine.items():
            assert both[key].theta == packing.theta
            assert np.array_equal(both[key].share, packing.share)
            assert [c.parent.tolist() for c in both[key].trees] == [
                c.parent.tolist() for c in packing.trees
            ]
    assert list(both) == order


@pytest.mark.parametrize(
    "topo", [hybrid_cube_mesh(), directed_cluster()], ids=["cube-mesh", "directed"]
)
def test_packings_started_early_or_abandoned_are_the_same(topo: dict) -> None:
    """start_any runs the any-route LPs while the host forest is priced; what packings then
    returns is what it solves alone, and after stop_any it solves its own (the abandoned
    thread's stop leaves nothing behind)."""
    from syncplan.planner.algorithms.packing import sets as packing_sets

    t = Topology.from_dict(topo)

    def solved(ctx: PlanContext) -> list:
        return [
            (k, p.theta, p.share.tolist(), [c.parent.tolist() for c in p.trees])
            for k, p in packing_sets.packings(ctx).items()
        ]

    alone = solved(PlanContext.create(t, t.endpoints(), SIZE))
    early = PlanContext.create(t, t.endpoints(), SIZE)
    packing_sets.start_any(early)
    assert "packings_any" in early.memo
    assert solved(early) == alone
    assert "packings_any" not in early.memo
    dropped = PlanContext.create(t, t.endpoints(), SIZE)
    packing_sets.start_any(dropped)
    _, future, cancel = dropped.memo["packings_any"]
    packing_sets.stop_any(dropped)
    assert cancel.is_set() and "packings_any" not in dropped.memo
    future.result()  # ends at its next LP
    assert solved(dropped) == alone


def test_the_dual_bound_stops_early_only_below_what_it_is_told_is_useless(monkeypatch) -> None:
    """fluid_lower_bound with ``useless``: the same value where that is at or above it, and
    where the exact one is below it, a value below it after the first root's trees."""
    from syncplan.planner.algorithms.packing import lp as packing

    t = Topology.from_dict(mesh2d(3, 3))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    prices = PackingLP(ctx, None).solve().prices
    calls = []
    counted = packing.min_arborescence
    monkeypatch.setattr(
        packing, "min_arborescence", lambda cost, root: calls.append(root) or counted(cost, root)
    )
    exact = fluid_lower_bound(ctx, prices)
    assert exact > 0 and len(calls) > 2  # the roots' trees cost about the same: no pruning
    assert fluid_lower_bound(ctx, prices, exact * (1 - 1e-12)) == exact
    assert fluid_lower_bound(ctx, prices, exact * 0.5) == exact
    calls.clear()
    assert fluid_lower_bound(ctx, prices, exact * 2) < exact * 2
    assert len(calls) == 2  # one root's in-tree and out-tree


def test_piece_size_lps_above_32_ranks_stay_small(monkeypatch) -> None:
    """The piece-size LP refines the best pipelined packing within LP_MAX_ROWS rows up to
    UNLIMITED_MAX_RANKS ranks and within LP_MAX_ROWS_LARGE above (64-rank plans at 256 MiB
    spent 0.2-1.8 s on larger ones for nothing in 14 of 15 members)."""
    from syncplan.planner.algorithms import pipeline
    from syncplan.planner.algorithms.forest import pipelined as fa
    from syncplan.planner.family_grids import host_ring

    rows = []

    def counted(load, lat, size, k, **kwargs):
        rows.append(len(load) * (k + load.shape[1] - 1))
        return pipeline.lp_fractions(load, lat, size, k, **kwargs)

    def solved(topo: dict) -> list[int]:
        rows.clear()
        t = Topology.from_dict(topo)
        forest_any(PlanContext.create(t, t.endpoints(), SIZE))
        return list(rows)

    monkeypatch.setattr(fa, "lp_fractions", counted)
    small, large = directed_cluster(4, 4, slow=1), host_ring(17, 2)  # 16 and 34 ranks
    first, above = solved(small), solved(large)
    assert first and max(first) <= FOREST.lp_max_rows
    assert above and max(above) <= FOREST.lp_max_rows_large
    monkeypatch.setattr(fa, "FOREST", replace(FOREST, lp_max_rows_large=0))
    assert solved(large) == []
    assert solved(small)  # the large limit does not apply up to 32 ranks


@pytest.mark.parametrize("family", ["mesh2d", "fat_tree3", "directed_cluster", "host_ring"])
def test_schedule_time_without_building_is_the_built_programs(family: str) -> None:
    """``PairSchedule.program_time`` is the cost model's time of ``build`` (to the order of
    its sums) at every piece count and ramp, with pairs left out; None with overheads."""
    from syncplan.planner.algorithms.packing.schedule import PairSchedule, pair_trees
    from syncplan.planner.algorithms.packing.sets import packings
    from syncplan.planner.algorithms.pipeline import piece_fractions
    from syncplan.planner.families import random_family

    topo = Topology.from_dict(random_family(family, 1))
    ranks = topo.endpoints()
    for size in (4096, 3 << 20):
        ctx = PlanContext.create(topo, ranks, size)
        units = min(1 << 20, size)
        for packing in packings(ctx).values():
            pairs = pair_trees(packing)
            sched = PairSchedule(ctx, pairs)
            shares = np.array([p.share for p in pairs])
            shares[::3] = 0.0  # pairs without units are skipped by both
            if not shares.any():
                shares[-1] = 1.0
            for pieces, ramp in ((1, 0), (5, 1), (24, 3)):
                fracs = piece_fractions(pieces, ramp)
                built = sched.build(shares, fracs, units)
                want = ctx.cost.program_time(ranks, built, float(size))
                got = sched.program_time(shares, fracs, units, float(size))
                assert got == pytest.approx(want, rel=1e-12), (size, pieces, ramp)
    slow = PlanContext.create(topo, ranks, 4096, options=PlanOptions(message_overhead_s=1e-6))
    sched = PairSchedule(slow, pair_trees(next(iter(packings(slow).values()))))
    assert (
        sched.program_time(np.ones(len(sched.pairs)), piece_fractions(2, 0), 4096, 4096.0) is None
    )


def test_piece_refinement_is_the_choice_made_one_count_at_a_time() -> None:
    """``refine_pieces`` solves its piece-size LPs side by side, then chooses as one after
    the other would: per piece count (half, the same, 1.5x), ramped pieces then the LP's,
    the first fastest kept. Here an LP's fractions win, at their own piece count."""
    from syncplan.planner.algorithms.forest import pipelined as fp
    from syncplan.planner.algorithms.packing.schedule import PairSchedule, pair_trees
    from syncplan.planner.algorithms.packing.sets import packings
    from syncplan.planner.algorithms.pipeline import lp_fractions, model_time, piece_fractions

    t = Topology.from_dict(torus(2, 3, gpus_per_host=2, degraded=1))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min(table, key=lambda k: (table[k].theta, str(k)))
    sched = PairSchedule(ctx, pair_trees(table[key]))
    shares, _ = sched.fluid_shares()
    best = fp.Pipelined()
    fp.price_pipelines(sched, shares, SIZE, 1 << 20, best)
    want = replace(best)
    pieces, step = len(best.fracs), ctx.cost.min_step_s
    lp_won = False
    for k in (pieces // 2, pieces, pieces * 3 // 2):
        tries = [piece_fractions(k, r) for r in FOREST.ramps if 2 * r <= k]
        tries.append(lp_fractions(best.load, best.lat, SIZE, k, min_step=step))
        for j, fracs in enumerate(tries):
            est = model_time(best.load, best.lat, SIZE, fracs, min_step=step)
            if est < want.time:
                want.time, want.fracs = est, fracs
                lp_won = j == len(tries) - 1
    fp.refine_pieces(ctx, best, 1 << 20)
    assert lp_won and best.time < model_time(
        best.load, best.lat, SIZE, piece_fractions(pieces, 0), min_step=step
    )
    assert best.time == want.time
    assert np.array_equal(best.fracs, want.fracs)
