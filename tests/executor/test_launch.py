"""Launch integration against a real HTTP server: plan use, fallbacks, fetch retries."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from syncplan.core.compact import compact_document
from syncplan.core.document import PlanDocument
from syncplan.executor.launch import FetchError, LaunchConfig, fetch_plan, local_endpoint
from syncplan.executor.localrun import LocalRunConfig, free_port, run_local
from syncplan.planner.builders import dgx_cluster
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

from tests.api.helpers import ServerProcess, auth
from tests.executor.httpserver import PlanServer
from tests.executor.plans import ring_plan
from tests.executor.workers import launch_run

HOST = socket.gethostname()


def _cfg(url: str, job: str = "j1", **kw: Any) -> LaunchConfig:
    return LaunchConfig(
        job_id=job,
        server=url,
        token="tok",
        fetch_timeout_s=2.0,
        retries=kw.pop("retries", 2),
        backoff_s=0.01,
        **kw,
    )


def test_config_from_env_and_validation() -> None:
    cfg = LaunchConfig.from_env(
        {
            "SYNCPLAN_JOB_ID": "j",
            "SYNCPLAN_SERVER": "http://x:1/",
            "SYNCPLAN_JOB_TOKEN": "t",
            "SYNCPLAN_HOST": "h9",
        },
        retries=0,
    )
    assert (cfg.job_id, cfg.server, cfg.token, cfg.host, cfg.retries) == (
        "j",
        "http://x:1",
        "t",
        "h9",
        0,
    )
    assert local_endpoint(cfg) == "h9/cpu0"
    assert local_endpoint(LaunchConfig(endpoint="h1/gpu3")) == "h1/gpu3"
    with pytest.raises(ValueError, match="fetch_timeout_s"):
        LaunchConfig(fetch_timeout_s=0)
    with pytest.raises(ValueError, match="http"):
        LaunchConfig(server="localhost:8000")
    with pytest.raises(FetchError, match="SYNCPLAN_JOB_ID"):
        fetch_plan(LaunchConfig.from_env({}))


def test_fetch_retries_server_errors_then_succeeds() -> None:
    doc = {**ring_plan(2), "topology_version": 7}
    srv = PlanServer({"/v1/jobs/j1/plan": [(503, {"detail": "busy"}), (200, doc)]})
    with srv.running():
        assert fetch_plan(_cfg(srv.url)) == doc
    assert srv.hits["/v1/jobs/j1/plan"] == 2


def test_fetch_accepts_a_wrapped_plan() -> None:
    body = {"plan": ring_plan(2), "topology_version": 3}
    srv = PlanServer({"/v1/jobs/j1/plan": [(200, body)]})
    with srv.running():
        got = fetch_plan(_cfg(srv.url))
    assert got["program"] == ring_plan(2)["program"] and got["topology_version"] == 3


@pytest.mark.parametrize(
    ("answers", "message", "hits"),
    [
        ([(404, {"detail": "no such job"})], "HTTP 404", 1),  # client errors are not retried
        ([(500, {"detail": "boom"})], "after 3 attempts: HTTP 500", 3),
        ([(200, b"not json")], "not JSON", 1),
        ([(200, [1, 2])], "not a plan document", 1),
    ],
)
def test_fetch_errors_are_clear(answers: list[tuple[int, Any]], message: str, hits: int) -> None:
    srv = PlanServer({"/v1/jobs/j1/plan": answers})
    with srv.running(), pytest.raises(FetchError, match=message):
        fetch_plan(_cfg(srv.url))
    assert srv.hits["/v1/jobs/j1/plan"] == hits


def test_fetch_sends_the_token_and_gives_up_on_a_dead_service() -> None:
    srv = PlanServer({"/v1/jobs/j1/plan": [(200, ring_plan(2))]}, token="other")
    with srv.running(), pytest.raises(FetchError, match="HTTP 401"):
        fetch_plan(_cfg(srv.url))
    with pytest.raises(FetchError, match="ConnectError"):
        fetch_plan(_cfg(f"http://127.0.0.1:{free_port()}", retries=1))


def test_fetch_asks_for_the_compact_form_and_expands_it() -> None:
    doc = {**ring_plan(4, 64), "topology_version": 7}
    wrapped = {"plan": compact_document(ring_plan(4, 64)), "topology_version": 7}
    srv = PlanServer(
        {"/v1/jobs/j1/plan": [(200, compact_document(doc))], "/v1/jobs/j2/plan": [(200, wrapped)]}
    )
    with srv.running():
        assert fetch_plan(_cfg(srv.url)) == doc
        assert fetch_plan(_cfg(srv.url, job="j2")) == doc
        assert srv.queries == ["format=compact", "format=compact"]
        # a service without the compact form ignores the parameter: the full document works
        srv.routes["/v1/jobs/j1/plan"] = [(200, doc)]
        assert fetch_plan(_cfg(srv.url)) == doc
        assert fetch_plan(_cfg(srv.url, compact=False)) == doc
        assert srv.queries[-1] == ""
        bad = compact_document(doc)
        bad["program_compact"]["steps"][0]["src"].pop()
        srv.routes["/v1/jobs/j1/plan"] = [(200, bad)]
        with pytest.raises(FetchError, match="columns of different lengths"):
            fetch_plan(_cfg(srv.url))


def test_fetch_from_the_service_compact_equals_full(tmp_path: Path) -> None:
    """A real ``syncplan serve``: the expanded compact plan is the full one, the executor
    reads the identical program, and the verifier accepts it."""
    spec = dgx_cluster(2, gpus=4)
    srv = ServerProcess(f"sqlite:///{tmp_path / 'svc.db'}").start()
    try:
        import httpx

        with httpx.Client(base_url=srv.url, timeout=60) as c:
            c.put("/v1/fabric", json=spec, headers=auth("admin")).raise_for_status()
            c.put(
                "/v1/jobs/j",
                json={
                    "ranks": [f"h{h}/gpu{g}" for h in range(2) for g in range(4)],
                    "size_bytes": 64 << 20,
                },
                headers=auth("job"),
            ).raise_for_status()
        cfg = LaunchConfig(job_id="j", server=srv.url, token=auth("job")["Authorization"][7:])
        compact, full = fetch_plan(cfg), fetch_plan(replace(cfg, compact=False))
    finally:
        srv.stop()
    assert compact == full and "program_compact" not in compact
    assert PlanDocument.from_plan(compact) == PlanDocument.from_plan(full)
    assert verify_plan(compact, Topology.from_dict(spec)).ok


@pytest.fixture(scope="module")
def launched() -> tuple[dict[str, Any], PlanServer]:
    """One job of 4 processes trying every scenario in turn against a live server."""
    ranks = [f"{HOST}/cpu{i}" for i in range(4)]
    good = {**ring_plan(4, 4096, ranks=ranks), "topology_version": 5}
    permuted = ring_plan(4, 64, ranks=list(reversed(ranks)))
    bad = copy.deepcopy(good)
    bad["program"]["steps"].pop()
    strangers = ring_plan(4, 8, ranks=[f"elsewhere/cpu{i}" for i in range(4)])
    routes = {
        "/v1/jobs/good/plan": [(200, good)],
        "/v1/jobs/permuted/plan": [(200, {"plan": permuted, "topology_version": 1})],
        "/v1/jobs/other-world/plan": [
            (200, ring_plan(8, ranks=[f"{HOST}/cpu{i}" for i in range(8)]))
        ],
        "/v1/jobs/bad-program/plan": [(200, bad)],
        "/v1/jobs/strangers/plan": [(200, strangers)],
    }
    srv = PlanServer(routes)
    down = f"http://127.0.0.1:{free_port()}"
    jobs = [
        (srv.url, j) for j in ("good", "permuted", "other-world", "bad-program", "strangers")
    ] + [(down, "down")]
    with srv.running():
        try:
            results = run_local(launch_run, (jobs,), LocalRunConfig(4, timeout_s=150))
        except RuntimeError as exc:
            # once on CI's 2 cores a rank died of SIGABRT inside torch ("terminate called
            # without an active exception"); a second run with the same checks decides
            if "exited abnormally" not in str(exc):
                raise
            srv.hits.clear()
            results = run_local(launch_run, (jobs,), LocalRunConfig(4, timeout_s=150))
    return {job: [r[job] for r in results] for _, job in jobs}, srv


@pytest.mark.slow
@pytest.mark.parametrize("job", ["good", "permuted"])
def test_launch_runs_the_served_plan(launched: tuple[dict[str, Any], PlanServer], job: str) -> None:
    results, srv = launched
    assert srv.hits[f"/v1/jobs/{job}/plan"] == 1  # rank 0 fetches, the others get a copy
    for rank, res in enumerate(results[job]):
        assert res["using_plan"] and res["reason"] is None, (rank, res)
        assert res["identical"] and res["max_diff"] < 1e-5, (rank, res)
        assert res["warnings"] == [], (rank, res)
    assert any("running plan" in m for m in results[job][0]["infos"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("job", "why"),
    [
        ("down", "cannot fetch the job's plan"),
        ("other-world", "has 8 ranks but the job has 4 processes"),
        ("bad-program", "not an all-reduce"),
        ("strangers", "names endpoints no process of this job runs on"),
    ],
)
def test_launch_falls_back_and_warns_once(
    launched: tuple[dict[str, Any], PlanServer], job: str, why: str
) -> None:
    results, _ = launched
    warnings = [w for res in results[job] for w in res["warnings"]]
    assert len(warnings) == 1, warnings  # one warning for the whole job, from rank 0
    assert why in warnings[0] and "torch.distributed.all_reduce" in warnings[0]
    for rank, res in enumerate(results[job]):
        assert not res["using_plan"] and why in res["reason"], (rank, res)
        # Training went on with the native all-reduce: same parameters as plain DDP.
        assert res["identical"] and res["max_diff"] < 1e-6, (rank, res)


@pytest.mark.slow
def test_torchrun_job_fetches_and_runs_the_plan() -> None:
    """The real launcher: torchrun, job id and service URL in the environment."""
    ranks = [f"{HOST}/cpu{i}" for i in range(2)]
    srv = PlanServer(
        {"/v1/jobs/tr/plan": [(200, {**ring_plan(2, 64, ranks=ranks), "topology_version": 9})]}
    )
    env = {
        **os.environ,
        "SYNCPLAN_JOB_ID": "tr",
        "SYNCPLAN_SERVER": srv.url,
        "SYNCPLAN_JOB_TOKEN": "tok",
    }
    with srv.running():
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node",
                "2",
                "-m",
                "syncplan.executor.demo",
                "--steps",
                "3",
            ],
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=150,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert sorted(x["rank"] for x in lines) == [0, 1]
    assert all(x["using_plan"] for x in lines), lines
    assert len({x["checksum"] for x in lines}) == 1
    assert "running plan test-ring-2-64 (ring, topology version 9)" in out.stderr
    assert srv.hits["/v1/jobs/tr/plan"] == 1
