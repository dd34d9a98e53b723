"""Every algorithm in the table, on every example and on random topologies, emits a program
the independent verifier accepts, whose simulated time is the predicted one and no better
than the lower bound."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.builders import random_topology, star
from syncplan.planner.plan import TIE_TOLERANCE, compare, make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

SIZES = [4096, 256 << 20]
MAX_VERIFIED_RANKS = 40  # larger examples are covered by bench/planner_quality


def check_plan(topo: Topology, ranks: list[str], size: int, algorithm: str) -> dict | None:
    try:
        doc = make_plan(topo, ranks, size, algorithm)
    except InfeasibleError:
        return None
    rep = verify_plan(doc, topo)
    assert rep.ok, f"{algorithm}: {rep.error}"
    assert rep.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-6)
    assert doc["predicted_time_s"] >= doc["lower_bound_time_s"] * (1 - 1e-9)
    assert doc["ranks"] == ranks and doc["size_bytes"] == size
    return doc


@pytest.mark.parametrize("algorithm", [*ALGORITHMS, "auto"])
@pytest.mark.parametrize("size", SIZES)
def test_every_algorithm_on_every_example(example: Topology, algorithm: str, size: int) -> None:
    ranks = example.endpoints()
    if len(ranks) > MAX_VERIFIED_RANKS:
        hosts = list(example.hosts(ranks).values())
        ranks = [r for h in hosts[:4] for r in h]
    check_plan(example, ranks, size, algorithm)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), size=st.sampled_from([1000, 1 << 20, 300 << 20]), data=st.data())
def test_random_topologies(seed: int, size: int, data: st.DataObject) -> None:
    topo = Topology.from_dict(random_topology(seed))
    endpoints = topo.endpoints()
    ranks = data.draw(
        st.lists(st.sampled_from(endpoints), min_size=1, max_size=len(endpoints), unique=True)
    )
    for algorithm in [*ALGORITHMS, "auto"]:
        check_plan(topo, ranks, size, algorithm)


def test_auto_is_never_slower_than_the_best_named(example: Topology) -> None:
    ranks = example.endpoints()[:32]
    comp = compare(example, ranks, 64 << 20)
    auto = make_plan(example, ranks, 64 << 20, "auto")
    fastest = min(c.predicted_time_s for c in comp.candidates.values())
    # auto takes the simplest candidate within TIE_TOLERANCE of the fastest (planner/plan.py)
    assert fastest * (1 - 1e-9) <= auto["predicted_time_s"] <= fastest * (1 + TIE_TOLERANCE)


def test_ring_on_a_star_with_one_slow_host_takes_1_5x_the_bound() -> None:
    topo = Topology.from_dict(star([12.5, 12.5, 12.5, 3.125], latency_us=0.0))
    size = 256 << 20
    doc = make_plan(topo, topo.endpoints(), size, "ring")
    assert doc["lower_bound_time_s"] == pytest.approx(size / 3.125e9)
    assert doc["predicted_time_s"] == pytest.approx(1.5 * size / 3.125e9)


def test_hierarchical_uses_rails_across_hosts() -> None:
    from syncplan.planner.builders import dgx_cluster

    topo = Topology.from_dict(dgx_cluster(2, nics_per_host=8, nic_GBps=25.0))
    doc = make_plan(topo, topo.endpoints(), 64 << 20, "hierarchical")
    cross = [
        t
        for step in doc["program"]["steps"]
        for t in step
        if doc["ranks"][t["src"]].split("/")[0] != doc["ranks"][t["dst"]].split("/")[0]
    ]
    assert cross
    for t in cross:  # local index i of one host always talks to local index i of the other
        assert doc["ranks"][t["src"]].split("/")[1] == doc["ranks"][t["dst"]].split("/")[1]
        assert t["path"][1].endswith(f"nic{doc['ranks'][t['src']][-1]}") or "nic" in t["path"][2]


def test_single_rank_and_bad_requests() -> None:
    topo = Topology.from_dict(star([1.0, 1.0]))
    doc = make_plan(topo, ["h0/cpu0"], 1000)
    assert doc["program"]["steps"] == [] and verify_plan(doc, topo).ok
    with pytest.raises(RequestError, match="algorithm 'bogus' is unknown"):
        make_plan(topo, topo.endpoints(), 1000, "bogus")
    with pytest.raises(RequestError, match="size_bytes must be a positive integer"):
        make_plan(topo, topo.endpoints(), 0)
    with pytest.raises(RequestError, match="collective 'gather'"):
        make_plan(topo, topo.endpoints(), 10, collective="gather")


def test_hierarchical_serves_uneven_hosts() -> None:
    from syncplan.planner.builders import TopologyBuilder

    b = TopologyBuilder()
    sw = b.node("sw", "switch")
    for h, gpus in enumerate([2, 3]):
        for nic in b.pcie_host(f"h{h}", gpus, [10.0]):
            b.link(nic, sw, 10.0, 1.0, "network")
    topo = Topology.from_dict(b.to_dict())
    doc = check_plan(topo, topo.endpoints(), 1 << 20, "hierarchical")
    assert doc is not None and doc["details"]["uneven"]  # more in test_uneven.py
