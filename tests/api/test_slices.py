"""``?rank=R`` on the plan routes answers rank R's slice (docs/formats.md, Plan slice):
the same slice core/slice.py makes, an ETag that changes exactly with the whole plan, 422
naming a bad rank, and the same answers with the cached-plan fast path on and off."""

from __future__ import annotations

import json

import httpx
import pytest
from syncplan.core.compact import compact_document, expand_document
from syncplan.core.slice import check_slice, slice_document

from tests.api.test_compact import RANKS, client  # noqa: F401  (the fixture)

ENDPOINTS = [f"h{h}/gpu{g}" for h in range(2) for g in range(4)]


def _plan_of(body: dict) -> dict:
    return {k: v for k, v in body.items() if k not in ("job_id", "topology_version")}


@pytest.mark.anyio
async def test_job_plan_slice(client: httpx.AsyncClient) -> None:  # noqa: F811
    put = await client.put("/v1/jobs/j", json={"ranks": RANKS, "size_bytes": 1 << 26})
    assert put.status_code == 200
    full_r = await client.get("/v1/jobs/j/plan")
    full = full_r.json()
    for rank in ("3", ENDPOINTS[3]):
        r = await client.get("/v1/jobs/j/plan", params={"rank": rank})
        assert r.status_code == 200, r.text
        sl = r.json()
        assert sl == slice_document(full, 3)
        assert check_slice(sl, 3).digest == check_slice(slice_document(full, 3)).digest
        tag = r.headers["etag"]
        assert tag.startswith(full_r.headers["etag"][:-1]) and tag != full_r.headers["etag"]
        held = await client.get(
            "/v1/jobs/j/plan", params={"rank": rank}, headers={"If-None-Match": tag}
        )
        assert held.status_code == 304
    other = await client.get("/v1/jobs/j/plan", params={"rank": "4"})
    assert other.headers["etag"] != tag  # another rank's slice is another response
    stale = await client.get(
        "/v1/jobs/j/plan", params={"rank": "4"}, headers={"If-None-Match": tag}
    )
    assert stale.status_code == 200
    compact = await client.get("/v1/jobs/j/plan", params={"rank": "3", "format": "compact"})
    assert compact.status_code == 200
    assert compact.json() == compact_document(slice_document(full, 3))
    assert expand_document(compact.json()) == slice_document(full, 3)
    assert compact.headers["etag"] != tag
    for bad in ("8", "-1", "h9/gpu0"):
        r = await client.get("/v1/jobs/j/plan", params={"rank": bad})
        assert r.status_code == 422, r.text
        detail = r.json()["detail"][0]
        assert detail["loc"] == ["query", "rank"] and repr(bad).strip("'") in detail["msg"]
    # a new plan (another size) changes every slice's ETag
    await client.put("/v1/jobs/j", json={"ranks": RANKS, "size_bytes": 1 << 20})
    again = await client.get(
        "/v1/jobs/j/plan", params={"rank": "3"}, headers={"If-None-Match": tag}
    )
    assert again.status_code == 200 and again.json()["slice"]["of_plan"] != sl["slice"]["of_plan"]


@pytest.mark.anyio
async def test_bucket_job_slices_every_plan(client: httpx.AsyncClient) -> None:  # noqa: F811
    job = {"ranks": RANKS, "bucket_sizes": [1 << 20, 8 << 20]}
    assert (await client.put("/v1/jobs/b", json=job)).status_code == 200
    full = (await client.get("/v1/jobs/b/plan")).json()
    sl = (await client.get("/v1/jobs/b/plan", params={"rank": "2"})).json()
    assert sl["job_id"] == "b" and len(sl["plans"]) == 2
    assert sl["plans"] == [slice_document(d, 2) for d in full["plans"]]


@pytest.mark.anyio
async def test_stored_plan_slice(client: httpx.AsyncClient) -> None:  # noqa: F811
    made = await client.post("/v1/plans", json={"ranks": ENDPOINTS, "size_bytes": 1 << 24})
    full = made.json()
    url = f"/v1/plans/{full['plan_id']}"
    r = await client.get(url, params={"rank": ENDPOINTS[5]})
    assert r.status_code == 200 and r.json() == slice_document(full, 5)
    assert (await client.get(url, params={"rank": "x"})).status_code == 422


@pytest.mark.anyio
async def test_fast_path_on_and_off_answer_slices_alike(client: httpx.AsyncClient) -> None:  # noqa: F811
    app = client._transport.app  # type: ignore[attr-defined]
    assert (
        await client.put("/v1/jobs/j", json={"ranks": RANKS, "size_bytes": 1 << 26})
    ).status_code == 200
    await client.get("/v1/jobs/j/plan")  # cached: the fast path would answer the full plan
    await client.get("/v1/jobs/j/plan", params={"format": "compact"})
    tag = (await client.get("/v1/jobs/j/plan?rank=1")).headers["etag"]
    cases = [
        ("/v1/jobs/j/plan?rank=1", {"Accept-Encoding": "gzip"}),
        ("/v1/jobs/j/plan?rank=1", {"Accept-Encoding": "identity"}),
        ("/v1/jobs/j/plan?rank=h0%2Fgpu1", {}),
        ("/v1/jobs/j/plan?rank=1&format=compact", {"Accept-Encoding": "gzip"}),
        ("/v1/jobs/j/plan?format=compact&rank=1", {}),
        ("/v1/jobs/j/plan?rank=1", {"If-None-Match": tag}),
        ("/v1/jobs/j/plan?rank=99", {}),
    ]
    for url, headers in cases:
        answers = []
        for on in (True, False):
            app.state.plan_fast_path = on
            before = app.state.plan_fast_path_hits
            r = await client.get(url, headers=headers)
            assert app.state.plan_fast_path_hits == before  # the route answers slices
            answers.append((r.status_code, dict(r.headers), r.content))
        assert answers[0] == answers[1], url
        assert answers[0][0] in (200, 304, 422)
        if answers[0][0] == 200:
            body = json.loads(answers[0][2])
            assert "slice" in body or "program_compact" in body
    app.state.plan_fast_path = True
