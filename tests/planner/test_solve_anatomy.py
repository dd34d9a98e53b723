"""bench/planner_quality/solve_anatomy.py: its stage timers change no plan and come off
again; bad arguments give one error line."""

from __future__ import annotations

import subprocess
import sys

from syncplan.planner.algorithms.forest import general as forest_any
from syncplan.planner.families import random_family
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology

from tests.planner.conftest import QUALITY_BENCH, load_bench_script

SCRIPT = QUALITY_BENCH / "solve_anatomy.py"


def test_stages_are_timed_and_the_plan_is_the_same() -> None:
    bench = load_bench_script("solve_anatomy", QUALITY_BENCH)
    data = random_family("torus", 2)  # 6 ranks: one-piece and pieced step-priced LPs run
    topo = Topology.from_dict(data)
    plain = make_plan(topo, topo.endpoints(), 256 << 20, algorithm="forest")
    originals = {attr: getattr(forest_any, attr) for attr in bench.STAGES.values()}
    spent: dict[str, float] = {}
    restore = bench.instrument(spent)
    try:
        assert all(getattr(forest_any, a) is not f for a, f in originals.items())
        row = bench.measure(data, 256 << 20, spent)
    finally:
        restore()
    assert all(getattr(forest_any, a) is f for a, f in originals.items())
    assert row["ratio"] == plain["predicted_time_s"] / plain["lower_bound_time_s"]
    assert row["windows_s"] > 0 and row["total_s"] >= row["windows_s"] + row["pieced_s"]
    assert row["winner"] == plain["details"]["packing"]
    summary = bench.summary([row, {**row, "pieced_won": not row["pieced_won"]}])
    assert summary["pieced_won_s"] == summary["pieced_lost_s"] == round(row["pieced_s"], 2)


def test_bad_arguments_are_one_line() -> None:
    for args, says in (
        (["--families", "nope"], "unknown families nope"),
        (["--count", "0"], "--count must be >= 1"),
    ):
        bad = subprocess.run(
            [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
        )
        assert bad.returncode == 2 and says in bad.stderr
        assert "Traceback" not in bad.stderr
