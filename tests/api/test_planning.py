"""Plan solving: identical concurrent requests share one solve, solving never blocks the
event loop, cached plans are reused and persisted."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from syncplan.api import planning as api_planning
from syncplan.api.main import create_app
from syncplan.api.planning import PlanKey
from syncplan.api.settings import Settings
from syncplan.api.state import Snapshot
from syncplan.planner.builders import dgx_cluster

from tests.api.helpers import TOKENS, auth


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    app = create_app(
        Settings(
            database_url=f"sqlite:///{tmp_path / 'p.db'}",
            admin_token=TOKENS["admin"],
            agent_token=TOKENS["agent"],
            job_token=TOKENS["job"],
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as c:
        r = await c.put("/v1/fabric", json=dgx_cluster(2, gpus=4), headers=auth("admin"))
        assert r.status_code == 200, r.text
        yield c, app


def _req(size: int) -> dict[str, Any]:
    return {"ranks": [f"h{h}/gpu{g}" for h in range(2) for g in range(4)], "size_bytes": size}


async def _plan_under(db: Path, request: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """The plan a fresh service with ``settings`` (over the store ``db``) returns for
    ``request`` on a 2 x 4 GPU cluster."""
    app = create_app(
        Settings(
            database_url=f"sqlite:///{db}",
            admin_token=TOKENS["admin"],
            agent_token=TOKENS["agent"],
            job_token=TOKENS["job"],
            **settings,
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=60) as c:
        r = await c.put("/v1/fabric", json=dgx_cluster(2, gpus=4), headers=auth("admin"))
        assert r.status_code == 200, r.text
        r = await c.post("/v1/plans", json=request, headers=auth("job"))
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture
def gated_solve(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Solves wait for the returned event, so a test controls when they finish."""
    gate = threading.Event()
    real = api_planning.solve

    def gated(snapshot: Snapshot, key: PlanKey) -> dict[str, Any]:
        assert gate.wait(timeout=30), "the test never released the solve"
        return real(snapshot, key)

    monkeypatch.setattr(api_planning, "solve", gated)
    return gate


@pytest.mark.anyio
async def test_identical_requests_solved_once(client, gated_solve: threading.Event) -> None:
    c, app = client
    tasks = [
        asyncio.create_task(c.post("/v1/plans", json=_req(1 << 20), headers=auth("job")))
        for _ in range(8)
    ]
    other = asyncio.create_task(c.post("/v1/plans", json=_req(2 << 20), headers=auth("job")))
    while len(app.state.plans._inflight) < 2:  # both distinct solves have started
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    gated_solve.set()
    results = await asyncio.gather(*tasks)
    assert {r.status_code for r in results} == {200}
    assert len({r.json()["plan_id"] for r in results}) == 1
    assert (await other).json()["plan_id"] != results[0].json()["plan_id"]
    assert app.state.plans.solves == 2
    metrics = (await c.get("/metrics")).text
    assert "syncplan_plan_requests_coalesced_total 7.0" in metrics
    again = await c.post("/v1/plans", json=_req(1 << 20), headers=auth("job"))
    assert again.content == results[0].content and app.state.plans.solves == 2
    assert (
        'syncplan_plan_cache_total{layer="memory",outcome="hit"} 1.0'
        in (await c.get("/metrics")).text
    )


@pytest.mark.anyio
async def test_solving_does_not_block_the_event_loop(client, gated_solve) -> None:
    c, app = client
    plan = asyncio.create_task(c.post("/v1/plans", json=_req(1 << 20), headers=auth("job")))
    while not app.state.plans._inflight:
        await asyncio.sleep(0.01)
    # The solve is parked in its worker thread: other requests are still served.
    health = await asyncio.wait_for(c.get("/healthz"), timeout=10)
    topo = await asyncio.wait_for(c.get("/v1/topology", headers=auth("job")), timeout=10)
    assert health.status_code == 200 and topo.status_code == 200
    assert not plan.done()
    gated_solve.set()
    assert (await plan).status_code == 200


