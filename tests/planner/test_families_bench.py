"""bench/planner_quality/families.py: one measurement is verified and consistent; bad
arguments give one error line."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import pytest
from syncplan.planner.family_hosts import full_mesh
from syncplan.planner.plan import TIE_TOLERANCE

from tests.planner.conftest import QUALITY_BENCH, load_bench_script

SCRIPT = QUALITY_BENCH / "families.py"


def _load() -> ModuleType:
    return load_bench_script("families", QUALITY_BENCH)


@pytest.mark.slow
def test_measure_one_topology() -> None:
    bench = _load()
    row = bench.measure(full_mesh(3, slow_pair=(0, 1)), 1 << 20, verify_max=64)
    assert row["ranks"] == 3 and row["verified"]
    best = min(row["candidates"].values())
    assert best <= row["auto_ratio"] <= best * (1 + TIE_TOLERANCE)  # auto: simplest of ties
    assert best >= 1 - 1e-9 and row["forest_ratio"] == row["candidates"]["forest"]
    s = bench.summary([{**row, "seed": 0}])
    assert s["count"] == 1 and s["auto_ratio"]["median"] == row["auto_ratio"]


@pytest.mark.slow
def test_bad_arguments_give_one_line() -> None:
    for args in (["--families", "hypercube"], ["--size", "lots"], ["--count", "0"]):
        res = subprocess.run(
            [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
        )
        assert res.returncode != 0
        assert res.stderr.strip().startswith("error:") and "Traceback" not in res.stderr, args
