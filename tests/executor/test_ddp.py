"""DDP with the plan hook and fused all-reduce on 4 CPU processes."""

from __future__ import annotations

import pytest
from syncplan.executor.localrun import LocalRunConfig, run_local

from tests.executor.conftest import plans_for
from tests.executor.plans import crossing_plan, ring_plan
from tests.executor.workers import ddp_run


@pytest.mark.slow
def test_ddp_hook_and_fusion_match_native() -> None:
    plans = [ring_plan(4, 4096), crossing_plan(), *plans_for(4)[-1:]]
    results = run_local(ddp_run, (plans,), LocalRunConfig(4, timeout_s=150))
    n = len(results)
    warnings = [w for per_rank in results for w in per_rank[-1]["warnings"]]
    assert len(warnings) == 1 and "dtype torch.int64 is not supported" in warnings[0]
    for per_rank in results:
        assert per_rank[-1]["ints"] == [[n] * 3] * 2 and not per_rank[-1]["using_plan"]
    for rank, per_rank in enumerate(results):
        for plan, res in zip(plans, per_rank[:-1], strict=True):
            where = f"rank {rank} plan {plan['plan_id']}"
            assert res["using_plan"], where
            assert res["identical"], f"{where}: parameters differ across ranks"
            assert res["max_diff"] < 1e-5, f"{where}: hook vs plain DDP differ by {res}"
            assert res["fused_err"] < 1e-2, f"{where}: fused all-reduce off by {res}"
            assert res["fused_shapes_kept"] and res["buckets"] >= 4, where
