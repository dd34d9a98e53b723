"""Reduce-scatter and all-gather plans: split from all-reduce programs, checked by the verifier."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from syncplan.core.errors import InfeasibleError, RequestError
from syncplan.core.program import Program, Transfer, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, PlanContext
from syncplan.planner.collectives import split_allreduce
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import load_topology
from syncplan.planner.verify import verify_plan

from .conftest import EXAMPLES

SMALL = ["dgx-1x8.json", "one-slow-nic.json", "star-one-slow.json", "mixed-100-25.json"]


def _plan(
    name: str, collective: str, algorithm: str, shards: str = "equal", size: int = 8 << 20
) -> tuple[dict, object]:
    topo = load_topology(EXAMPLES / name)
    return make_plan(topo, topo.endpoints(), size, algorithm, collective, shards=shards), topo


def _allreduce_doc(rs: dict, ag: dict) -> dict:
    """RS then AG as one all-reduce document (paths dropped: the verifier routes itself)."""
    steps = [
        [{k: v for k, v in t.items() if k not in ("path", "route")} for t in s]
        for s in rs["program"]["steps"] + ag["program"]["steps"]
    ]
    return {
        "collective": "allreduce",
        "ranks": rs["ranks"],
        "size_bytes": rs["size_bytes"],
        "program": {"units": rs["program"]["units"], "steps": steps},
    }


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
def test_rs_and_ag_verify_and_compose_to_an_allreduce(name: str, algorithm: str) -> None:
    try:
        rs, topo = _plan(name, "reducescatter", algorithm)
    except InfeasibleError:
        pytest.skip(f"{algorithm} does not fit {name}")
    ag, _ = _plan(name, "allgather", algorithm)
    assert rs["shards"] == ag["shards"]
    sizes = {b - a for a, b in rs["shards"]}
    assert len(sizes) == 1  # equal shards by default
    for doc in (rs, ag):
        rep = verify_plan(doc, topo)
        assert rep.ok, rep.error
        assert rep.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-9)
        assert doc["predicted_time_s"] >= doc["lower_bound_time_s"] * (1 - 1e-9)
    both = verify_plan(_allreduce_doc(rs, ag), topo)
    assert both.ok, both.error


@pytest.mark.slow
@pytest.mark.parametrize("name", ["one-slow-nic.json", "star-one-slow.json"])
def test_any_shards_admit_forest_rate_sized_roots(name: str) -> None:
    rs, topo = _plan(name, "reducescatter", "auto", "any")
    ag, _ = _plan(name, "allgather", "auto", "any")
    assert "forest" in rs["candidates"]
    assert rs["predicted_time_s"] <= min(rs["candidates"].values()) * 1.011
    for doc in (rs, ag):
        rep = verify_plan(doc, topo)
        assert rep.ok, rep.error
        assert doc["predicted_time_s"] >= doc["lower_bound_time_s"] * (1 - 1e-9)
    assert verify_plan(_allreduce_doc(rs, ag), topo).ok
    equal, _ = _plan(name, "reducescatter", "auto", "equal")
    assert equal["lower_bound_time_s"] >= rs["lower_bound_time_s"] * (1 - 1e-9)


def test_split_of_every_fast_algorithm_renumbers_owned_units_contiguously() -> None:
    topo = load_topology(EXAMPLES / "dgx-2x8-1nic.json")
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, 1 << 20)
    for name in ("ring", "hierarchical"):
        split = split_allreduce(ALGORITHMS[name](ctx).build(), len(ranks), name)
        assert [a for a, _ in split.shards] == [
            sum(split.details["owned_units"][:i]) for i in range(len(ranks))
        ]
        assert all(t.reduce for s in split.rs.steps for t in s)
        assert not any(t.reduce for s in split.ag.steps for t in s)


def test_split_rejects_a_program_that_is_not_reduce_then_broadcast() -> None:
    # rank 0 and 1 swap values by replace only: nobody ever holds the sum
    swap = Program(1, [[Transfer(0, 1, 0, 1, False), Transfer(1, 0, 0, 1, False)]])
    with pytest.raises(InfeasibleError, match="no rank holds the full sum"):
        split_allreduce(swap, 2)


def _ring_rs() -> tuple[dict, object]:
    return _plan("star-one-slow.json", "reducescatter", "ring", size=4096)


def test_verifier_rejects_broken_reduce_scatters_and_all_gathers() -> None:
    rs, topo = _ring_rs()
    ag, _ = _plan("star-one-slow.json", "allgather", "ring", size=4096)
    bad = copy.deepcopy(rs)
    bad["program"]["steps"].pop()
    assert "lack the input" in verify_plan(bad, topo).error
    bad = copy.deepcopy(rs)
    bad["shards"][0], bad["shards"][1] = bad["shards"][1], bad["shards"][0]
    assert not verify_plan(bad, topo).ok  # right ranges, wrong owners
    bad = copy.deepcopy(rs)
    bad["shards"][-1] = [bad["shards"][-1][0], bad["shards"][-1][1] - 1]
    assert "cover" in verify_plan(bad, topo).error
    bad = copy.deepcopy(rs)
    bad["shards"] = bad["shards"][:-1]
    assert "one per rank" in verify_plan(bad, topo).error
    bad = copy.deepcopy(ag)
    bad["program"]["steps"][0][0]["reduce"] = True
    assert "no reductions" in verify_plan(bad, topo).error
    bad = copy.deepcopy(ag)
    bad["program"]["steps"].pop(0)
    assert "owner" in verify_plan(bad, topo).error
    # an all-reduce program is no all-gather: the first steps send values that are no owner's
    whole = _allreduce_doc(rs, ag)
    whole.update(collective="allgather", shards=ag["shards"])
    assert not verify_plan(whole, topo).ok


@pytest.mark.slow
def test_requests_name_what_is_wrong() -> None:
    topo = load_topology(EXAMPLES / "star-one-slow.json")
    with pytest.raises(RequestError, match="shards"):
        make_plan(topo, topo.endpoints(), 4096, "ring", "reducescatter", shards="some")
    with pytest.raises(RequestError, match="collective 'alltoall'"):
        make_plan(topo, topo.endpoints(), 4096, "ring", "alltoall")
    with pytest.raises(InfeasibleError, match="shards 'any'"):
        make_plan(topo, topo.endpoints(), 4096, "forest", "allgather")


def test_single_rank_plans_are_empty_and_verify() -> None:
    topo = load_topology(EXAMPLES / "star-one-slow.json")
    doc = make_plan(topo, topo.endpoints()[:1], 4096, "ring", "reducescatter")
    assert doc["shards"] == [[0, 1]] and doc["program"]["steps"] == []
    assert verify_plan(doc, topo).ok


@pytest.mark.slow
def test_cli_plans_and_verifies_a_reduce_scatter(tmp_path: Path) -> None:
    topo = str(EXAMPLES / "star-one-slow.json")
    out = tmp_path / "rs.json"
    run = [sys.executable, "-m", "syncplan"]
    res = subprocess.run(
        [
            *run,
            "plan",
            "-t",
            topo,
            "--collective",
            "reducescatter",
            "-a",
            "ring",
            "--size",
            "1MiB",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "reducescatter of 1 MiB" in res.stdout and "lower bound" in res.stdout
    assert json.loads(out.read_text())["collective"] == "reducescatter"
    res = subprocess.run(
        [*run, "verify", str(out), "-t", topo], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and "shard" in res.stdout, res.stderr
    res = subprocess.run(
        [*run, "plan", "-t", topo, "--collective", "allgather", "-a", "forest"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode != 0 and "shards 'any'" in res.stderr
    assert "Traceback" not in res.stderr


def test_program_to_doc_roundtrip_keeps_split_chunks() -> None:
    split = split_allreduce(
        Program(2, [[Transfer(1, 0, 0, 2, True)], [Transfer(0, 1, 0, 2, False)]]), 2
    )
    assert split.shards == [(0, 2), (2, 2)]
    assert program_to_doc(split.rs)["steps"] == [
        [{"src": 1, "dst": 0, "chunk": [0, 2], "reduce": True}]
    ]
