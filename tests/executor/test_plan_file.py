"""Running a plan from a file, without the service: SYNCPLAN_PLAN_FILE and endpoint templates,
and the torchrun example of the README (examples/torchrun_ddp.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from syncplan.core.compact import compact_document
from syncplan.executor.launch import FetchError, LaunchConfig, local_endpoint, read_plan_file
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]


def test_plan_file_from_env_and_never_refreshed() -> None:
    cfg = LaunchConfig.from_env({"SYNCPLAN_PLAN_FILE": "p.json", "SYNCPLAN_ENDPOINT": "h{rank}"})
    assert cfg.plan_file == "p.json" and cfg.server is None
    with pytest.raises(ValueError, match="plan file is never refreshed"):
        LaunchConfig(plan_file="p.json", refresh_every=5)


def test_endpoint_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert local_endpoint(LaunchConfig(endpoint="h{rank}/cpu0")) == "h3/cpu0"
    assert local_endpoint(LaunchConfig(endpoint="n/gpu{local_rank}")) == "n/gpu1"
    assert local_endpoint(LaunchConfig(endpoint="fixed/cpu0")) == "fixed/cpu0"
    with pytest.raises(ValueError, match=r"only \{rank\} and \{local_rank\}"):
        local_endpoint(LaunchConfig(endpoint="h{host}/cpu0"))


def test_read_plan_file_full_compact_and_bad(tmp_path: Path) -> None:
    topo = load_topology(ROOT / "examples" / "star-one-slow.json")
    doc = make_plan(topo, topo.endpoints(), 1 << 20, "ring")
    full, compact = tmp_path / "full.json", tmp_path / "compact.json"
    full.write_text(json.dumps(doc))
    compact.write_text(json.dumps(compact_document(doc)))
    assert read_plan_file(str(full))["program"] == doc["program"]
    assert read_plan_file(str(compact))["program"] == doc["program"]
    (tmp_path / "topo.json").write_text((ROOT / "examples" / "star-one-slow.json").read_text())
    for path, why in (
        (tmp_path / "missing.json", "No such file"),
        (tmp_path / "topo.json", "not a plan document"),
    ):
        with pytest.raises(FetchError, match=why):
            read_plan_file(str(path))


@pytest.mark.slow
def test_torchrun_example_runs_a_plan_from_a_topology_file(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "syncplan",
            "plan",
            "--topology",
            str(ROOT / "examples" / "star-one-slow.json"),
            "--size",
            "1MiB",
            "-o",
            str(plan),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    env = {
        **os.environ,
        "SYNCPLAN_PLAN_FILE": str(plan),
        "SYNCPLAN_ENDPOINT": "h{rank}/cpu0",
        "OMP_NUM_THREADS": "1",
    }
    for key in ("SYNCPLAN_SERVER", "SYNCPLAN_JOB_ID"):
        env.pop(key, None)
    run = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
    res = subprocess.run(
        [*run, "4", str(ROOT / "examples" / "torchrun_ddp.py"), "--steps", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "using plan: True (ok)" in res.stdout, res.stdout + res.stderr[-2000:]
    assert "weights identical on all ranks: True" in res.stdout
    doc = json.loads(plan.read_text())
    assert f"running plan {doc['plan_id']} ({doc['algorithm']}" in res.stderr
