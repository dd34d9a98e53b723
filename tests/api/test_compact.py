"""The compact program form (core/compact.py) and the job-plan fetch forms: compact
expands to the identical program, every expanded plan passes the verifier, gzip and ETag."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from syncplan.api.main import create_app
from syncplan.api.settings import Settings
from syncplan.core.compact import (
    COMPACT_KEY,
    CompactError,
    compact_document,
    compact_program,
    expand_document,
    expand_program,
)
from syncplan.planner.builders import dgx_cluster, two_tier
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

from tests.api.helpers import TOKENS, auth


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


@pytest.mark.parametrize("algorithm", ["forest", "ring", "hierarchical"])
@pytest.mark.parametrize("cluster", ["dgx", "two_tier"])
def test_expansion_gives_the_identical_document(algorithm: str, cluster: str) -> None:
    spec = dgx_cluster(2, gpus=4) if cluster == "dgx" else two_tier(2, 2, gpus=2)
    topo = Topology.from_dict(spec)
    ranks = [n["id"] for n in spec["nodes"] if n["kind"] == "gpu"]
    doc = make_plan(topo, ranks, 64 << 20, algorithm=algorithm)
    compact = json.loads(_dump(compact_document(doc)))
    assert "program" not in compact and compact[COMPACT_KEY]["encoding"] == "columns/1"
    assert list(compact) == [COMPACT_KEY if k == "program" else k for k in doc]
    expanded = expand_document(compact)
    assert _dump(expanded) == _dump(doc)
    assert verify_plan(expanded, topo).ok
    assert len(_dump(compact)) < len(_dump(doc))


def test_a_route_table_program_expands_to_the_identical_document() -> None:
    from syncplan.core.program import program_from_doc, program_to_doc

    spec = dgx_cluster(2, gpus=4)
    topo = Topology.from_dict(spec)
    doc = make_plan(topo, topo.endpoints(), 64 << 20, algorithm="forest")
    doc["program"] = program_to_doc(program_from_doc(doc["program"]), route_table=True)
    compact = json.loads(_dump(compact_document(doc)))
    assert compact[COMPACT_KEY]["route_table"] is True
    assert compact[COMPACT_KEY]["paths"] == doc["program"]["routes"]
    expanded = expand_document(compact)
    assert _dump(expanded) == _dump(doc)
    assert verify_plan(expanded, topo).ok
    mixed = copy.deepcopy(doc)
    t = next(t for step in mixed["program"]["steps"] for t in step if "route" in t)
    t["path"] = mixed["program"]["routes"][t.pop("route")]
    with pytest.raises(CompactError, match="mixed"):
        compact_program(mixed["program"])


def _program(paths: list[list[str] | None]) -> dict[str, Any]:
    steps = [
        [{"src": 0, "dst": 1, "chunk": [0, 2], "reduce": True}],
        [
            {"src": 0, "dst": 1, "chunk": [2, 4], "reduce": False},
            {"src": 1, "dst": 0, "chunk": [0, 2], "reduce": False},
        ],
    ]
    for t, p in zip([t for s in steps for t in s], paths, strict=True):
        if p is not None:
            t["path"] = p
    return {"units": 4, "steps": steps}


def test_a_pair_on_two_paths_gets_a_path_column() -> None:
    prog = _program([["a", "x", "b"], ["a", "y", "b"], None])
    compact = compact_program(prog)
    assert "routes" not in compact and compact["steps"][1]["path"] == [1, -1]
    assert expand_program(json.loads(_dump(compact))) == prog
    same = _program([["a", "x", "b"], ["a", "x", "b"], None])
    compact = compact_program(same)
    assert compact["routes"] == [[0, 1, 0], [1, 0, -1]]
    assert all("path" not in s for s in compact["steps"])
    assert expand_program(compact) == same


def test_what_cannot_be_encoded_losslessly_is_refused() -> None:
    prog = _program([None, None, None])
    prog["steps"][0][0]["weight"] = 2
    with pytest.raises(CompactError, match=r"steps\[0\]\[0\]"):
        compact_program(prog)
    prog = _program([None, None, None])
    prog["steps"][1][0]["reduce"] = 1
    with pytest.raises(CompactError, match=r"steps\[1\]\[0\]"):
        compact_program(prog)
    with pytest.raises(CompactError, match="units and steps"):
        compact_program({**_program([None] * 3), "extra": 1})


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda c: c.update(encoding="rows/9"), "unknown encoding"),
        (lambda c: c["steps"][1]["dst"].pop(), "different lengths"),
        (lambda c: c["steps"][0].pop("lo"), "columns"),
        (lambda c: c["routes"].pop(), "no route"),
        (lambda c: c["routes"][0].__setitem__(2, 7), "out of range"),
        (lambda c: c.update(routes=[[0, 1]]), "triples"),
    ],
)
def test_malformed_compact_programs_are_named(mutate: Any, match: str) -> None:
    compact = compact_program(_program([["a", "x", "b"], ["a", "x", "b"], None]))
    bad = copy.deepcopy(compact)
    mutate(bad)
    with pytest.raises(CompactError, match=match):
        expand_program(bad)


def test_both_forms_in_one_document_is_an_error() -> None:
    doc = {"program": _program([None] * 3)}
    with pytest.raises(CompactError, match="both"):
        expand_document({**doc, COMPACT_KEY: compact_program(doc["program"])})
    assert expand_document(doc) is doc


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(
        Settings(
            database_url=f"sqlite:///{tmp_path / 'c.db'}",
            admin_token=TOKENS["admin"],
            agent_token=TOKENS["agent"],
            job_token=TOKENS["job"],
            # one replica: its own writes keep its view current; without other replicas to
            # look for, a loaded machine's pauses must not make the fast path miss
            sync_interval_s=3600,
        )
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", timeout=60, headers=auth("job")
    ) as c:
        r = await c.put("/v1/fabric", json=dgx_cluster(2, gpus=4), headers=auth("admin"))
        assert r.status_code == 200, r.text
        yield c


RANKS = [{"host": f"h{h}", "gpu": g} for h in range(2) for g in range(4)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "job",
    [
        {"ranks": RANKS, "size_bytes": 64 << 20},
        {"ranks": RANKS, "bucket_sizes": [1 << 20, 8 << 20, 1 << 20]},
    ],
)
async def test_compact_job_plan_is_the_full_one_expanded(
    client: httpx.AsyncClient, job: dict[str, Any]
) -> None:
    assert (await client.put("/v1/jobs/j", json=job)).status_code == 200
    full = await client.get("/v1/jobs/j/plan")
    compact = await client.get("/v1/jobs/j/plan", params={"format": "compact"})
    assert full.status_code == compact.status_code == 200, compact.text
    body = compact.json()
    docs = body.get("plans", [body])
    assert all(COMPACT_KEY in d and "program" not in d for d in docs)
    expanded = (
        {**body, "plans": [expand_document(d) for d in docs]}
        if "plans" in body
        else expand_document(body)
    )
    assert expanded == full.json()
    if "plans" not in body:  # each key once
        assert full.content.count(b'"topology_version"') == 1
        assert compact.content.count(b'"topology_version"') == 1
    topo = Topology.from_dict(dgx_cluster(2, gpus=4))
    assert all(verify_plan(d, topo).ok for d in (expanded.get("plans") or [expanded]))
    assert len(compact.content) * 2 < len(full.content)
    assert (await client.get("/v1/jobs/j/plan", params={"format": "rows"})).status_code == 422


@pytest.mark.anyio
async def test_plan_routes_offer_the_compact_form(client: httpx.AsyncClient) -> None:
    request = {
        "ranks": [f"h{h}/gpu{g}" for h in range(2) for g in range(4)],
        "size_bytes": 64 << 20,
        "algorithm": "forest",
    }
    made = await client.post("/v1/plans", json=request)
    made_compact = await client.post("/v1/plans", json=request, params={"format": "compact"})
    assert made.status_code == made_compact.status_code == 200, made_compact.text
    full = made.json()
    assert expand_document(made_compact.json()) == full
    url = f"/v1/plans/{full['plan_id']}"
    again = await client.get(url, params={"format": "compact"})
    assert again.status_code == 200 and again.content == made_compact.content
    assert again.headers["etag"] != (await client.get(url)).headers["etag"]
    held = await client.get(
        url, params={"format": "compact"}, headers={"If-None-Match": again.headers["etag"]}
    )
    assert held.status_code == 304
    assert len(again.content) * 2 < len(made.content)
    topo = Topology.from_dict(dgx_cluster(2, gpus=4))
    assert verify_plan(expand_document(again.json()), topo).ok
    bad = await client.get(url, params={"format": "rows"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "format"]


@pytest.mark.anyio
async def test_the_service_serves_route_table_plans_in_both_forms(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from syncplan.core import program as plan_program

    monkeypatch.setattr(plan_program, "ROUTE_TABLE_ABOVE", 10)
    request = {
        "ranks": [f"h{h}/gpu{g}" for h in range(2) for g in range(4)],
        "size_bytes": 32 << 20,
        "algorithm": "forest",
    }
    full = await client.post("/v1/plans", json=request)
    assert full.status_code == 200, full.text
    doc = full.json()
    assert "routes" in doc["program"]
    compact = await client.get(f"/v1/plans/{doc['plan_id']}", params={"format": "compact"})
    assert compact.status_code == 200 and compact.json()[COMPACT_KEY]["route_table"] is True
    assert expand_document(compact.json()) == doc
    assert verify_plan(doc, Topology.from_dict(dgx_cluster(2, gpus=4))).ok


@pytest.mark.anyio
async def test_gzip_and_etag(client: httpx.AsyncClient) -> None:
    assert (
        await client.put("/v1/jobs/j", json={"ranks": RANKS, "size_bytes": 1 << 26})
    ).status_code == 200
    plain = await client.get("/v1/jobs/j/plan", headers={"Accept-Encoding": "identity"})
    zipped = await client.get("/v1/jobs/j/plan", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers
    assert zipped.headers["content-encoding"] == "gzip"
    assert plain.headers["vary"] == zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) < len(plain.content)
    assert zipped.content == plain.content  # httpx decodes
    etag = plain.headers["etag"]
    assert etag == zipped.headers["etag"] and etag.startswith('W/"')
    again = await client.get("/v1/jobs/j/plan", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert (
        await client.get("/v1/jobs/j/plan", headers={"If-None-Match": '"other"'})
    ).status_code == 200
    compact = await client.get(
        "/v1/jobs/j/plan", params={"format": "compact"}, headers={"If-None-Match": etag}
    )
    assert compact.status_code == 200 and compact.headers["etag"] != etag
    # a new graph: the held ETag no longer matches and the plan says so
    spec = dgx_cluster(2, gpus=4, nic_GBps=25.0)
    assert (await client.put("/v1/fabric", json=spec, headers=auth("admin"))).status_code == 200
    fresh = await client.get("/v1/jobs/j/plan", headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh.headers["etag"] != etag
    assert fresh.json()["topology_version"] != plain.json()["topology_version"]


@pytest.mark.anyio
async def test_fast_path_answers_exactly_as_the_route(client: httpx.AsyncClient) -> None:
    """api/fastpath.py serves cached fetches before FastAPI; with it on and off every
    request gets the same status, headers and bytes, and it answers only cache hits."""
    app = client._transport.app  # type: ignore[attr-defined]
    assert (
        await client.put("/v1/jobs/j", json={"ranks": RANKS, "size_bytes": 1 << 26})
    ).status_code == 200
    etag = (await client.get("/v1/jobs/j/plan")).headers["etag"]  # builds the full form
    job, agent = auth("job")["Authorization"], auth("agent")["Authorization"]
    cases: list[tuple[str, dict[str, str], bool]] = [  # (url, headers, served fast)
        ("/v1/jobs/j/plan", {"Accept-Encoding": "gzip"}, True),
        ("/v1/jobs/j/plan", {"Accept-Encoding": "identity"}, True),
        ("/v1/jobs/j/plan?format=full", {"Accept-Encoding": "gzip"}, True),
        ("/v1/jobs/j/plan", {"If-None-Match": etag}, True),
        ("/v1/jobs/j/plan", {"If-None-Match": 'W/"x", ' + etag}, True),
        ("/v1/jobs/j/plan", {"Authorization": admin_auth()}, True),
        ("/v1/jobs/j/plan", {"Authorization": agent}, False),  # 403
        ("/v1/jobs/j/plan", {"Authorization": "Bearer wrong-token-123"}, False),  # 401
        ("/v1/jobs/j/plan", {"Authorization": job.replace("Bearer", "Basic")}, False),
        ("/v1/jobs/j/plan?format=rows", {}, False),  # 422
        ("/v1/jobs/nope/plan", {}, False),  # 404
        ("/v1/jobs/j/plan?format=compact", {}, False),  # not built yet: the route builds it
        ("/v1/jobs/j/plan?format=compact", {"Accept-Encoding": "gzip"}, True),
    ]
    for url, headers, fast in cases:
        answers = []
        for on in (True, False):
            app.state.plan_fast_path = on
            before = app.state.plan_fast_path_hits
            r = await client.get(url, headers=headers)
            answers.append((r.status_code, dict(r.headers), r.content))
            assert app.state.plan_fast_path_hits - before == (fast and on), (url, headers)
        assert answers[0] == answers[1], (url, headers)
    app.state.plan_fast_path = True
    metrics = (await client.get("/metrics")).text
    assert 'route="/v1/jobs/{job_id}/plan",status="304"' in metrics.replace('method="GET",', "")


def admin_auth() -> str:
    return auth("admin")["Authorization"]
