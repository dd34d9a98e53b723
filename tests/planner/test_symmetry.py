"""Automorphism groups of topologies and the step-priced packing LP reduced by them."""

from __future__ import annotations

import numpy as np
import pytest
from syncplan.core.program import program_to_doc
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.orbit import OrbitWindowLP, expand, expand_pieces, image
from syncplan.planner.algorithms.packing.pieced import pieced_window, window_program
from syncplan.planner.algorithms.packing.sets import packings
from syncplan.planner.algorithms.packing.symmetry import automorphisms
from syncplan.planner.algorithms.packing.window import Budget, WindowLP
from syncplan.planner.bound import lower_bound
from syncplan.planner.family_grids import host_ring, mesh2d, torus
from syncplan.planner.family_hosts import full_mesh
from syncplan.planner.plan import make_plan, with_routes
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

SIZE = 256 << 20


def _context(topo: dict) -> PlanContext:
    t = Topology.from_dict(topo)
    return PlanContext.create(t, t.endpoints(), SIZE)


def _check_group(ctx: PlanContext) -> None:
    """Every element keeps every arc with its bandwidth and latency and maps ranks to ranks;
    the elements are distinct and closed under composition."""
    group = automorphisms(ctx)
    assert group is not None
    g = ctx.topo.graph
    names = group.nodes
    seen = {p.tobytes() for p in group.perms}
    assert len(seen) == group.order
    for k, perm in enumerate(group.perms):
        for u, v, d in g.edges(data=True):
            a, b = names[perm[names.index(u)]], names[perm[names.index(v)]]
            assert g.has_edge(a, b), (u, v)
            assert (g[a][b]["bw"], g[a][b]["lat"]) == (d["bw"], d["lat"])
            assert group.arcs[k, ctx.router.arc_id[u, v]] == ctx.router.arc_id[a, b]
        for i, r in enumerate(ctx.ranks):
            assert ctx.ranks[group.ranks[k, i]] == names[perm[names.index(r)]]
    for p in group.perms[:8]:
        for q in group.perms[:8]:
            assert p[q].tobytes() in seen


@pytest.mark.parametrize(
    "topo, orbits",
    [(torus(8, 8), 1), (torus(4, 8, gpus_per_host=2), 1), (host_ring(32), 1), (mesh2d(3, 3), 3)],
    ids=["torus-8x8", "torus-4x8x2gpu", "host-ring-32x2", "mesh-3x3"],
)
def test_groups_are_automorphisms(topo: dict, orbits: int) -> None:
    """A torus's translations, a ring of hosts' rotations: one rank orbit; a 3x3 mesh's
    corners, edges and centre: three (its 8 symmetries)."""
    ctx = _context(topo)
    _check_group(ctx)
    assert len(set(automorphisms(ctx).rank_orbits().tolist())) == orbits


def test_a_degraded_link_breaks_the_symmetry_it_touches() -> None:
    whole = automorphisms(_context(torus(8, 8)))
    broken = automorphisms(_context(torus(8, 8, degraded=3)))
    ctx = _context(torus(8, 8, degraded=3))
    _check_group(ctx)
    assert broken.order < whole.order
    assert len(set(broken.rank_orbits().tolist())) > 1


def test_no_group_where_nothing_is_alike() -> None:
    """A 3x3 torus whose links all run at different bandwidths has only the identity: None;
    with equal bandwidths, a group (its search keeps at most 2 x 9 elements and finds two
    rank orbits there, not the translations' one)."""
    topo = torus(3, 3)
    assert automorphisms(_context(topo)) is not None
    for k, link in enumerate(topo["links"]):
        link["bandwidth_GBps"] = 10.0 + k
    assert automorphisms(_context(topo)) is None


