"""The rules that merge host reports and the fabric into one cluster graph."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from syncplan.api.merge import AUTO_SWITCH, check_report, merge, round3
from syncplan.core.errors import TopologyError
from syncplan.core.report import HostReport
from syncplan.planner.builders import dgx_cluster
from syncplan.planner.topology import Topology

from tests.api.helpers import host_report


def _reports(*reps: dict[str, Any]) -> dict[str, HostReport]:
    return {r["host"]: HostReport.model_validate(r) for r in reps}


def _links(graph: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(lk["src"], lk["dst"]): lk for lk in graph["links"]}


def test_host_rate_is_max_over_peer_measurements() -> None:
    # A pair probe sees min(rate_a, rate_b): h2 is the slow one, h0 and h1 are 12 GB/s.
    reps = _reports(
        host_report("h0", 1, peers={"h1": 12.0, "h2": 3.0}, latency_us=8.0),
        host_report("h1", 1, peers={"h2": 3.1}, latency_us=12.0),
        host_report("h2", 1),
    )
    m = merge(reps, None)
    links = _links(m.graph)
    assert {h: links[(f"{h}/nic0", AUTO_SWITCH)]["bandwidth_GBps"] for h in reps} == {
        "h0": 12.0,
        "h1": 12.0,
        "h2": 3.1,
    }
    # latency: half the median of the host's measurements (h0: 8, 8 -> 4; h2: 8, 12 -> 5)
    assert links[("h0/nic0", AUTO_SWITCH)]["latency_us"] == 4.0
    assert links[("h2/nic0", AUTO_SWITCH)]["latency_us"] == 5.0
    assert m.host_rates == {"h0": 12.0, "h1": 12.0, "h2": 3.1}
    Topology.from_dict(m.graph)


def test_cpu_only_hosts_get_a_cpu_endpoint() -> None:
    reps = _reports(
        host_report("c0", 1, cpu_only=True, peers={"c1": 1.2}),
        host_report("c1", 1, cpu_only=True, nic=False),
    )
    g = merge(reps, None).graph
    nodes = {n["id"]: n for n in g["nodes"]}
    assert nodes["c0/cpu0"] == {"id": "c0/cpu0", "kind": "cpu", "host": "c0"}
    links = _links(g)
    assert ("c0/cpu0", "c0/nic0") in links  # the host bus
    assert links[("c1/cpu0", AUTO_SWITCH)]["bandwidth_GBps"] == 1.2  # no NIC: the endpoint
    topo = Topology.from_dict(g)
    topo.check_ranks(["c0/cpu0", "c1/cpu0"])


def test_fabric_links_take_measured_rates_and_drop_unknown_hosts() -> None:
    reps = _reports(host_report("h0", 1, peers={"h1": 11.5}), host_report("h1", 1))
    fabric = {
        "nodes": [{"id": "tor", "kind": "switch"}],
        "links": [
            {"src": "h0/nic0", "dst": "tor", "bandwidth_GBps": 25.0},
            {"src": "h1/nic0", "dst": "tor", "bandwidth_GBps": 25.0},
            {"src": "h5/nic0", "dst": "tor", "bandwidth_GBps": 25.0},
            {"src": "h0/gpu0", "dst": "h0/gpu1", "bandwidth_GBps": 1.0},
        ],
    }
    m = merge(reps, fabric)
    links = _links(m.graph)
    assert links[("h0/nic0", "tor")]["bandwidth_GBps"] == 11.5
    assert ("h0/gpu0", "h0/gpu1") not in links  # inside a reporting host: the report rules
    assert m.dropped_fabric_links == 1
    assert AUTO_SWITCH not in {n["id"] for n in m.graph["nodes"]}  # every host is linked
    Topology.from_dict(m.graph)


def test_declared_cluster_with_one_reporting_host() -> None:
    declared = dgx_cluster(2, gpus=4)
    rep = host_report("h1", 1, gpus=4, peers={"h0": 10.0})
    m = merge(_reports(rep), declared)
    nodes = {n["id"]: n for n in m.graph["nodes"]}
    assert "h1/nvswitch0" in nodes and "h1/pcie_switch1" not in nodes  # the report's h1
    assert "h0/pcie_switch1" in nodes  # the declared h0
    links = _links(m.graph)
    assert links[("h1/nic0", "switch0")]["bandwidth_GBps"] == 10.0
    assert links[("h0/nic0", "switch0")]["bandwidth_GBps"] == 12.5  # not measured: declared
    Topology.from_dict(m.graph).check_ranks(["h0/gpu0", "h1/gpu3"])


def test_excluded_hosts_leave_no_trace() -> None:
    declared = dgx_cluster(2, gpus=2)
    m = merge({}, declared, excluded={"h1"})
    assert not any(n.get("host") == "h1" for n in m.graph["nodes"])
    assert m.dropped_fabric_links == sum(
        1 for lk in declared["links"] if "h1/" in lk["src"] + lk["dst"]
    )
    Topology.from_dict(m.graph)


def test_version_follows_the_graph() -> None:
    base = _reports(host_report("h0", 1, peers={"h1": 12.0}), host_report("h1", 1))
    v = merge(base, None).version
    assert merge(base, None).version == v
    resent = _reports(host_report("h0", 7, peers={"h1": 12.0}), host_report("h1", 3))
    assert merge(resent, None).version == v  # a new seq alone does not change the graph
    noisy = _reports(host_report("h0", 2, peers={"h1": 12.0004}), host_report("h1", 1))
    assert merge(noisy, None).version == v  # below three significant digits
    faster = _reports(host_report("h0", 2, peers={"h1": 12.5}), host_report("h1", 1))
    assert merge(faster, None).version != v


def test_inconsistent_reports_are_refused() -> None:
    rep = host_report("h0", 1)
    rep["links"].append({"src": "gpu0", "dst": "gpu0", "bandwidth_GBps": 1.0})
    with pytest.raises(TopologyError, match="links"):
        check_report(HostReport.model_validate(rep))
    rep = host_report("h0", 1, peers={"h0": 1.0})
    with pytest.raises(TopologyError, match=r"peers\[0\]"):
        check_report(HostReport.model_validate(rep))


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"h{i}" for i in range(6)]),
        st.tuples(
            st.integers(0, 3),
            st.booleans(),
            st.booleans(),
            st.dictionaries(
                st.sampled_from([f"h{i}" for i in range(6)]), st.floats(0.1, 100.0), max_size=3
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_any_reports_merge_into_a_valid_graph(hosts: dict[str, Any], with_fabric: bool) -> None:
    reps = {}
    for h, (gpus, cpu_only, nic, peers) in hosts.items():
        peers = {p: bw for p, bw in peers.items() if p != h}
        reps[h] = HostReport.model_validate(
            host_report(h, 1, gpus=max(gpus, 1), cpu_only=cpu_only, nic=nic, peers=peers)
        )
        check_report(reps[h])
    fabric = dgx_cluster(3, gpus=2) if with_fabric else None
    m = merge(reps, fabric)
    Topology.from_dict(m.graph)


def test_round3_keeps_huge_finite_values_finite() -> None:
    # 1.797e308 rounds up past the largest float; the schema fuzz test once got a 500 here
    assert round3(1.7976931348623157e308) == 1.7976931348623157e308
    assert round3(12.3456) == 12.3