@pytest.mark.anyio
async def test_failed_solve_is_not_cached(client) -> None:
    c, app = client
    bad = {"ranks": ["h0/gpu0", "h1/gpu0"], "size_bytes": 1024, "collective": "alltoall"}
    for _ in range(2):
        r = await c.post("/v1/plans", json=bad, headers=auth("job"))
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["body", "collective"]
    assert app.state.plans.solves == 0


@pytest.mark.anyio
async def test_plans_come_back_from_the_store(client, tmp_path: Path) -> None:
    c, app = client
    first = await c.post("/v1/plans", json=_req(4096), headers=auth("job"))
    assert first.status_code == 200
    # A second app on the same store (a restart, or another replica) reuses the stored plan.
    app2 = create_app(app.state.settings)
    transport = httpx.ASGITransport(app=app2)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c2:
        by_id = await c2.get(f"/v1/plans/{first.json()['plan_id']}", headers=auth("job"))
        assert by_id.content == first.content
        again = await c2.post("/v1/plans", json=_req(4096), headers=auth("job"))
        assert again.content == first.content
        assert app2.state.plans.solves == 0


def test_memory_cache_is_bounded_by_count_and_bytes() -> None:
    from syncplan.api.encoding import Body
    from syncplan.api.metrics import Metrics
    from syncplan.api.planning import CachedPlan, PlanService

    svc = PlanService(
        None,
        Metrics(),
        cache_size=3,
        solver_threads=1,  # type: ignore[arg-type]
        cache_bytes=1000,
    )
    keys = [PlanKey("v", ("a",), "allreduce", n, "auto") for n in range(1, 6)]
    for k in keys[:4]:
        svc.remember(k.digest, CachedPlan(f"p{k.size_bytes}", Body(b"x" * 100)))
    assert [svc.cached(k) is not None for k in keys[:4]] == [False, True, True, True]
    svc.remember(keys[4].digest, CachedPlan("p5", Body(b"x" * 900)))  # over the byte budget
    assert svc.cached(keys[4]) is not None and svc.cached_bytes <= 1000
    assert [svc.cached(k) is not None for k in keys[:4]] == [False, False, False, True]
    svc.remember(keys[0].digest, CachedPlan("big", Body(b"x" * 1001)))  # larger than it all
    assert svc.cached(keys[0]) is None and svc.cached_bytes == 1000
    assert set(svc.by_plan_id) == {"p4", "p5"}


@pytest.mark.anyio
async def test_plan_ids_are_stable_across_stores(client, tmp_path: Path) -> None:
    c, _ = client
    first = (await c.post("/v1/plans", json=_req(8192), headers=auth("job"))).json()
    other = create_app(
        Settings(
            database_url=f"sqlite:///{tmp_path / 'other.db'}",
            admin_token=TOKENS["admin"],
            agent_token=TOKENS["agent"],
            job_token=TOKENS["job"],
        )
    )
    transport = httpx.ASGITransport(app=other)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c2:
        await c2.put("/v1/fabric", json=dgx_cluster(2, gpus=4), headers=auth("admin"))
        second = (await c2.post("/v1/plans", json=_req(8192), headers=auth("job"))).json()
    assert other.state.plans.solves == 1
    assert second["plan_id"] == first["plan_id"]
    assert second["topology_version"] == first["topology_version"]


@pytest.mark.anyio
async def test_a_job_launch_builds_its_response_once(client, monkeypatch) -> None:
    from syncplan.api import jobs as api_jobs

    c, app = client
    composed = []
    real = api_jobs._compose
    monkeypatch.setattr(api_jobs, "_compose", lambda *a: composed.append(1) or real(*a))
    job = {
        "ranks": [{"host": f"h{h}", "local_rank": r} for h in range(2) for r in range(4)],
        "bucket_sizes": [4096, 8192, 4096],
    }
    put = await c.put("/v1/jobs/launch", json=job, headers=auth("job"))
    assert put.status_code == 200, put.text
    assert put.json()["ranks"] == [f"h{h}/gpu{g}" for h in range(2) for g in range(4)]
    fetches = await asyncio.gather(
        *(c.get("/v1/jobs/launch/plan", headers=auth("job")) for _ in range(32))
    )
    assert {r.status_code for r in fetches} == {200}
    assert len({r.content for r in fetches}) == 1
    doc = fetches[0].json()
    assert doc["bucket_sizes"] == [4096, 8192, 4096]
    assert [p["size_bytes"] for p in doc["plans"]] == [4096, 8192, 4096]
    assert composed == [1] and app.state.plans.solves == 2


