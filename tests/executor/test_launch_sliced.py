"""Sliced launch (SYNCPLAN_PLAN_SLICES=1): every rank fetches only its own slice, the ranks
agree on one plan before any message of it is sent, and the sums equal the whole plan's."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from syncplan.executor.launch import LaunchConfig, slices_disagree
from syncplan.executor.localrun import LocalRunConfig, run_local
from syncplan.planner.builders import dgx_cluster
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology

from tests.executor.plans import ring_plan
from tests.executor.slice_workers import sliced_run
from tests.executor.sliceserver import SliceServer

HOST = socket.gethostname()
RANKS = [f"{HOST}/cpu{i}" for i in range(8)]


def _renamed(doc: dict[str, Any], ranks: list[str]) -> dict[str, Any]:
    """``doc`` with its endpoints renamed to ``ranks`` and its paths dropped (optional)."""
    steps = [
        [{k: v for k, v in t.items() if k not in ("path", "route")} for t in st]
        for st in doc["program"]["steps"]
    ]
    return {**doc, "ranks": ranks, "program": {"units": doc["program"]["units"], "steps": steps}}


def test_config_reads_the_switch_and_refuses_what_a_slice_cannot_do() -> None:
    base = {"SYNCPLAN_JOB_ID": "j", "SYNCPLAN_SERVER": "http://x"}
    assert not LaunchConfig.from_env(base).sliced
    assert LaunchConfig.from_env({**base, "SYNCPLAN_PLAN_SLICES": "1"}).sliced
    assert not LaunchConfig.from_env({**base, "SYNCPLAN_PLAN_SLICES": "0"}).sliced
    with pytest.raises(ValueError, match="SYNCPLAN_PLAN_SLICES"):
        LaunchConfig.from_env({**base, "SYNCPLAN_PLAN_SLICES": "maybe"})
    for extra in ({"plan_file": "p.json"}, {"refresh_every": 5}, {"topology": object()}):
        with pytest.raises(ValueError, match="sliced"):
            LaunchConfig(sliced=True, **extra)


def test_disagreement_names_both_plans() -> None:
    eps = ["a", "b", "c"]
    assert slices_disagree(eps, [("p", "d" * 64), None, ("p", "d" * 64)]) is None
    why = slices_disagree(eps, [("p", "d" * 64), ("p", "d" * 64), ("q", "e" * 64)])
    assert why is not None and "rank 2 (c)" in why and "plan p" in why and "plan q" in why


@pytest.fixture(scope="module")
def sliced() -> tuple[dict[str, Any], SliceServer, dict[str, Any]]:
    topo = Topology.from_dict(dgx_cluster(2, gpus=4))
    eps = topo.resolve_ranks("all")
    forest = _renamed(make_plan(topo, eps, 1 << 20, "forest"), RANKS)
    ring = ring_plan(8, 64, ranks=list(reversed(RANKS)))
    plans = {"forest": forest, "ring": ring, "mixed": forest}
    srv = SliceServer(plans, odd={"mixed": {RANKS[5]: ring}})
    jobs = ["forest", "ring", "mixed", "absent"]
    with srv.running():
        results = run_local(sliced_run, (srv.url, jobs, 10_000), LocalRunConfig(8, timeout_s=240))
    return {job: [r[job] for r in results] for job in jobs}, srv, plans


@pytest.mark.slow
@pytest.mark.parametrize("job", ["forest", "ring"])
def test_sliced_plan_sums_as_the_whole_one(sliced: Any, job: str) -> None:
    results, srv, _ = sliced
    for rank, res in enumerate(results[job]):
        assert res["sliced"] and res["using_plan"] and res["whole_using_plan"], (rank, res)
        assert res["equal"] and res["close"] and res["warnings"] == [], (rank, res)
        assert res["direct"] is (True if job == "forest" else None), (rank, res)
    # each rank asked for its own slice, by endpoint, in the compact form
    asked = [r for j, r, form in srv.fetches if j == job and r is not None]
    assert sorted(set(asked)) == sorted(RANKS)
    assert all(form == "compact" for j, _, form in srv.fetches if j == job)


@pytest.mark.slow
def test_a_slice_of_another_plan_makes_every_rank_fall_back(sliced: Any) -> None:
    results, _, plans = sliced
    for rank, res in enumerate(results["mixed"]):
        why = res["reason"] or ""
        assert not res["using_plan"] and "plan slices disagree" in why, (rank, res)
        assert plans["forest"]["plan_id"] in why and plans["ring"]["plan_id"] in why
        assert f"rank 5 ({RANKS[5]})" in why
        assert res["close"], (rank, res)  # torch's all-reduce summed instead
    warnings = [w for res in results["mixed"] for w in res["warnings"]]
    assert len(warnings) == 1 and "plan slices disagree" in warnings[0]


@pytest.mark.slow
def test_a_failed_slice_fetch_falls_back(sliced: Any) -> None:
    results, _, _ = sliced
    for res in results["absent"]:
        assert not res["using_plan"] and "cannot fetch this rank's plan slice" in res["reason"]
