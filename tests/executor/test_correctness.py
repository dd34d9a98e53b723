"""Plans run by 2, 4 and 8 gloo processes equal torch's all-reduce on every rank."""

from __future__ import annotations

from typing import Any

import pytest

from executor.localrun import LocalRunConfig, run_local
from tests.executor.conftest import plans_for
from tests.executor.plans import butterfly_plan, crossing_plan, ring_plan
from tests.executor.workers import check_cases

BIG = 1_000_003  # not a multiple of any plan's units
DTYPES = ("float32", "float16", "bfloat16")


def cases_for(nranks: int) -> list[tuple[dict[str, Any], int, str, list[int] | None]]:
    cases: list[tuple[dict[str, Any], int, str, list[int] | None]] = []
    for plan in plans_for(nranks):
        cases += [(plan, BIG, dt, None) for dt in DTYPES]
        cases.append((plan, 1001, "float64", None))
    ring = ring_plan(nranks, 4096)
    cases += [
        (ring, 5, "float32", None),  # fewer elements than units: most messages are empty
        (ring, 1, "float32", None),
        (ring, 777, "float32", list(reversed(range(nranks)))),  # plan rank i on rank n-1-i
        (ring_plan(nranks, 2 * nranks + 1), 100_003, "bfloat16", None),
        (butterfly_plan(nranks), 10_001, "float16", None),  # send and add the same units
    ]
    if nranks == 4:
        cases.append((crossing_plan(), 10_001, "float32", None))
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
