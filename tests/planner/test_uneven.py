"""hierarchical on hosts with different numbers of ranks (issue 12 item 5): every program
the nested-group decomposition emits passes the independent verifier, at the predicted time."""

from __future__ import annotations

import pytest
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.uneven import level_sets
from syncplan.planner.builders import TopologyBuilder
from syncplan.planner.family_hosts import random_two_switch
from syncplan.planner.plan import compare, make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan


def cluster(sizes: list[int], switches: int = 1) -> Topology:
    """Hosts of the given GPU counts (NVSwitch and PCIe alternating), one 12.5 GB/s NIC each,
    spread over ``switches`` switches joined by a 25 GB/s trunk."""
    b = TopologyBuilder()
    sws = [b.node(f"sw{k}", "switch") for k in range(switches)]
    for k in range(1, switches):
        b.link(sws[0], sws[k], 25.0, 1.0, "network")
    for h, gpus in enumerate(sizes):
        make = b.dgx_host if h % 2 else b.pcie_host
        for nic in make(f"h{h}", gpus, [12.5]):
            b.link(nic, sws[h % switches], 12.5, 1.0, "network")
    return Topology.from_dict(b.to_dict())


def verified(topo: Topology, ranks: list[str], size: int) -> dict:
    doc = make_plan(topo, ranks, size, "hierarchical")
    rep = verify_plan(doc, topo)
    assert rep.ok, rep.error
    assert rep.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-6)
    assert doc["predicted_time_s"] >= doc["lower_bound_time_s"] * (1 - 1e-9)
    assert doc["program"]["units"] <= size  # never finer than a byte
    return doc


@pytest.mark.parametrize(
    "sizes,switches",
    [([1, 2, 3, 4], 1), ([2, 3], 1), ([1, 4, 4, 2, 3], 2), ([4, 1, 1], 2), ([3, 1, 2, 4, 2, 1], 3)],
)
@pytest.mark.parametrize("size", [1, 7, 1000, 1 << 20, 256 << 20])
def test_uneven_hosts_are_served_and_verified(sizes: list[int], switches: int, size: int) -> None:
    topo = cluster(sizes, switches)
    doc = verified(topo, topo.endpoints(), size)
    assert doc["details"]["uneven"] is True


def test_ranks_interleaved_across_hosts() -> None:
    topo = cluster([1, 2, 3, 4], 2)
    ranks = sorted(topo.endpoints(), key=lambda r: (r.split("/")[1], r))  # h*/gpu0 first
    verified(topo, ranks, 3 << 20)


def test_uneven_beats_the_flat_ring_where_hosts_are_fast_inside() -> None:
    topo = cluster([1, 2, 3, 4])
    comp = compare(topo, topo.endpoints(), 1 << 20, algorithms=["ring", "hierarchical"])
    assert (
        comp.candidates["hierarchical"].predicted_time_s
        < 0.9 * comp.candidates["ring"].predicted_time_s
    )


def test_level_sets_nest_hosts_in_racks() -> None:
    topo = cluster([1, 2, 3, 4], 2)
    ranks = topo.endpoints()
    sets = level_sets(PlanContext.create(topo, ranks, 1 << 20))
    assert set(sets) == {"host+rack", "host", "rack", "flat"}
    host_rack = sets["host+rack"]
    assert [len(g) for g in host_rack[0]] == [1, 2, 3, 4]  # hosts of ranks
    assert sorted(len(g) for g in host_rack[1]) == [2, 2]  # racks of hosts (h0,h2 | h1,h3)
    assert host_rack[2] == [[0, 1]]
    assert sets["flat"] == [[list(range(10))]] or len(sets["flat"][0][0]) == 10


@pytest.mark.parametrize("seed", range(6))
def test_random_two_switch_clusters(seed: int) -> None:
    topo = Topology.from_dict(random_two_switch(seed))
    verified(topo, topo.endpoints(), 64 << 20)
