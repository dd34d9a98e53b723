"""The any-topology tree packing: exact arborescences, the LP's fluid optimum against the
bound, and verified programs on direct-connect and directed families."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from planner.algorithms.arborescence import min_arborescence, shallow_trees, tree_depths
from planner.algorithms.base import PlanContext
from planner.algorithms.forest_any import forest_any
from planner.algorithms.packing import PackingLP, fluid_lower_bound
from planner.bound import lower_bound
from planner.families import directed_cluster, hybrid_cube_mesh, torus
from planner.plan import make_plan, with_routes
from planner.program import program_to_doc
from planner.topology import Topology
from planner.verify import verify_plan

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
    g.add_weighted_edges_from((u, v, cost[u, v]) for u in range(n) for v in range(1, n)
                              if u != v and np.isfinite(cost[u, v]))
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


@pytest.mark.parametrize("name, topo", [
    ("torus-3x3", torus(3, 3, degraded=0)),
    ("cube-mesh", hybrid_cube_mesh()),
    ("directed", directed_cluster()),
])
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


@pytest.mark.parametrize("topo", [torus(3, 3, degraded=0), directed_cluster()],
                         ids=["torus", "directed"])
def test_forest_plan_verifies_and_is_near_the_bound(topo: dict) -> None:
    t = Topology.from_dict(topo)
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    verify_plan(doc, t)
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.10