def test_the_orbit_lp_is_the_full_lp_on_a_torus() -> None:
    """Averaged over the group, the one-piece step-priced LP loses nothing: on a 4x4 torus
    the orbit LP's value is the full LP's (both at the floor), and its expanded packing's
    loads equal what the orbit LP says (the verifier's simulated time is the cost model's)."""
    ctx = _context(torus(4, 4))
    group = automorphisms(ctx)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    routes = ctx.memo["packing_routes"][key[0]]
    full = WindowLP(ctx, routes, key[1], table[key].pool).solve()
    lp = OrbitWindowLP(ctx, routes, key[1], table[key].pool, group)
    found = lp.solve_basic(40)
    assert found is not None and full is not None
    assert found.theta == pytest.approx(full.theta, rel=2e-3)
    assert found.theta * SIZE >= lower_bound(ctx).bandwidth_s * (1 - 1e-6)
    copies = expand(found, group, ctx)
    for inward in (True, False):  # shares sum to one per direction, per root alike
        share = np.array(
            [x for t, x in zip(copies.trees, copies.share, strict=True) if t.inward == inward]
        )
        assert share.sum() == pytest.approx(1.0)
        roots = np.zeros(len(ctx.ranks))
        for t, x in zip(copies.trees, copies.share, strict=True):
            if t.inward == inward:
                roots[t.root] += x
        assert np.allclose(roots, roots[0])


@pytest.mark.parametrize("a, b", [(6, 6), (4, 9)])
def test_a_36_rank_torus_runs_one_step_priced_piece_by_symmetry(a: int, b: int) -> None:
    """Above 32 ranks the full step-priced LP is not solved; reduced by the torus's
    translations it is small, and its one piece is within 0.5 % of the bound, a correct
    all-reduce whose simulated time is the predicted one."""
    t = Topology.from_dict(torus(a, b))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert doc["details"]["packing"].endswith("step-priced by symmetry")
    report = verify_plan(doc, t)
    assert report.ok, report.error
    assert report.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-9)
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.005


def test_colour_ranks_are_those_of_sorting_the_rows() -> None:
    """rank_rows numbers distinct rows in lexicographic order, as np.unique(axis=0) does
    (the colours, and so the maps found, must not depend on how they are sorted)."""
    from syncplan.planner.algorithms.packing.symmetry import rank_rows

    rng = np.random.default_rng(0)
    for n in (1, 7, 200):
        keys = [
            rng.integers(0, 4, n).astype(np.uint64),
            rng.integers(0, 3, n).astype(np.uint64) * np.uint64(2**63 + 5),
            rng.integers(0, 2**63, n).astype(np.uint64) * np.uint64(rng.integers(0, 2)),
        ]
        ranks, count = rank_rows(*keys)
        _, want = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
        assert ranks.tolist() == want.ravel().tolist()
        assert count == int(want.max()) + 1


def test_images_through_a_shared_memo_are_the_images() -> None:
    """``image`` with one memo for every tree and element (as ``expand_pieces`` maps them)
    gives each tree's image as mapped alone: paths, and arcs in the order of its paths (the
    steps of a tree's crossings follow that order)."""
    ctx = _context(full_mesh(4))  # routes of two hops through the PCIe switch too
    group = automorphisms(ctx)
    assert group is not None and group.order > 1
    trees = [t for p in packings(ctx).values() for t in p.pool]
    memo: dict = {}
    assert any(len(path) > 2 for t in trees for path in t.paths)
    for col in trees:
        for k in range(group.order):
            got, want = image(col, group, k, ctx, memo), image(col, group, k, ctx)
            assert got.root == want.root and got.inward == want.inward
            assert got.parent.tolist() == want.parent.tolist()
            assert got.depth.tolist() == want.depth.tolist()
            assert got.paths == want.paths
            assert got.arcs.tolist() == want.arcs.tolist()
            assert got.arcs.tolist() == [
                a for path in got.paths if path for a in ctx.router.arcs(path)
            ]


