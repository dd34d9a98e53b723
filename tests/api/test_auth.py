"""Every protected endpoint refuses a missing or unknown token (401) and a token of the
wrong scope (403), on a real server."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from syncplan.api.main import create_app
from syncplan.api.settings import Settings

from tests.api.helpers import TOKENS, ServerProcess, auth, host_report

ALL = {"admin", "agent", "job"}
ENDPOINTS: list[tuple[str, str, Any, set[str]]] = [
    ("PUT", "/v1/agents/{host}/report", host_report("h9", 1), {"agent", "admin"}),
    ("GET", "/v1/agents", None, ALL),
    ("DELETE", "/v1/agents/{host}", None, {"admin"}),
    ("POST", "/v1/agents/{host}/token", None, {"admin"}),
    ("PUT", "/v1/fabric", {"nodes": [{"id": "tor0", "kind": "switch"}], "links": []}, {"admin"}),
    ("GET", "/v1/fabric", None, ALL),
    ("DELETE", "/v1/fabric", None, {"admin"}),
    ("POST", "/v1/plans", {"ranks": ["h9/gpu0"], "size_bytes": 1024}, {"job", "admin"}),
    ("GET", "/v1/plans/{plan_id}", None, {"job", "admin"}),
    ("GET", "/v1/plans/{plan_id}/export", None, {"job", "admin"}),
    ("PUT", "/v1/jobs/{job_id}", {"ranks": ["h9/gpu0"], "size_bytes": 1024}, {"job", "admin"}),
    ("GET", "/v1/jobs/{job_id}", None, {"job", "admin"}),
    ("GET", "/v1/jobs/{job_id}/plan", None, {"job", "admin"}),
    ("GET", "/v1/jobs/{job_id}/schedule", None, {"job", "admin"}),
    (
        "PUT",
        "/v1/jobs/{job_id}/profile",
        {"forward_s": [0.001], "backward_s": [0.001]},
        {"job", "admin"},
    ),
    ("DELETE", "/v1/jobs/{job_id}", None, {"job", "admin"}),
]
PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/v1/topology"),
    ("GET", "/v1/topology/export"),
}


def _url(template: str) -> str:
    return template.format(host="h9", plan_id="nope", job_id="j1")


def test_table_covers_every_route(tmp_path) -> None:
    app = create_app(
        Settings(environment="development", database_url=f"sqlite:///{tmp_path / 'a.db'}")
    )
    routes = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    assert routes == {(m, p) for m, p, _, _ in ENDPOINTS} | PUBLIC


@pytest.mark.parametrize(
    ("method", "path", "body", "allowed"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _, _ in ENDPOINTS]
)
def test_tokens(
    server: ServerProcess, method: str, path: str, body: Any, allowed: set[str]
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:

        def call(headers: dict[str, str]) -> httpx.Response:
            return c.request(method, _url(path), json=body, headers=headers)

        missing = call({})
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        assert missing.json()["detail"][0]["loc"] == ["header", "Authorization"]
        assert call({"Authorization": "Bearer not-a-token"}).status_code == 401
        assert call({"Authorization": f"Basic {TOKENS['admin']}"}).status_code == 401
        for scope in sorted(ALL - allowed):
            wrong = call(auth(scope))
            assert wrong.status_code == 403, (scope, wrong.text)
            assert "scope" in wrong.json()["detail"][0]["msg"]
        for scope in sorted(allowed):
            assert call(auth(scope)).status_code not in (401, 403), scope


def test_public_endpoints(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json() == {"status": "ready", "database": "sqlite"}
        assert c.get("/v1/topology").status_code == 200
        text = c.get("/metrics").text
        assert 'syncplan_http_requests_total{method="GET",route="/readyz",status="200"}' in text
