"""The transfer-limit study (bench/planner_scale/cap_study.py) prices as forest does."""

from __future__ import annotations

import pytest

from tests.planner.conftest import load_bench_script


@pytest.fixture(scope="module")
def study():
    return load_bench_script("cap_study")


def test_the_study_never_beats_forest_under_forests_own_limit(study) -> None:
    from syncplan.planner.algorithms.packing import PACKING
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import Topology

    from bench.planner_scale.run import topology

    ranks = 128
    limit = PACKING.max_transfers
    small, large = study.study(ranks, [limit // 20, limit])
    topo = Topology.from_dict(topology(ranks))
    doc = make_plan(topo, topo.endpoints(), study.SIZE, "forest")
    # forest prices a superset of the study's configurations, then may trade up to 2 % for
    # less fan-in (fan_in_tolerance)
    chosen = large["best"]
    assert chosen["time_s"] >= doc["predicted_time_s"] / (1 + study.FOREST.fan_in_tolerance)
    assert chosen["transfers"] <= limit
    assert chosen["ratio"] >= 1.0
    assert small["best"]["transfers"] <= limit // 20
    assert small["best"]["pieces"] < chosen["pieces"]
    assert small["best"]["time_s"] > chosen["time_s"]
