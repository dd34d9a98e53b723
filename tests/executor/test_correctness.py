"""Plans run by 2, 4 and 8 gloo processes equal torch's all-reduce on every rank."""

from __future__ import annotations

import pytest
from syncplan.executor.localrun import LocalRunConfig, run_local

from tests.executor.conftest import plans_for
from tests.executor.plans import butterfly_plan, crossing_plan, ring_plan
from tests.executor.workers import Case, check_cases

BIG = 1_000_003  # not a multiple of any plan's units
DTYPES = ("float32", "float16", "bfloat16")


def cases_for(nranks: int) -> list[Case]:
    cases: list[Case] = []
    for plan in plans_for(nranks):
        cases += [(plan, BIG, dt, None, None) for dt in DTYPES]
        cases.append((plan, 1001, "float64", None, None))
    ring = ring_plan(nranks, 4096)
    seg = {"segment_bytes": 4000}
    steps = {"schedule": "steps"}  # the path NCCL takes, here on gloo
    cases += [
        (ring, 5, "float32", None, None),  # fewer elements than units: most messages empty
        (ring, 1, "float32", None, None),
        (ring, 777, "float32", list(reversed(range(nranks))), None),  # plan rank i: n-1-i
        (ring_plan(nranks, 2 * nranks + 1), 100_003, "bfloat16", None, seg),
        (butterfly_plan(nranks), 10_001, "float16", None, None),  # send and add same units
        (butterfly_plan(nranks), 10_001, "float32", None, {"segment_bytes": 1000}),
        (ring, 100_003, "float16", list(reversed(range(nranks))), steps),
        (butterfly_plan(nranks), 10_001, "float32", None, steps),
        (plans_for(nranks)[-1], 100_003, "bfloat16", None, steps),
    ]
    if nranks == 4:
        cases += [
            (crossing_plan(), 10_001, "float32", None, None),
            (crossing_plan(), 10_001, "float32", None, {"segment_bytes": 400}),
            (crossing_plan(), 10_001, "float32", None, steps),
        ]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_plans_match_torch_all_reduce(nranks: int) -> None:
    cases = cases_for(nranks)
    results = run_local(check_cases, (cases,), LocalRunConfig(nranks, timeout_s=150))
    assert len(results) == nranks
    algos = {c[0].get("algorithm") for c in cases}
    assert "ring" in algos
    for rank, per_rank in enumerate(results):
        assert len(per_rank) == len(cases)
        for res in per_rank:
            where = f"rank {rank} {res['case']}"
            assert res["within_tol"], f"{where}: max abs err {res['max_abs_err']}"
            assert res["identical"], f"{where}: ranks hold different bits"
            assert res["repeatable"], f"{where}: a second run differs"
            assert res["changed"], f"{where}: the buffer was not reduced"
