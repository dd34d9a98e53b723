"""bench/planner_quality/plan_diff.py: `diff` names what moved and exits 1; `run` writes one
row per member; bad arguments give one error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "planner_quality" / "plan_diff.py"
ROW = {
    "algorithm": "forest",
    "plan_id": "abc",
    "predicted_time_s": 2.0,
    "lower_bound_time_s": 1.0,
    "solve_s": 1.5,
}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_diff_passes_equal_files_and_names_a_moved_plan(tmp_path: Path) -> None:
    before, after = tmp_path / "a.json", tmp_path / "b.json"
    before.write_text(json.dumps({"ex/demo": ROW, "ex/mesh": ROW}))
    after.write_text(json.dumps({"ex/demo": {**ROW, "solve_s": 0.5}, "ex/mesh": ROW}))
    same = _run("diff", str(before), str(after))
    assert same.returncode == 0 and "0 moved" in same.stdout and "3.0 s -> 2.0 s" in same.stdout
    after.write_text(json.dumps({"ex/demo": ROW, "ex/mesh": {**ROW, "predicted_time_s": 2.2}}))
    moved = _run("diff", str(before), str(after))
    assert moved.returncode == 1
    assert "ex/mesh: forest 2.00000 -> forest 2.20000" in moved.stdout


@pytest.mark.slow
@pytest.mark.heavy  # plans every example: 1-2 min on 2 cores (-m heavy runs it)
def test_run_plans_every_member_of_a_set(tmp_path: Path) -> None:
    out = tmp_path / "plans.json"
    done = _run("run", str(out), "--sets", "ex")
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    examples = sorted(p.stem for p in (SCRIPT.parents[2] / "examples").glob("*.json"))
    assert "ex/demo" in rows and len(rows) <= len(examples)
    assert all(r["predicted_time_s"] >= r["lower_bound_time_s"] for r in rows.values())


def test_bad_arguments_are_one_line(tmp_path: Path) -> None:
    bad = _run("run", str(tmp_path / "x.json"), "--sets", "nope")
    assert bad.returncode == 2 and "unknown set(s) nope" in bad.stderr
    bad = _run("run", str(tmp_path / "x.json"), "--checkout", str(tmp_path))
    assert bad.returncode == 2 and "no planner/plan.py there" in bad.stderr
    bad = _run("run", str(tmp_path / "x.json"), "--size", "12QQ")
    assert bad.returncode == 2 and "--size: size '12QQ'" in bad.stderr
    bad = _run("diff", str(tmp_path / "missing.json"), str(tmp_path / "x.json"))
    assert bad.returncode == 2 and "cannot compare" in bad.stderr
    assert "Traceback" not in bad.stderr
