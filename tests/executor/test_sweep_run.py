"""``syncplan sweep --run 2`` (docs/sweep.md): every plan and gloo's all_reduce measured in two
local gloo processes, beside the prediction, in the table and the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.executor.conftest import EXAMPLES
from tests.executor.test_cli import syncplan


@pytest.mark.slow
def test_sweep_run_measures_every_plan_and_gloo(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    res = syncplan(
        "sweep", "-t", str(EXAMPLES / "demo.json"), "--ranks", "h0/gpu0,h1/gpu0",
        "-b", "8", "-e", "4KiB", "-f", "8", "-a", "auto,ring", "--run", "2",
        "--repeat", "2", "--warmup", "1", "--json", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    header = res.stdout.splitlines()[1].split()
    assert header == ["size", "algorithm", "predicted", "algbw", "busbw", "measured", "algbw",
                      "busbw"]  # fmt: skip
    doc = json.loads(out.read_text())
    sizes = [8, 64, 512, 4096]
    assert doc["sizes"] == sizes and doc["run"]["nprocs"] == 2
    for size in sizes:
        here = [p for p in doc["points"] if p["size_bytes"] == size]
        assert [p["algorithm"] for p in here] == ["auto", "ring", "gloo"]
        for p in here:
            t = p["measured_time_s"]
            assert t > 0 and p["measured_bytes"] == size
            # two ranks: busbw = algbw * 2(n-1)/n = algbw
            assert p["measured_algbw_GBps"] == pytest.approx(size / t / 1e9)
            assert p["measured_busbw_GBps"] == pytest.approx(p["measured_algbw_GBps"])
        assert all(p["correct"] and p["native_op"] == "all_reduce" for p in here[:2])
    progress = [line for line in res.stderr.splitlines() if line.startswith("measured")]
    assert len(progress) == len(sizes) and max(map(len, res.stderr.splitlines())) < 80