def test_the_pieced_orbit_lp_is_the_full_lp_on_its_copies() -> None:
    """With pieces, each tree orbit a column per piece: the full pieced LP over the copies
    of the orbit LP's trees, each in its piece, has the orbit LP's value (its optimum,
    averaged over the group, is an orbit solution), and the copies' program is priced by
    the cost model at that value plus one latency a step."""
    ctx = _context(mesh2d(3, 3))
    group = automorphisms(ctx)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    routes = ctx.memo["packing_routes"][key[0]]
    lp = OrbitWindowLP(ctx, routes, key[1], table[key].pool, group, pieces=4)
    found = lp.solve(rounds=12)
    assert found is not None
    copies, pieces = expand_pieces(found, lp.live_offsets, group, ctx)
    assert len(copies.trees) > len(found.trees)
    assert copies.share.sum() == pytest.approx(2.0)  # in- and out-trees: one each
    full = WindowLP(ctx, routes, key[1], copies.trees, 4, [[int(p)] for p in pieces])
    again = full.solve(rounds=0)
    assert again is not None
    assert again.theta == pytest.approx(found.theta, rel=1e-6)
    program = window_program(copies, pieces, lp.height, 1 << 20)
    t = ctx.cost.program_time(ctx.ranks, program, float(SIZE))
    latency = len(program.steps) * 1e-6  # mesh2d: 1 us links, one hop per tree edge
    assert t == pytest.approx(found.theta * SIZE + latency, rel=1e-3)


def test_pieced_lps_by_symmetry_reach_64_pieces_on_a_4x4_mesh() -> None:
    """The 4x4 mesh's pieced LP over its 8 symmetries doubles to 64 pieces within the
    budget that stops the full LP at 32: 1.043x -> 1.022x the bound, a verified program."""
    t = Topology.from_dict(mesh2d(4, 4))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert doc["details"]["pieces"] == 64 and "step-priced" in doc["details"]["packing"]
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.03


def test_pieced_window_takes_the_lp_it_is_given() -> None:
    """``pieced_window`` with the orbit LP: a program of every tree's copies that the
    verifier accepts, at most the transfers it is allowed (none allowed: no program)."""
    ctx = _context(mesh2d(3, 3))
    group = automorphisms(ctx)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    routes = ctx.memo["packing_routes"][key[0]]

    def lp_of(*args, **kwargs):
        return OrbitWindowLP(*args, group=group, **kwargs)

    found = pieced_window(
        ctx, routes, key[1], table[key].pool, 1 << 20, budget=Budget(1e12), lp_of=lp_of
    )
    assert found is not None and found.pieces > 1
    doc = {
        "ranks": ctx.ranks,
        "size_bytes": SIZE,
        "program": program_to_doc(with_routes(found.program, ctx.ranks, ctx.router)),
    }
    assert verify_plan(doc, ctx.topo).ok
    assert found.time_s == pytest.approx(
        ctx.cost.program_time(ctx.ranks, found.program, float(SIZE))
    )
    assert (
        pieced_window(
            ctx,
            routes,
            key[1],
            table[key].pool,
            1 << 20,
            budget=Budget(1e12),
            lp_of=lp_of,
            max_transfers=0,
        )
        is None
    )


def test_a_24_rank_ring_of_hosts_runs_pieces_by_symmetry() -> None:
    """Above 16 ranks the full pieced LP is not solved; where the group leaves few rank
    orbits (12 2-GPU hosts in a ring: one) the orbit LP's pieces take it from the mix's
    1.017x to within 0.5 % of the bound, a verified program."""
    t = Topology.from_dict(host_ring(12, 2))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert verify_plan(doc, t).ok
    assert doc["details"]["pieces"] > 1 and "step-priced" in doc["details"]["packing"]
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.005


def test_no_pieced_lp_where_the_best_program_is_at_the_fluid_floor(monkeypatch) -> None:
    """A 4x6 torus's one piece by symmetry is within WINDOW_MARGIN of the fluid floor, which
    no program beats: its pieced LPs are not solved (the plan is the one-piece program)."""
    from syncplan.planner.algorithms.forest import windows as forest_windows

    calls = []
    real = forest_windows.pieced_window
    monkeypatch.setattr(
        forest_windows, "pieced_window", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    t = Topology.from_dict(torus(4, 6))
    doc = make_plan(t, t.endpoints(), SIZE, algorithm="forest")
    assert not calls
    assert "by symmetry" in doc["details"]["packing"]
    assert doc["predicted_time_s"] <= doc["lower_bound_time_s"] * 1.005
