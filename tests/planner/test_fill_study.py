"""bench/planner_quality/fill_study.py: the free-pieces LP's program is verified, at or above
the bound, and its pieces cover the buffer; bad arguments give one error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from syncplan.planner.family_grids import mesh2d

from tests.planner.conftest import QUALITY_BENCH, load_bench_script

SCRIPT = QUALITY_BENCH / "fill_study.py"


def _load() -> ModuleType:
    return load_bench_script("fill_study", QUALITY_BENCH)


@pytest.mark.slow
@pytest.mark.parametrize("hat_count", [0, 3])
def test_free_pieces_on_a_small_mesh(tmp_path: Path, hat_count: int) -> None:
    topo = tmp_path / "mesh-3x3.json"
    topo.write_text(json.dumps(mesh2d(3, 3)))
    row = _load().study(topo, 64 << 20, pieces=8, rounds=3, topk=4, hat_count=hat_count)
    # verified inside study(); the cost model's time is the simulator's, and no lower
    assert row["free_pieces_s"] == pytest.approx(row["simulated_s"], rel=1e-9)
    assert row["free_pieces_s"] >= row["bound_s"] * (1 - 1e-9)
    assert len(row["piece_sizes"]) == 8 and sum(row["piece_sizes"]) == pytest.approx(1.0)
    lp = row["lp_s_per_round"]
    assert 1 <= len(lp) <= 4 and lp[-1] <= lp[0] * (1 + 1e-9)


def test_bad_arguments_are_one_line() -> None:
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--pieces", "1"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--pieces must be >= 2" in bad.stderr
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--hats", "1"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--hats 0 or 2..pieces" in bad.stderr
    assert "Traceback" not in bad.stderr