@pytest.mark.anyio
async def test_min_step_setting_is_priced_and_keys_the_plans(tmp_path: Path) -> None:
    """``SYNCPLAN_MIN_STEP_US`` reaches the cost model: plans say so, no step is priced
    below it, and they are stored under a different key than plans made without it."""
    docs = {
        us: await _plan_under(
            tmp_path / "o.db", {**_req(1 << 20), "algorithm": "forest"}, min_step_us=us
        )
        for us in (0.0, 2000.0)
    }
    plain, slow = docs[0.0], docs[2000.0]
    assert "min_step_s" not in plain and slow["min_step_s"] == pytest.approx(2e-3)
    assert slow["plan_id"] != plain["plan_id"]
    steps = len(slow["program"]["steps"])
    assert slow["predicted_time_s"] >= steps * 2e-3 * 0.999
    assert steps <= len(plain["program"]["steps"])
    assert plain["predicted_time_s"] < slow["predicted_time_s"]


def test_min_step_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="min_step_us"):
        Settings(environment="development", min_step_us=-1)


@pytest.mark.anyio
async def test_message_overhead_settings_are_priced_and_key_the_plans(tmp_path: Path) -> None:
    """``SYNCPLAN_MESSAGE_OVERHEAD_US`` / ``SYNCPLAN_MESSAGE_CORES`` reach the cost model of
    every all-reduce plan: the plans say so and are keyed by them."""
    docs = {
        (us, cores): await _plan_under(
            tmp_path / "m.db",
            {**_req(4096), "algorithm": "direct"},
            message_overhead_us=us,
            message_cores=cores,
        )
        for us, cores in ((0.0, 0), (0.0, 2), (100.0, 0), (100.0, 2))
    }
    plain = docs[0.0, 0]
    assert docs[0.0, 2]["plan_id"] == plain["plan_id"]  # the cores alone change nothing
    assert "message_overhead_s" not in plain and "message_cores" not in docs[0.0, 2]
    own, shared = docs[100.0, 0], docs[100.0, 2]
    assert own["message_overhead_s"] == pytest.approx(1e-4) and "message_cores" not in own
    assert shared["message_cores"] == 2
    assert len({plain["plan_id"], own["plan_id"], shared["plan_id"]}) == 3
    # direct over 8 ranks: 14 ends per rank; 8 x 14 = 112 ends over 2 cores; its one step's
    # wire time is below 2 o, so every end shows (cost.overlapped)
    wire = plain["predicted_time_s"]
    assert wire < 2e-4
    assert own["predicted_time_s"] == pytest.approx(max(wire + 2e-4, 14e-4))
    assert shared["predicted_time_s"] == pytest.approx(max(wire + 2e-4, 56e-4))


def test_message_overhead_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="message_overhead_us"):
        Settings(environment="development", message_overhead_us=-1)
    with pytest.raises(ValueError, match="message_cores"):
        Settings(environment="development", message_cores=-1)
    with pytest.raises(ValueError, match="message_cores"):
        Settings(environment="development", message_cores=1.5)


@pytest.mark.anyio
async def test_exchange_overhead_setting_is_priced_and_keys_the_plans(tmp_path: Path) -> None:
    """``SYNCPLAN_EXCHANGE_OVERHEAD_US`` reaches the cost model of every all-reduce plan: a
    direct exchange pays it per exchanged message end, and the plans are keyed by it."""
    docs = {
        us: await _plan_under(
            tmp_path / "x.db", {**_req(4096), "algorithm": "direct"}, exchange_overhead_us=us
        )
        for us in (0.0, 100.0)
    }
    assert "exchange_overhead_s" not in docs[0.0]
    assert docs[100.0]["exchange_overhead_s"] == pytest.approx(1e-4)
    assert docs[100.0]["plan_id"] != docs[0.0]["plan_id"]
    # direct over 8 ranks: every transfer is exchanged, 14 ends per rank
    assert docs[100.0]["predicted_time_s"] == pytest.approx(docs[0.0]["predicted_time_s"] + 14e-4)
    with pytest.raises(ValueError, match="exchange_overhead_us"):
        Settings(environment="development", exchange_overhead_us=-1)


