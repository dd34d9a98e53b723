"""Bad input gets a 4xx JSON body naming the field, never a 500, and never changes what is
stored. Runs against a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import ServerProcess, auth, host_report


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        for host, peers in (("h0", {"h1": 12.0}), ("h1", {})):
            c.put(
                f"/v1/agents/{host}/report",
                json=host_report(host, 5, peers=peers),
                headers=auth("agent"),
            ).raise_for_status()
        c.put(
            "/v1/jobs/good",
            json={"ranks": ["h0/gpu0", "h1/gpu0"], "size_bytes": 4096},
            headers=auth("job"),
        ).raise_for_status()
        yield c


def _state(c: httpx.Client) -> dict[str, Any]:
    topo = c.get("/v1/topology", headers=auth("job")).json()
    for h in topo["hosts"].values():
        h.pop("last_report_at")
    return {
        "topology": topo,
        "job": c.get("/v1/jobs/good", headers=auth("job")).json(),
        "fabric": c.get("/v1/fabric", headers=auth("admin")).status_code,
    }


def _bad_report(**changes: Any) -> dict[str, Any]:
    rep = host_report("h0", 6, peers={"h1": 12.0})
    rep.update(changes)
    return rep


def _neg_bw_report() -> dict[str, Any]:
    rep = _bad_report()
    rep["links"][1]["bandwidth_GBps"] = 0
    return rep


def _dangling_link_report() -> dict[str, Any]:
    rep = _bad_report()
    rep["links"].append({"src": "gpu0", "dst": "gpu99", "bandwidth_GBps": 10.0})
    return rep


H = {"Content-Type": "application/json"}
CASES: list[tuple[str, str, str, Any, str, int, list[Any]]] = [
    # (name, method, path, body, scope, status, expected loc prefix)
    (
        "invalid json",
        "PUT",
        "/v1/agents/h0/report",
        b'{"host": "h0", "seq": ',
        "agent",
        422,
        ["body"],
    ),
    (
        "seq wrong type",
        "PUT",
        "/v1/agents/h0/report",
        _bad_report(seq="six"),
        "agent",
        422,
        ["body", "seq"],
    ),
    (
        "negative seq",
        "PUT",
        "/v1/agents/h0/report",
        _bad_report(seq=-1),
        "agent",
        422,
        ["body", "seq"],
    ),
    (
        "seq beyond 64 bits",
        "PUT",
        "/v1/agents/h0/report",
        _bad_report(seq=2**63),
        "agent",
        422,
        ["body", "seq"],
    ),
    (
        "unknown field",
        "PUT",
        "/v1/agents/h0/report",
        _bad_report(colour="red"),
        "agent",
        422,
        ["body", "colour"],
    ),
    ("host mismatch", "PUT", "/v1/agents/h1/report", _bad_report(), "agent", 422, ["body", "host"]),
    (
        "zero bandwidth",
        "PUT",
        "/v1/agents/h0/report",
        _neg_bw_report(),
        "agent",
        422,
        ["body", "links", 1, "bandwidth_GBps"],
    ),
    (
        "dangling local link",
        "PUT",
        "/v1/agents/h0/report",
        _dangling_link_report(),
        "agent",
        422,
        ["body", "links", 9, "dst"],
    ),
    ("old seq", "PUT", "/v1/agents/h0/report", _bad_report(seq=4), "agent", 409, ["body", "seq"]),
    (
        "same seq other body",
        "PUT",
        "/v1/agents/h0/report",
        _bad_report(seq=5, agent_version="x"),
        "agent",
        409,
        ["body", "seq"],
    ),
    (
        "fabric negative bw",
        "PUT",
        "/v1/fabric",
        {
            "nodes": [{"id": "tor", "kind": "switch"}],
            "links": [{"src": "h0/nic0", "dst": "tor", "bandwidth_GBps": -1}],
        },
        "admin",
        422,
        ["body", "links", 0, "bandwidth_GBps"],
    ),
    (
        "fabric nan bw",
        "PUT",
        "/v1/fabric",
        b'{"nodes": [{"id": "tor", "kind": "switch"}], "links": [{"src": "h0/nic0", '
        b'"dst": "tor", "bandwidth_GBps": NaN}]}',
        "admin",
        422,
        ["body", "links", 0, "bandwidth_GBps"],
    ),
    (
        "fabric unknown node",
        "PUT",
        "/v1/fabric",
        {"nodes": [], "links": [{"src": "tor", "dst": "spine", "bandwidth_GBps": 1}]},
        "admin",
        422,
        ["body", "links", 0, "src"],
    ),
    (
        "fabric duplicate id",
        "PUT",
        "/v1/fabric",
        {"nodes": [{"id": "tor", "kind": "switch"}, {"id": "tor", "kind": "switch"}]},
        "admin",
        422,
        ["body", "nodes", 1, "id"],
    ),
    (
        "fabric duplicate link",
        "PUT",
        "/v1/fabric",
        {
            "nodes": [{"id": "tor", "kind": "switch"}],
            "links": [
                {"src": "h0/nic0", "dst": "tor", "bandwidth_GBps": 1},
                {"src": "tor", "dst": "h0/nic0", "bandwidth_GBps": 2},
            ],
        },
        "admin",
        422,
        ["body", "links", 1],
    ),
    (
        "plan unknown rank",
        "POST",
        "/v1/plans",
        {"ranks": ["h0/gpu0", "h7/gpu0"], "size_bytes": 4096},
        "job",
        422,
        ["body", "ranks", 1],
    ),
    (
        "plan rank on a nic",
        "POST",
        "/v1/plans",
        {"ranks": ["h0/gpu0", "h0/nic0"], "size_bytes": 4096},
        "job",
        422,
        ["body", "ranks", 1],
    ),
    (
        "plan duplicate rank",
        "POST",
        "/v1/plans",
        {"ranks": ["h0/gpu0", "h0/gpu0"], "size_bytes": 4096},
        "job",
        422,
        ["body", "ranks", 1],
    ),
    (
        "plan zero size",
        "POST",
        "/v1/plans",
        {"ranks": ["h0/gpu0"], "size_bytes": 0},
        "job",
        422,
        ["body", "size_bytes"],
    ),
    (
        "plan bad size text",
        "POST",
        "/v1/plans",
        {"ranks": ["h0/gpu0"], "size_bytes": "lots"},
        "job",
        422,
        ["body", "size_bytes"],
    ),
    (
        "plan unknown algorithm",
        "POST",
        "/v1/plans",
        {"ranks": ["h0/gpu0", "h1/gpu0"], "size_bytes": 4096, "algorithm": "magic"},
        "job",
        422,
        ["body", "algorithm"],
    ),
    (
        "plan ranks not a list",
        "POST",
        "/v1/plans",
        {"ranks": "h0/gpu0", "size_bytes": 1},
        "job",
        422,
        ["body", "ranks"],
    ),
    (
        "job unknown host",
        "PUT",
        "/v1/jobs/good",
        {"ranks": [{"host": "h0", "gpu": 0}, {"host": "h8", "gpu": 0}], "size_bytes": 4096},
        "job",
        422,
        ["body", "ranks", 1, "host"],
    ),
    (
        "job unknown gpu",
        "PUT",
        "/v1/jobs/good",
        {"ranks": [{"host": "h0", "gpu": 9}], "size_bytes": 4096},
        "job",
        422,
        ["body", "ranks", 0, "gpu"],
    ),
    (
        "job both sizes",
        "PUT",
        "/v1/jobs/good",
        {"ranks": ["h0/gpu0"], "size_bytes": 1, "bucket_sizes": [1]},
        "job",
        422,
        ["body"],
    ),
    (
        "job bad bucket",
        "PUT",
        "/v1/jobs/good",
        {"ranks": ["h0/gpu0"], "bucket_sizes": [1024, "1 lightyear"]},
        "job",
        422,
        ["body", "bucket_sizes", 1],
    ),
    (
        "job rank not in topology",
        "PUT",
        "/v1/jobs/good",
        {"ranks": ["h0/gpu0", "h5/gpu1"], "size_bytes": 4096},
        "job",
        422,
        ["body", "ranks", 1],
    ),
    (
        "job id pattern",
        "PUT",
        "/v1/jobs/bad%20id",
        {"ranks": ["h0/gpu0"], "size_bytes": 1},
        "job",
        422,
        ["path", "job_id"],
    ),
    ("unknown plan", "GET", "/v1/plans/nope", None, "job", 404, ["path", "plan_id"]),
    ("unknown job", "GET", "/v1/jobs/nope/plan", None, "job", 404, ["path", "job_id"]),
]


@pytest.mark.parametrize(
    ("name", "method", "path", "body", "scope", "status", "loc"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input(
    client: httpx.Client,
    name: str,
    method: str,
    path: str,
    body: Any,
    scope: str,
    status: int,
    loc: list[Any],
) -> None:
    before = _state(client)
    content = (
        body if isinstance(body, bytes) else (None if body is None else json.dumps(body).encode())
    )
    r = client.request(method, path, content=content, headers={**H, **auth(scope)})
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert detail and all(set(d) == {"loc", "msg", "type"} for d in detail)
    assert any(d["loc"][: len(loc)] == loc for d in detail), detail
    assert all(d["msg"] for d in detail)
    assert _state(client) == before


def test_oversize_payload(client: httpx.Client) -> None:
    before = _state(client)
    blob = _bad_report(agent_version="x" * (9 << 20))
    r = client.put("/v1/agents/h0/report", json=blob, headers=auth("agent"))
    assert r.status_code == 413
    assert r.json()["detail"][0]["type"] == "too_large"
    assert _state(client) == before


def test_oversize_chunked_payload(client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(10):
            yield b" " * (1 << 20)

    r = client.put("/v1/fabric", content=chunks(), headers={**H, **auth("admin")})
    assert r.status_code == 413
    assert r.json()["detail"][0]["loc"] == ["body"]
