"""The pieced LP reduced by time reversal (planner.algorithms.packing.reversal) has the full
LP's value on its trees' pairs; bench/planner_quality/reversal_study.py writes a program the
verifier simulates, and bad arguments give one error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.reversal import ReversedLP
from syncplan.planner.algorithms.packing.sets import packings
from syncplan.planner.algorithms.packing.window import WindowLP
from syncplan.planner.family_grids import mesh2d
from syncplan.planner.topology import Topology

from tests.planner.conftest import QUALITY_BENCH

SCRIPT = QUALITY_BENCH / "reversal_study.py"
SIZE = 256 << 20


def test_the_reversed_lp_is_the_full_lp_on_its_pairs() -> None:
    """Its in-trees and their reversed out-trees, solved by the full pieced LP, give its
    value: the reduced rows and weighted time columns are the full LP's, halved."""
    t = Topology.from_dict(mesh2d(3, 3, degraded=1))
    ctx = PlanContext.create(t, t.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    routes = ctx.memo["packing_routes"][key[0]]
    lp = ReversedLP(ctx, routes, key[1], table[key].pool, 4)
    found = lp.solve(rounds=10)
    assert found is not None and all(t.inward for t in found.trees)
    pairs, pieces = lp.program_trees(found)
    assert sorted(pieces.tolist()) == sorted((3 - pieces).tolist())  # mirrored pieces
    full = WindowLP(ctx, routes, key[1], pairs.trees, 4, [[int(p)] for p in pieces])
    again = full.solve(rounds=0)
    assert again is not None
    assert again.theta == pytest.approx(found.theta, rel=1e-6)


def test_the_study_writes_a_verified_program(tmp_path: Path) -> None:
    topo = tmp_path / "t.json"
    topo.write_text(json.dumps(mesh2d(3, 3, degraded=1)))
    run = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--topology",
            str(topo),
            "--pieces",
            "2,4",
            "--rounds",
            "5",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (row,) = json.loads((tmp_path / "planner_reversal_study.json").read_text())
    assert [lv["pieces"] for lv in row["levels"]] == [2, 4]
    assert row["simulated_s"] == pytest.approx(row["program_s"], rel=1e-6)
    assert (tmp_path / "planner_reversal_study.png").stat().st_size > 0


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    for args, says in (
        (["--pieces", "2,x"], "not a comma-separated list"),
        (["--rounds", "-1"], "--rounds >= 0"),
        (["--topology", str(tmp_path / "none.json")], "no such file"),
    ):
        bad = subprocess.run(
            [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
        )
        assert bad.returncode == 2 and says in bad.stderr
        assert "Traceback" not in bad.stderr
