"""Effort "thorough": forest's pieced LPs get minutes (planner.algorithms.forest.effort), the
plan is verified and never slower than the fast one, and bad values are request errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from syncplan.core.errors import RequestError
from syncplan.planner import make_plan, verify_plan
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.pieced import pieced_window
from syncplan.planner.algorithms.packing.reversal import reverse_arcs
from syncplan.planner.algorithms.packing.sets import packings
from syncplan.planner.algorithms.packing.window import Budget, WindowLP
from syncplan.planner.family_grids import mesh2d
from syncplan.planner.family_hosts import directed_cluster
from syncplan.planner.topology import Topology

from tests.planner.conftest import QUALITY_BENCH

SIZE = 256 << 20


def _plans(family: dict) -> tuple[Topology, dict, dict]:
    topo = Topology.from_dict(family)
    ranks = topo.endpoints()
    return (
        topo,
        make_plan(topo, ranks, SIZE, algorithm="forest"),
        make_plan(topo, ranks, SIZE, algorithm="forest", effort="thorough"),
    )


def test_thorough_plans_are_verified_and_never_slower() -> None:
    """A degraded 3x3 mesh (no automorphism, every link one bandwidth both ways): the
    thorough LPs over time-reversal orbits find a faster program than the fast budget."""
    topo, fast, thorough = _plans(mesh2d(3, 3, degraded=1))
    rep = verify_plan(thorough, topo)
    assert rep.ok, rep.error
    assert rep.simulated_time_s == pytest.approx(thorough["predicted_time_s"], rel=1e-6)
    assert thorough["predicted_time_s"] < fast["predicted_time_s"] * 0.99
    assert thorough["effort"] == "thorough" and "effort" not in fast
    assert thorough["plan_id"] != fast["plan_id"]


def test_thorough_keeps_the_fast_plan_where_it_finds_nothing_better() -> None:
    """The fast runs come first, so a thorough plan is at most the fast plan's time."""
    topo, fast, thorough = _plans(mesh2d(2, 3, degraded=1))
    assert verify_plan(thorough, topo).ok
    assert thorough["predicted_time_s"] <= fast["predicted_time_s"]


def test_bad_effort_is_a_request_error() -> None:
    topo = Topology.from_dict(mesh2d(2, 2))
    ranks = topo.endpoints()
    with pytest.raises(RequestError, match="effort must be one of fast, thorough"):
        make_plan(topo, ranks, SIZE, effort="max")
    with pytest.raises(RequestError, match="all-reduce plans only"):
        make_plan(topo, ranks, SIZE, collective="reducescatter", effort="thorough")


def test_reverse_arcs_pair_every_arc_or_none() -> None:
    """Full-duplex links: each arc's reverse, an involution; a directed link: None."""
    topo = Topology.from_dict(mesh2d(3, 3, degraded=1))
    rev = reverse_arcs(PlanContext.create(topo, topo.endpoints(), SIZE))
    assert rev is not None and np.array_equal(rev[rev], np.arange(len(rev)))
    assert (rev != np.arange(len(rev))).all()
    directed = Topology.from_dict(directed_cluster())
    assert reverse_arcs(PlanContext.create(directed, directed.endpoints(), SIZE)) is None


def test_round_cap_keeps_the_most_negative_columns_in_order() -> None:
    lp = WindowLP.__new__(WindowLP)  # only ``keep_columns`` and its cap are used
    priced = [(-1.0, "a", 0), (-5.0, "b", 1), (-3.0, "c", 2), (-0.5, "d", 3)]
    lp.round_cap = None
    assert lp.keep_columns(priced) == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]
    lp.round_cap = 2
    assert lp.keep_columns(priced) == [("b", 1), ("c", 2)]


def test_cli_effort(tmp_path: Path) -> None:
    """--effort thorough shows the thorough LPs' progress; a bad value and a thorough
    reduce-scatter are one-line errors."""
    topo = tmp_path / "m.json"
    topo.write_text(json.dumps(mesh2d(2, 3, degraded=1)))
    cli = [sys.executable, "-m", "syncplan", "plan", "--topology", str(topo)]
    run = subprocess.run(
        [*cli, "--effort", "thorough", "--progress", "-a", "forest"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "forest, thorough: 64 pieces" in run.stderr
    assert "INFO" not in run.stderr  # in the progress line, not logged twice
    bad = subprocess.run([*cli, "--effort", "max"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "invalid choice: 'max'" in bad.stderr
    rs = subprocess.run(
        [*cli, "--effort", "thorough", "--collective", "reducescatter"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rs.returncode != 0 and "--effort applies to all-reduce plans only" in rs.stderr
    assert "Traceback" not in bad.stderr + rs.stderr


def test_the_effort_bench_writes_both_efforts(tmp_path: Path) -> None:
    bench = QUALITY_BENCH / "effort.py"
    run = subprocess.run(
        [sys.executable, str(bench), "--examples", "torus-3x3", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (row,) = json.loads((tmp_path / "planner_effort.json").read_text())["rows"]
    assert row["example"] == "torus-3x3"
    assert row["thorough"]["ratio"] <= row["fast"]["ratio"] and row["fast"]["ratio"] >= 1.0
    assert (tmp_path / "planner_effort.png").stat().st_size > 0
    bad = subprocess.run(
        [sys.executable, str(bench), "--examples", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "no such example: nope" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_past_deadline_starts_no_pieced_lp() -> None:
    """The thorough budget's wall-clock safety net: past its deadline no piece count runs;
    without one (the default) the same call builds a program."""
    topo = Topology.from_dict(mesh2d(2, 3, degraded=1))
    ctx = PlanContext.create(topo, topo.endpoints(), SIZE)
    table = packings(ctx)
    key = min((k for k in table if k[1] is not None), key=lambda k: table[k].theta)
    args = (ctx, ctx.memo["packing_routes"][key[0]], key[1], table[key].pool, 1 << 20)
    assert not Budget(1e12).expired()
    assert pieced_window(*args, budget=Budget(1e12)) is not None
    late = Budget(1e12, time.monotonic() - 1.0)
    assert late.expired() and pieced_window(*args, budget=late) is None
