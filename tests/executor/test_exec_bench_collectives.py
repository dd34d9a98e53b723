"""``syncplan exec-bench`` on reduce-scatter and all-gather plans (issue 13): real gloo processes
run the plan and torch's own collective; the result is checked per rank and both are timed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.executor.conftest import EXAMPLES, RANK_SETS, write_plan
from tests.executor.test_cli import syncplan

pytest.importorskip("syncplan.planner.plan")


def star_plan(collective: str, shards: str = "equal", size: int = 1 << 16) -> dict[str, Any]:
    """A 4-rank plan of ``collective`` on examples/star-one-slow.json."""
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import load_topology

    name, ranks = RANK_SETS[4][0]
    assert name == "star-one-slow.json"
    return make_plan(
        load_topology(EXAMPLES / name), ranks, size, collective=collective, shards=shards
    )


def exec_bench(plan: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = syncplan(
        "exec-bench",
        "--plan",
        str(plan),
        "--nprocs",
        "4",
        "--numel",
        "4096",
        "--repeat",
        "3",
        "--warmup",
        "1",
        *extra,
    )
    lines = out.stdout.strip().splitlines()
    return out.returncode, json.loads(lines[-1]) if lines else {}, out.stderr


@pytest.mark.parametrize(
    ("collective", "native_ops"),
    [
        ("reducescatter", ("reduce_scatter_single", "reduce_scatter_tensor")),
        ("allgather", ("all_gather_single", "all_gather_into_tensor")),
    ],
)
def test_exec_bench_runs_sharded_plans(
    tmp_path: Path, collective: str, native_ops: tuple[str, ...]
) -> None:
    doc = star_plan(collective)
    rc, res, err = exec_bench(write_plan(tmp_path, doc))
    assert rc == 0, err
    assert "Traceback" not in err
    assert res["collective"] == collective and res["plan_id"] == doc["plan_id"]
    # equal shards on 4096 elements: torch's own collective, and its output bit for bit
    assert res["equal_shards"] is True and res["native_op"] in native_ops
    assert res["correct"] is True and res["matches_native"] is True
    assert res["identical_on_all_ranks"] is True and res["max_abs_err"] == 0
    assert res["plan_s"] > 0 and res["native_s"] > 0
    assert res["ratio"] == pytest.approx(res["plan_s"] / res["native_s"])
    assert collective in err  # the progress line names the collective


def test_exec_bench_uneven_reduce_scatter_uses_all_reduce(tmp_path: Path) -> None:
    doc = star_plan("reducescatter", shards="any", size=1 << 20)  # rate-sized: uneven
    assert len({b - a for a, b in doc["shards"]}) > 1
    rc, res, err = exec_bench(write_plan(tmp_path, doc), "--dtype", "bfloat16")
    assert rc == 0, err
    assert res["equal_shards"] is False and res["native_op"] == "all_reduce"
    assert res["correct"] is True and res["matches_native"] is True


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(shards=[[0, 1], [1, 2], [2, 3], [3, 3]]), "shards must cover"),
        (lambda d: d.update(shards=[[0, 2], [1, 2], [2, 3], [3, 4]]), "shards must be disjoint"),
        (lambda d: d.pop("shards"), "shards must be a list"),
        (lambda d: d["program"].update(steps=[]), "not"),
    ],
)
def test_exec_bench_refuses_bad_sharded_plans(tmp_path: Path, edit: Any, message: str) -> None:
    doc = star_plan("allgather")
    assert doc["program"]["units"] == 4
    edit(doc)
    rc, _, err = exec_bench(write_plan(tmp_path, doc))
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_exec_bench_refuses_density_on_sharded_plans(tmp_path: Path) -> None:
    rc, _, err = exec_bench(write_plan(tmp_path, star_plan("reducescatter")), "--density", "0.5")
    assert rc == 2
    assert "--density runs all-reduce plans only" in err and "Traceback" not in err
