"""The ``syncplan`` planner commands as a user runs them: real processes, exit codes, output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import EXAMPLES


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncplan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_plan_compare_writes_a_plan_that_verifies(tmp_path: Path) -> None:
    topo = str(EXAMPLES / "dgx-2x8-1nic.json")
    out = tmp_path / "plan.json"
    res = run("plan", "--topology", topo, "--size", "64MiB", "--compare", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "ring" in res.stdout and "hierarchical" in res.stdout and "lower bound" in res.stdout
    assert "busbw GB/s" in res.stdout
    doc = json.loads(out.read_text())
    assert doc["size_bytes"] == 64 << 20 and doc["plan_id"]
    res = run("verify", str(out), "--topology", topo)
    assert res.returncode == 0 and res.stdout.startswith("correct"), res.stderr


def test_verify_rejects_a_broken_plan(tmp_path: Path) -> None:
    topo = str(EXAMPLES / "star-one-slow.json")
    out = tmp_path / "plan.json"
    assert run("plan", "-t", topo, "-a", "ring", "--size", "1000", "-o", str(out)).returncode == 0
    doc = json.loads(out.read_text())
    doc["program"]["steps"].pop()
    out.write_text(json.dumps(doc))
    res = run("verify", str(out), "-t", topo)
    assert res.returncode == 1
    assert "INCORRECT" in res.stderr and "lack the input of rank" in res.stderr


def test_topo_show() -> None:
    res = run("topo", "show", str(EXAMPLES / "one-slow-nic.json"))
    assert res.returncode == 0, res.stderr
    assert "16 ranks on 4 hosts" in res.stdout
    assert "minimum rank-separating cut: 3.125 GB/s" in res.stdout
    res = run("topo", "show", "--json", str(EXAMPLES / "one-slow-nic.json"))
    assert json.loads(res.stdout)["narrowest_host_cuts"][0]["host"] == "h3"


def test_bad_arguments_give_one_line_and_exit_2(tmp_path: Path) -> None:
    topo = str(EXAMPLES / "demo.json")
    bad = tmp_path / "bad.json"
    bad.write_text(
        '{"nodes": [{"id": "a", "kind": "gpu"}], "links": [{"src": "a", "dst": "b", '
        '"bandwidth_GBps": 1}]}'
    )
    cases = [
        (["plan", "-t", str(tmp_path / "none.json")], "cannot read"),
        (["plan", "-t", topo, "--size", "12XB"], "size '12XB'"),
        (["plan", "-t", topo, "--ranks", "h0/gpu0,h0/nic0"], "is a nic"),
        (["plan", "-t", topo, "-a", "magic"], "algorithm 'magic' is unknown"),
        (["plan", "-t", str(bad)], "unknown node 'b'"),
        (["verify", str(bad), "-t", topo], "is a topology file, not a plan document"),
    ]
    for args, message in cases:
        res = run(*args)
        assert res.returncode in (1, 2), args
        assert message in res.stderr, (args, res.stderr)
        assert "Traceback" not in res.stderr


def test_plan_splits_the_gap_into_bandwidth_and_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    res = run(
        "plan",
        "--topology",
        str(EXAMPLES / "one-slow-nic.json"),
        "--size",
        "64MiB",
        "-a",
        "forest",
        "-o",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert "forest's fluid optimum" in res.stdout and "(0.0% above it)" in res.stdout
    doc = json.loads(out.read_text())
    assert 0 < doc["lower_bound_bandwidth_s"] < doc["lower_bound_time_s"]


def test_a_named_algorithm_with_compare_lists_every_algorithm_once() -> None:
    """``-a forest --compare``: one row per algorithm, forest's from the plan itself (it is
    priced once, which a thorough effort's minutes make worth it) and first here."""
    from syncplan.planner.algorithms import ALGORITHMS

    topo = str(EXAMPLES / "torus-3x3.json")
    res = run("plan", "--topology", topo, "-a", "forest", "--compare", "--progress")
    assert res.returncode == 0, res.stderr
    rows = [line.split()[0] for line in res.stdout.splitlines()[3 : 3 + len(ALGORITHMS)]]
    assert sorted(rows) == sorted(ALGORITHMS) and rows[0] == "forest"
    last = res.stderr.strip().splitlines()[-1]  # the progress line: every algorithm priced
    assert last.count("forest ") == 1 and "dbtree" in last
