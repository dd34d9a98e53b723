"""``syncplan exec-bench`` end to end, and its refusals of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.executor.conftest import plans_for, write_plan

ROOT = Path(__file__).resolve().parents[2]
MAIN = "import sys; from syncplan.cli import main; sys.exit(main())"


def syncplan(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", MAIN, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_exec_bench_prints_json_last(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plans_for(2)[0])
    out = syncplan(
        "exec-bench",
        "--plan",
        str(plan),
        "--nprocs",
        "2",
        "--numel",
        "100003",
        "--dtype",
        "bfloat16",
        "--repeat",
        "3",
        "--warmup",
        "1",
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["correct"] is True and res["identical_on_all_ranks"] is True
    assert res["numel"] == 100003 and res["dtype"] == "bfloat16" and res["nprocs"] == 2
    assert 0 <= res["max_abs_err"] < 1
    assert res["plan_s"] > 0 and res["native_s"] > 0
    assert res["ratio"] == pytest.approx(res["plan_s"] / res["native_s"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nprocs", "3", "--numel", "10"], "--nprocs 3 does not match the plan's 2 ranks"),
        (["--nprocs", "2", "--numel", "0"], "--numel and --repeat must be >= 1"),
        (["--nprocs", "2", "--numel", "10", "--dtype", "int8"], "invalid choice: 'int8'"),
    ],
)
def test_exec_bench_refuses_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    plan = write_plan(tmp_path, plans_for(2)[0])
    out = syncplan("exec-bench", "--plan", str(plan), *args)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read plan"),
        ("{not json", "is not valid JSON"),
        ('{"ranks": ["a", "b"]}', "program is missing"),
        ('{"ranks": ["a", "b"], "program": {"units": 2, "steps": []}}', "not an all-reduce"),
    ],
)
def test_exec_bench_refuses_bad_plans(tmp_path: Path, content: str | None, message: str) -> None:
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content)
    out = syncplan("exec-bench", "--plan", str(plan), "--nprocs", "2", "--numel", "10")
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
