"""``syncplan plan --slice R -o FILE`` writes rank R's slice; ``syncplan verify`` refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syncplan.core.document import PlanDocument
from syncplan.core.slice import check_slice

from .conftest import EXAMPLES
from .test_cli import run

TOPO = str(EXAMPLES / "dgx-2x8-1nic.json")
PLAN = ("plan", "-t", TOPO, "--ranks", "all", "-a", "ring", "--size", "1MiB")


@pytest.mark.slow  # four subprocesses, three of them planning
def test_plan_slice_writes_the_ranks_slice_and_verify_refuses_it(tmp_path: Path) -> None:
    full, by_name, by_index = (tmp_path / n for n in ("full.json", "a.json", "b.json"))
    assert run(*PLAN, "-o", str(full)).returncode == 0
    r = run(*PLAN, "--slice", "h1/gpu3", "-o", str(by_name))
    assert r.returncode == 0, r.stderr
    doc = json.loads(full.read_text())
    index = doc["ranks"].index("h1/gpu3")
    assert run(*PLAN, "--slice", str(index), "-o", str(by_index)).returncode == 0
    sl = json.loads(by_name.read_text())
    other = json.loads(by_index.read_text())
    assert {**sl, "solve_time_s": 0} == {**other, "solve_time_s": 0}
    assert sl["slice"]["rank"] == index
    assert check_slice(sl, "h1/gpu3").digest == PlanDocument.from_plan(doc).digest
    v = run("verify", str(by_name), "-t", TOPO)
    assert v.returncode == 2
    assert v.stderr.strip().endswith("a slice cannot be verified alone; verify the full plan")
    assert len(v.stderr.strip().splitlines()) == 1
    assert run("verify", str(full), "-t", TOPO).returncode == 0


def test_plan_slice_errors_are_one_line(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    for extra, words in (
        (("--slice", "99", "-o", str(out)), "rank 99 is outside"),
        (("--slice", "nope/gpu0", "-o", str(out)), "'nope/gpu0'"),
        (("--slice", "3"), "--slice needs -o"),
    ):
        r = run(*PLAN, *extra)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()
