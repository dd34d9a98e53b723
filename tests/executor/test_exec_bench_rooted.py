"""``syncplan exec-bench`` on broadcast and reduce plans (issue 43 item 9): 4 gloo processes run
the plan and ``dist.broadcast`` / ``dist.reduce`` from the same root; a broadcast leaves every
rank the root's buffer bit for bit, a reduce the root the exact sum (allclose to torch's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.executor.conftest import EXAMPLES, RANK_SETS, write_plan
from tests.executor.test_exec_bench_collectives import exec_bench

pytest.importorskip("syncplan.planner.plan")


def rooted_plan(collective: str, algorithm: str, root: int) -> dict[str, Any]:
    """A 4-rank ``collective`` plan on examples/star-one-slow.json from rank ``root``."""
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import load_topology

    name, ranks = RANK_SETS[4][0]
    return make_plan(
        load_topology(EXAMPLES / name), ranks, 1 << 16, algorithm, collective, root=root
    )


@pytest.mark.parametrize(
    ("collective", "algorithm", "root"), [("broadcast", "packing", 2), ("reduce", "packing", 1)]
)
def test_exec_bench_runs_rooted_plans(
    tmp_path: Path, collective: str, algorithm: str, root: int
) -> None:
    doc = rooted_plan(collective, algorithm, root)
    assert doc["root"] == root and doc["program"]["steps"]
    rc, res, err = exec_bench(write_plan(tmp_path, doc))
    assert rc == 0, err
    assert "Traceback" not in err
    assert res["collective"] == collective and res["root"] == root
    assert res["native_op"] == collective and res["plan_id"] == doc["plan_id"]
    assert res["correct"] is True and res["matches_native"] is True
    assert res["max_abs_err"] == 0
    if collective == "broadcast":
        assert res["identical_on_all_ranks"] is True
    assert res["plan_s"] > 0 and res["native_s"] > 0
