"""``syncplan exec-bench --density``: the sparse path end to end, and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.executor.conftest import write_plan
from tests.executor.plans import ring_plan
from tests.executor.test_cli import syncplan


@pytest.mark.slow
def test_sparse_exec_bench_prints_json_last(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ring_plan(2, 64))
    out = syncplan(
        "exec-bench",
        "--plan",
        str(plan),
        "--nprocs",
        "2",
        "--numel",
        "100003",
        "--dtype",
        "int64",
        "--density",
        "0.05",
        "--repeat",
        "2",
        "--warmup",
        "0",
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["correct"] is True and res["density"] == 0.05
    assert 0.02 < res["measured_density"] < 0.08 and res["sparse_modes"] == ["sparse"]
    for key in ("sparse_s", "gloo_s", "torch_sparse_s", "native_s"):
        assert res[key] > 0
    assert "plan_s" not in res  # the dense plan takes floating types only
    assert res["speedup_vs_gloo"] == pytest.approx(res["gloo_s"] / res["sparse_s"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--density", "1.5"], "--density must be in [0, 1]"),
        (["--density", "0.1", "--dtype", "bfloat16"], "--dtype bfloat16 is not offered"),
        (["--density", "0.1", "--block-elems", "0"], "--block-elems must be in"),
        (["--dtype", "int32"], "--dtype int32 needs --density"),
    ],
)
def test_sparse_exec_bench_refuses_bad_arguments(
    tmp_path: Path, args: list[str], message: str
) -> None:
    plan = write_plan(tmp_path, ring_plan(2, 64))
    out = syncplan("exec-bench", "--plan", str(plan), "--nprocs", "2", "--numel", "10", *args)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
