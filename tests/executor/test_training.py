"""Schedules in training: every method's parameters equal plain DDP's after 50 iterations
(also a job that adopts another schedule and mode half-way)."""

from __future__ import annotations

from typing import Any

import pytest
from syncplan.executor.localrun import LocalRunConfig, run_local
from syncplan.planner.builders import star
from syncplan.planner.plan import make_plan
from syncplan.planner.schedule import TensorSpec, make_schedule
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

from tests.executor.training_workers import compare_methods, make_model


def _schedule(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    topo = Topology.from_dict(star([10.0] * (n - 1) + [2.0]))
    ranks = topo.endpoints()[:n]
    params = [p for p in make_model().parameters()][::-1]
    # a declared profile so that the DP cuts several buckets
    tensors = [TensorSpec(p.numel(), "float32", 1e-4, 1e-3) for p in params]
    sched = make_schedule(topo, ranks, tensors, algorithms=["ring", "hierarchical"], anchors=2)
    for mode in sched["modes"].values():
        for b in mode["buckets"]:
            for doc in b["plans"].values():
                assert verify_plan(doc, topo).ok
    plan = make_plan(topo, ranks, 4096, "ring")
    return sched, plan


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_every_method_matches_ddp_after_50_iterations(n: int) -> None:
    sched, plan = _schedule(n)
    assert len(sched["modes"]["dear"]["buckets"]) >= 1
    results = run_local(compare_methods, (sched, plan), LocalRunConfig(n, timeout_s=240))
    for rank, res in enumerate(results):
        assert res["moved"] > 1e-2  # training changed the parameters: the check can fail
        for method, d in res["diff"].items():
            assert d < 1e-5, f"rank {rank} {method}: {d} from DDP"
        assert res["using"] == {
            "schedule-allreduce": True,
            "dear": True,
            "dear-fallback": False,
            "adopted": True,
        }
    warnings = [w for res in results for w in res["warnings"]]
    assert len(warnings) == 1 and "no schedule" in warnings[0], warnings
