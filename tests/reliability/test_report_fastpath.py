"""The report fast path (api/report_fastpath.py) answers exactly as the route does: the same
status and body for every kind of request, with the fast path on and off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from syncplan.api.identity import host_token
from syncplan.api.main import create_app
from syncplan.api.settings import Settings

from tests.api.helpers import AGENT_SECRET, TOKENS, auth, host_report

J = {"Content-Type": "application/json"}


def _cases() -> list[tuple[str, dict[str, str], bytes]]:
    good = host_report("h0", 5, peers={"h1": 10.0})
    dangling = host_report("h0", 9)
    dangling["links"].append({"src": "gpu0", "dst": "gpu99", "bandwidth_GBps": 1.0})
    h0 = {"Authorization": f"Bearer {host_token(AGENT_SECRET, 'h0')}"}

    def body(d: dict[str, Any]) -> bytes:
        return json.dumps(d).encode()

    return [
        ("/v1/agents/h0/report", {**h0, **J}, body(good)),  # stored
        ("/v1/agents/h0/report", {**h0, **J}, body(good)),  # unchanged
        ("/v1/agents/h0/report", {**h0, **J}, body({**good, "seq": 4})),  # 409 old seq
        ("/v1/agents/h0/report", {**h0, **J}, body({**good, "agent_version": "x"})),  # 409
        ("/v1/agents/h0/report", {**h0, **J}, body(dangling)),  # 422 from the check
        ("/v1/agents/h0/report", {**h0, **J}, b'{"host": "h0", "seq": '),  # 422 json
        ("/v1/agents/h0/report", {**h0, **J}, body({**good, "seq": 2**62})),  # 422 ahead
        ("/v1/agents/h1/report", {**h0, **J}, body(host_report("h1", 1))),  # 403 host
        ("/v1/agents/h1/report", {**auth("job"), **J}, body(host_report("h1", 1))),  # 403
        ("/v1/agents/h1/report", {"Authorization": "Bearer nope", **J}, body(good)),  # 401
        ("/v1/agents/h1/report", J, body(host_report("h1", 1))),  # 401 missing
        (
            "/v1/agents/h0/report",
            {**auth("admin"), **J},
            body(host_report("h0", 10, peers={"h1": 10.0})),
        ),  # the admin token reports
        (
            "/v1/agents/h0/report",
            {**h0, **J},
            json.dumps(host_report("h0", 11))
            .replace('"latency_us": 0.5', '"latency_us": Infinity', 1)
            .encode(),
        ),  # 422 inf
        ("/v1/agents/h0/report", {**h0, "Content-Type": "text/plain"}, body(good)),
    ]


def _run(tmp: Path, fast: bool) -> list[tuple[int, Any]]:
    app = create_app(
        Settings(
            database_url=f"sqlite:///{tmp / f'{fast}.db'}",
            admin_token=TOKENS["admin"],
            job_token=TOKENS["job"],
            agent_secret=AGENT_SECRET,
            allow_shared_agent_token=False,
        )
    )
    app.state.report_fast_path = fast
    out = []
    with TestClient(app) as c:
        for path, headers, body in _cases():
            r = c.put(path, content=body, headers=headers)
            data = r.json()
            if isinstance(data, dict):
                data.pop("received_at", None)
            out.append((r.status_code, data))
        metrics = c.get("/metrics").text
    # answered there: 3 x 200, 2 x 409 and the 422 of the consistency check
    assert app.state.report_fast_path_hits == (6 if fast else 0)
    assert (
        'syncplan_http_requests_total{method="PUT",route="/v1/agents/{host}/report",'
        'status="200"} 3.0'
    ) in metrics
    return out


def test_fast_path_answers_as_the_route(tmp_path: Path) -> None:
    slow, fast = _run(tmp_path, False), _run(tmp_path, True)
    assert [s for s, _ in slow] == [
        200,
        200,
        409,
        409,
        422,
        422,
        422,
        403,
        403,
        401,
        401,
        200,
        422,
        422,
    ]
    assert fast == slow
