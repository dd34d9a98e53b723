"""Scenario files: the shipped ones load and mean what the issue says; bad ones are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from syncplan.planner.topology import Topology

from syncplan.testbed import TestbedError
from syncplan.testbed.scenario import SCENARIO_DIR, Scenario, load_scenario


@pytest.mark.parametrize(
    ("name", "rates", "trunk"),
    [
        ("homogeneous", [200] * 8, None),
        ("one-slow", [400] * 7 + [50], None),
        ("mixed", [400] * 4 + [100] * 4, None),
        ("two-racks", [200] * 8, 400),
        ("small", [200, 200, 100, 100], None),
        ("rates", [400, 400, 200, 50], None),
    ],
)
def test_shipped_scenarios(name: str, rates: list[float], trunk: float | None) -> None:
    sc = load_scenario(name)
    assert sc.name == name
    assert [h.rate_mbit for h in sc.hosts] == rates
    assert [h.name for h in sc.hosts] == [f"h{i}" for i in range(len(rates))]
    assert sc.trunk_mbit == trunk
    topo = Topology.from_dict(sc.ground_truth_topology())
    assert len(topo.endpoints()) == len(rates)


def test_two_racks_layout() -> None:
    sc = load_scenario("two-racks")
    assert sc.racks == (0, 1)
    assert [h.rack for h in sc.hosts] == [0] * 4 + [1] * 4
    assert sc.bottleneck_mbit() == 200


def test_ring_bound_matches_the_issue_figure() -> None:
    # issue 7: 8 ranks at 200 Mbit/s, 64 MiB: 4.70 s ideal
    assert load_scenario("homogeneous").ring_bound_s(64 << 20) == pytest.approx(4.70, abs=0.01)


def test_load_by_path(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"name": "x", "hosts": [{"name": "a", "rate_mbit": 10}, {"rate_mbit": 20}]}')
    sc = load_scenario(str(p))
    assert [(h.name, h.rate_mbit) for h in sc.hosts] == [("a", 10), ("h1", 20)]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x"}, "'hosts' must be a non-empty list"),
        ({"name": "x", "hosts": [{"rate_mbit": 0}]}, "rate_mbit must be a number"),
        ({"name": "x", "hosts": [{"rate_mbit": "fast"}]}, "rate_mbit must be a number"),
        ({"name": "x", "hosts": [{"rate_mbit": 10, "speed": 1}]}, "unknown keys ['speed']"),
        ({"name": "x", "hosts": [{"count": 2, "name": "a", "rate_mbit": 10}]}, "only allowed"),
        (
            {"name": "x", "hosts": [{"name": "a", "rate_mbit": 1}, {"name": "a", "rate_mbit": 1}]},
            "duplicate host names",
        ),
        ({"name": "x", "hosts": [{"rate_mbit": 1, "rack": 1}]}, "numbered 0..R-1"),
        (
            {"name": "x", "hosts": [{"rate_mbit": 1}, {"rate_mbit": 1, "rack": 1}]},
            "need trunk_mbit",
        ),
        ({"name": "x", "trunk_mbit": 5, "hosts": [{"rate_mbit": 1}]}, "all hosts are in rack 0"),
        ({"name": "Bad Name", "hosts": [{"rate_mbit": 1}]}, "scenario name"),
        ({"name": "x", "hosts": [{"rate_mbit": 1, "count": 65}]}, "count must be"),
        ([1, 2], "expected a mapping"),
    ],
)
def test_bad_scenarios_are_refused_with_a_reason(data: object, message: str) -> None:
    with pytest.raises(TestbedError) as err:
        Scenario.from_dict(data)
    assert message in str(err.value)


def test_unknown_scenario_lists_the_known_ones() -> None:
    with pytest.raises(TestbedError, match=r"known: .*mixed"):
        load_scenario("no-such-scenario")


def test_unparsable_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("hosts: [\n")
    with pytest.raises(TestbedError, match="cannot parse"):
        load_scenario(str(p))


def test_every_shipped_file_is_valid() -> None:
    files = sorted(SCENARIO_DIR.glob("*.yaml"))
    assert len(files) >= 5
    for f in files:
        assert load_scenario(str(f)).name == f.stem
