"""The timeline trace (SYNCPLAN_TRACE, docs/executor.md "Timeline trace"): every rank of a
4-rank gloo run writes a Chrome trace with one measured and one predicted event per plan step,
the measured ones in order without overlap, and the bytes the plan's program gives that rank."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from syncplan.executor.localrun import LocalRunConfig, run_local
from syncplan.executor.trace import (
    PREDICTED_PID,
    RECVS_TID,
    STEPS_TID,
    predicted_steps,
    trace_file,
)

from tests.executor.conftest import EXAMPLES
from tests.executor.trace_workers import run_plan

TOPOLOGY = EXAMPLES / "star-one-slow.json"
RANKS = ["h0/cpu0", "h1/cpu0", "h2/cpu0", "h3/cpu0"]
RUNS = 2


def plan(algorithm: str, size: int) -> dict[str, Any]:
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import load_topology

    return make_plan(load_topology(TOPOLOGY), RANKS, size, algorithm)


def program_bytes(doc: dict[str, Any], rank: int, numel: int) -> tuple[int, int]:
    """(bytes rank ``rank`` sends, bytes it receives) in one run, from the program alone
    (``numel`` a multiple of its units: each unit is numel / units float32 elements)."""
    per_unit = numel // doc["program"]["units"] * 4
    sent = recv = 0
    for step in doc["program"]["steps"]:
        for t in step:
            n = (t["chunk"][1] - t["chunk"][0]) * per_unit
            sent += n if t["src"] == rank else 0
            recv += n if t["dst"] == rank else 0
    return sent, recv


@pytest.mark.slow
@pytest.mark.parametrize(("algorithm", "schedule"), [("ring", "auto"), ("hierarchical", "steps")])
def test_every_rank_writes_measured_and_predicted_steps(
    tmp_path: Path, algorithm: str, schedule: str
) -> None:
    size = 64 << 10
    doc = plan(algorithm, size)
    numel = size // 4
    assert numel % doc["program"]["units"] == 0
    env = {
        "SYNCPLAN_TRACE": str(tmp_path / "trace-{rank}.json"),
        "SYNCPLAN_TRACE_TOPOLOGY": str(TOPOLOGY),
    }
    ranks = run_local(run_plan, (doc, numel, RUNS, schedule), LocalRunConfig(4, env=env))
    assert ranks == [0, 1, 2, 3]
    nsteps = len(doc["program"]["steps"])
    for rank in range(4):
        trace = json.loads((tmp_path / f"trace-{rank}.json").read_text())
        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        assert all({"name", "ts", "dur", "pid", "tid", "args"} <= e.keys() for e in events)
        steps = [e for e in events if e["pid"] == rank and e["tid"] == STEPS_TID]
        # measured: in order, no overlap on the lane
        for a, b in itertools.pairwise(steps):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6, (a, b)
            assert a["dur"] >= 0
        predicted = [e for e in events if e["pid"] == PREDICTED_PID + rank]
        for run in range(RUNS):
            mine = [e for e in steps if e["args"]["run"] == run and "step" in e["args"]]
            assert [e["args"]["step"] for e in mine] == list(range(nsteps))
            sent = sum(e["args"]["bytes_sent"] for e in mine)
            recv = sum(e["args"]["bytes_recv"] for e in mine)
            assert (sent, recv) == program_bytes(doc, rank, numel)
            pred = [e for e in predicted if e["args"]["run"] == run and e["tid"] == STEPS_TID]
            assert [e["args"]["step"] for e in pred] == list(range(nsteps))
            assert {e["args"]["model"] for e in pred} == {"cost model"}
            # the run's size is the plan's: the steps add up to its predicted time
            total = sum(e["args"]["predicted_s"] for e in pred)
            assert total == pytest.approx(doc["predicted_time_s"], rel=1e-9)
            # gloo's receives, one event per message, in order on their own lane
            got = [e for e in events if e["pid"] == rank and e["tid"] == RECVS_TID]
            got = [e for e in got if e["args"]["run"] == run]
            if schedule == "auto":
                assert sum(e["args"]["bytes"] for e in got) == recv
                assert {e["args"]["step"] for e in got} <= set(range(nsteps))
                for a, b in itertools.pairwise(got):
                    assert a["ts"] + a["dur"] <= b["ts"] + 1e-6, (a, b)
            else:
                assert got == []
        assert trace["otherData"]["runs"] == RUNS


def test_trace_file_names() -> None:
    assert trace_file("/t/x-{rank}.json", 3) == Path("/t/x-3.json")
    assert trace_file("/t/x.json", 3) == Path("/t/x.rank3.json")
    assert trace_file("/t/x", 0) == Path("/t/x.rank0.json")


def test_predicted_steps_without_a_topology_split_the_plans_time() -> None:
    from syncplan.core.document import PlanDocument

    doc = plan("ring", 1 << 20)
    times, model = predicted_steps(PlanDocument.from_plan(doc), doc, None, 1 << 20)
    assert model == "bytes split"
    assert len(times) == len(doc["program"]["steps"])
    assert sum(times) == pytest.approx(doc["predicted_time_s"])
    with_topo, model = predicted_steps(PlanDocument.from_plan(doc), doc, str(TOPOLOGY), 1 << 20)
    assert model == "cost model" and sum(with_topo) == pytest.approx(doc["predicted_time_s"])
