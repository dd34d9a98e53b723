"""`syncplan demo`: service, agents on loopback and a 4-process gloo job running the
service's plan, in one command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_demo_runs_the_services_plan() -> None:
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, "-m", "syncplan", "demo", "--on", "loopback", "--timeout", "150"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=200,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    planned = re.search(r"^plan (\w+): (\w+) over 4 ranks", out, re.M)
    ran = re.search(r"^executor: syncplan executor: running plan (\w+) \((\w+),", out, re.M)
    assert planned and ran, out
    assert planned.group(1) == ran.group(1) and planned.group(2) == ran.group(2)
    assert "verified" in out and "results agree" in out and "done in" in out
    assert "demo0/cpu0, demo1/cpu0, demo2/cpu0, demo3/cpu0" in out
    work = re.search(r"SQLite in (\S+)\)", out)
    assert work and not Path(work.group(1)).exists()  # nothing left behind
    assert "no slow link to route around" in out and "--on emulated" in out  # says why


@pytest.mark.slow
def test_demo_on_the_emulated_cluster_compares_plan_and_gloo_in_one_run(tmp_path: Path) -> None:
    from syncplan.demo_testbed import unavailable

    pytest.importorskip("torch")
    if unavailable():
        pytest.skip(f"emulated cluster: {unavailable()}")
    out = tmp_path / "demo.json"
    res = subprocess.run(
        [sys.executable, "-m", "syncplan", "demo", "--hosts", "4", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = re.findall(
        r"^(gloo all_reduce|syncplan auto \(\w+\)|syncplan ring) .*$", res.stdout, re.M
    )
    assert rows == ["gloo all_reduce", rows[1], "syncplan ring"], res.stdout
    assert "h0-h2 at 400 Mbit/s, h3 at 50 Mbit/s" in res.stdout
    summary = json.loads(out.read_text())["summary"]
    assert {r["algorithm"] for r in summary} == {"gloo", "auto", "ring"}
    assert all(r["correct"] for r in summary)
    for r in summary:  # the printed ratio is the measured one
        if r["algorithm"] != "gloo":
            assert f"{r['speedup_over_gloo']:.2f}x" in res.stdout


def test_demo_table_and_explanation() -> None:
    from syncplan.demo_testbed import explain, table

    result = {
        "summary": [
            {"size_bytes": 4096, "algorithm": "gloo", "median_s": 1.2, "correct": True},
            {
                "size_bytes": 4096,
                "algorithm": "auto",
                "plan_algorithm": "forest",
                "median_s": 1.25,
                "correct": True,
                "speedup_over_gloo": 0.96,
                "predicted_time_s": 0.8,
                "measured_over_predicted": 1.56,
            },
        ],
        "loop": {"load_after": [7.5, 6.0, 5.0]},
    }
    lines = table(result, 4096)
    assert lines[2].split()[:3] == ["gloo", "all_reduce", "1.2"]
    assert "syncplan auto (forest)" in lines[3] and "0.96x" in lines[3] and "1.56" in lines[3]
    why = " ".join(explain(result, 8))
    assert "1.75 buffers" in why and "not faster (0.96x)" in why and "load average 7.5" in why
    assert "Measured / predicted is 1.56" in why


def test_demo_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    from syncplan.cli import main

    for args, message in (
        (["--hosts", "1", "--on", "loopback"], "--hosts must be in 2..8"),
        (["--size", "3"], "float32"),
        (["--size", "x"], "size 'x'"),
    ):
        assert main(["demo", *args]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