@pytest.mark.anyio
async def test_effort_keys_the_plans_and_is_validated(client) -> None:
    """``effort`` reaches the planner (the document says it and has its own id); a bad value
    is a 422 naming the field, and a thorough reduce-scatter a 422 naming effort."""
    c, _ = client
    req = _req(1 << 20)
    fast = await c.post("/v1/plans", json=req, headers=auth("job"))
    thorough = await c.post("/v1/plans", json={**req, "effort": "thorough"}, headers=auth("job"))
    assert fast.status_code == thorough.status_code == 200, thorough.text
    assert "effort" not in fast.json() and thorough.json()["effort"] == "thorough"
    assert thorough.json()["plan_id"] != fast.json()["plan_id"]
    bad = await c.post("/v1/plans", json={**req, "effort": "max"}, headers=auth("job"))
    assert bad.status_code == 422 and "effort" in bad.text
    rs = await c.post(
        "/v1/plans",
        json={**req, "collective": "reducescatter", "effort": "thorough"},
        headers=auth("job"),
    )
    assert rs.status_code == 422 and "effort" in rs.text


@pytest.mark.anyio
async def test_a_job_plans_at_its_effort(client) -> None:
    """A job's ``effort`` reaches its plans; with another collective it is a 422."""
    c, _ = client
    ranks = [f"h{h}/gpu{g}" for h in range(2) for g in range(4)]
    put = await c.put(
        "/v1/jobs/hard",
        json={"ranks": ranks, "size_bytes": 1 << 20, "effort": "thorough"},
        headers=auth("job"),
    )
    assert put.status_code == 200, put.text
    plan = await c.get("/v1/jobs/hard/plan", headers=auth("job"))
    assert plan.status_code == 200, plan.text
    assert plan.json()["effort"] == "thorough"
    bad = await c.put(
        "/v1/jobs/rs",
        json={
            "ranks": ranks,
            "size_bytes": 1 << 20,
            "collective": "reducescatter",
            "effort": "thorough",
        },
        headers=auth("job"),
    )
    assert bad.status_code == 422 and "effort" in bad.text


@pytest.mark.anyio
async def test_broadcast_and_reduce_requests_take_a_root(client) -> None:
    """``root`` (a rank or its index) reaches the planner; the document records its index
    and verifies; a root outside the ranks, or with another collective, is a 422 naming it."""
    from syncplan.planner.topology import Topology
    from syncplan.planner.verify import verify_plan

    c, _ = client
    req = _req(1 << 20)
    topo = Topology.from_dict(dgx_cluster(2, gpus=4))
    by_name = await c.post(
        "/v1/plans",
        json={**req, "collective": "broadcast", "root": "h1/gpu2"},
        headers=auth("job"),
    )
    by_index = await c.post(
        "/v1/plans", json={**req, "collective": "broadcast", "root": 6}, headers=auth("job")
    )
    assert by_name.status_code == by_index.status_code == 200, by_name.text
    doc = by_name.json()
    assert doc["root"] == 6 and doc["plan_id"] == by_index.json()["plan_id"]
    assert verify_plan(doc, topo).ok
    red = await c.post(
        "/v1/plans",
        json={**req, "collective": "reduce", "algorithm": "packing"},
        headers=auth("job"),
    )
    assert red.status_code == 200, red.text
    assert red.json()["root"] == 0 and verify_plan(red.json(), topo).ok
    for bad in (
        {"collective": "broadcast", "root": "h9/gpu0"},
        {"collective": "broadcast", "root": 8},
        {"collective": "allreduce", "root": 0},
    ):
        r = await c.post("/v1/plans", json={**req, **bad}, headers=auth("job"))
        assert r.status_code == 422 and "root" in r.text, (bad, r.text)
