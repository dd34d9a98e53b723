"""The lower bound against hand-computed optima on small cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.core.options import PlanOptions
from syncplan.planner.algorithms import PlanContext
from syncplan.planner.bound import lower_bound
from syncplan.planner.builders import star
from syncplan.planner.families import FAMILY_EXAMPLES
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

SIZE = 256 << 20


def _bound(rates: list[float]) -> float:
    topo = Topology.from_dict(star(rates, latency_us=0.0))
    return lower_bound(PlanContext.create(topo, topo.endpoints(), SIZE)).time_s


def test_star_with_one_slow_host_is_bounded_by_the_slow_link() -> None:
    # The slow host must send and receive every byte once: size / 3.125 GB/s, and a forest
    # in which it is always a leaf achieves that (test_forest checks how closely).
    assert _bound([12.5, 12.5, 12.5, 3.125]) == pytest.approx(SIZE / 3.125e9)


@pytest.mark.parametrize("hosts", [2, 3, 4, 8])
def test_homogeneous_star_bound_is_the_ring_optimum(hosts: int) -> None:
    # 2 (n-1)/n * size / b: every host but the root sends its partial sum out and receives
    # the result; the ring achieves it exactly, so the bound is tight.
    b = 10.0
    expect = 2 * (hosts - 1) / hosts * SIZE / (b * 1e9)
    assert _bound([b] * hosts) == pytest.approx(expect)
    topo = Topology.from_dict(star([b] * hosts, latency_us=0.0))
    doc = make_plan(topo, topo.endpoints(), SIZE, "ring")
    assert doc["predicted_time_s"] == pytest.approx(expect)
    assert doc["lower_bound_time_s"] == pytest.approx(expect)


def test_two_ranks_cross_once_each_way() -> None:
    assert _bound([5.0, 20.0]) == pytest.approx(SIZE / 5e9)


def test_latency_counts_once_per_step() -> None:
    # A byte crosses both 7 us links to its root and, in a later step, comes back: 28 us
    # (plus 0.1 ns of bandwidth), and the ring's two steps take exactly that.
    topo = Topology.from_dict(star([10.0, 10.0], latency_us=7.0))
    b = lower_bound(PlanContext.create(topo, topo.endpoints(), 1))
    assert b.time_s == pytest.approx(28e-6, rel=1e-4)
    doc = make_plan(topo, topo.endpoints(), 4, "ring")
    assert doc["predicted_time_s"] == pytest.approx(doc["lower_bound_time_s"], rel=1e-4)


def test_boundary_latency_counts_twice_and_steps_last_at_least_the_floor() -> None:
    """Bytes leave a part in one step and come back in a later one, each step paying the
    least latency across the boundary: on a 4-host star with 1 us links, 2 x 2 us above the
    bandwidth bound; with a step floor the two steps last at least the floor each. No plan
    beats either."""
    topo = Topology.from_dict(star([12.5, 12.5, 12.5, 3.125], latency_us=1.0))
    for floor, size, want in (
        (0.0, SIZE, SIZE / 3.125e9 + 4e-6),
        (50e-6, SIZE, None),
        (50e-6, 64, 100e-6),
    ):
        ctx = PlanContext.create(
            topo, topo.endpoints(), size, options=PlanOptions(min_step_s=floor)
        )
        b = lower_bound(ctx)
        if want is not None:
            assert b.time_s == pytest.approx(want, rel=1e-6)
        for algorithm in ("ring", "forest"):
            doc = make_plan(
                topo, topo.endpoints(), size, algorithm, options=PlanOptions(min_step_s=floor)
            )
            rep = verify_plan(doc, topo, options=PlanOptions(min_step_s=floor))
            assert rep.ok and rep.simulated_time_s >= b.time_s * (1 - 1e-9)
            assert rep.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-9)


@pytest.mark.parametrize(
    "rates", [[12.5, 12.5, 12.5, 3.125], [1.0, 2.0, 4.0], [3.0] * 5, [25.0, 6.25, 6.25, 12.5, 12.5]]
)
@pytest.mark.parametrize("algorithm", ["ring", "hierarchical", "forest", "auto"])
def test_no_plan_beats_the_bound(rates: list[float], algorithm: str) -> None:
    topo = Topology.from_dict(star(rates, latency_us=0.0))
    for size in (1000, SIZE):
        doc = make_plan(topo, topo.endpoints(), size, algorithm)
        rep = verify_plan(doc, topo)
        assert rep.ok, rep.error
        assert rep.simulated_time_s >= doc["lower_bound_time_s"] * (1 - 1e-9)


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))
# The family examples (direct-connect meshes, tori, rings, fat trees, directed links) reach the
# bound through the any-topology packing; 2-8 s each, so in the slow subset.
EXAMPLE_PARAMS = [
    pytest.param(p, marks=[pytest.mark.slow]) if p.stem in FAMILY_EXAMPLES else p for p in EXAMPLES
]


@pytest.mark.parametrize("path", EXAMPLE_PARAMS, ids=lambda p: p.stem)
def test_the_bandwidth_term_is_the_familys_fluid_optimum(path: Path) -> None:
    """Forest's share LP packs trees of the family to a fluid time (no latency, no pipeline)
    that is an upper bound on the family's fluid optimum; the cut / partition bound is a
    lower bound on it. On every example they meet, so the bound's bandwidth term is exact
    (an LP over the whole family could not raise it) and every gap to the bound is latency,
    pipeline fill and drain. The any-topology packing stops its column generation within
    0.1 % of its optimum (packing.TOLERANCE)."""
    from syncplan.planner.plan import compare

    topo = Topology.from_dict(json.loads(path.read_text()))
    comp = compare(topo, topo.endpoints(), SIZE, algorithms=["forest"])
    fluid = comp.candidates["forest"].details["fluid_time_s"]
    assert comp.bound.bandwidth_s > 0
    assert fluid == pytest.approx(comp.bound.bandwidth_s, rel=2e-3)


@pytest.mark.parametrize(
    "family",
    [
        "full_mesh",
        "torus",
        "fat_tree3",
        "directed_cluster",
        "random_two_switch",
        "hybrid_cube_mesh",
    ],
)
def test_screened_rank_cut_is_the_exact_least_cut(family: str) -> None:
    """The integer-screened least rank cut equals networkx's float max-flows over every rank
    pair from the first rank (and is never above them: the bound would not hold)."""
    import networkx as nx
    from syncplan.planner.bound_cuts import _least_rank_cut
    from syncplan.planner.families import random_family

    for seed in range(4):
        topo = Topology.from_dict(random_family(family, seed, 16))
        ranks = topo.endpoints()
        ctx = PlanContext.create(topo, ranks, 1 << 20)
        g, s = topo.graph, ranks[0]
        exact = min(
            min(
                nx.maximum_flow_value(g, s, t, capacity="bw"),
                nx.maximum_flow_value(g, t, s, capacity="bw"),
            )
            for t in ranks[1:]
        )
        got = _least_rank_cut(ctx)
        assert got >= exact * (1 - 1e-12)
        assert got == pytest.approx(exact, rel=1e-9)
