"""Property-based requests from the OpenAPI document (schemathesis): no 5xx, ever, and every
error body has the service's error shape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from api.main import create_app
from api.settings import Settings
from tests.api.helpers import TOKENS, auth, host_report


@pytest.fixture(scope="module")
def app_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    app = create_app(Settings(database_url=f"sqlite:///{db}", admin_token=TOKENS["admin"],
                              agent_token=TOKENS["agent"], job_token=TOKENS["job"]))
    with TestClient(app) as client:
        for host, peers in (("h0", {"h1": 10.0}), ("h1", {})):
            client.put(f"/v1/agents/{host}/report", json=host_report(host, 1, peers=peers),
                       headers=auth("agent")).raise_for_status()
        client.put("/v1/jobs/j1", json={"ranks": ["h0/gpu0", "h1/gpu0"], "size_bytes": 1024},
                   headers=auth("job")).raise_for_status()
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("app_schema")


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case) -> None:
    # Our token replaces whatever the generator put there, so requests reach the handlers;
    # refusing tokens is tested in test_auth.py.
    case.headers = {**(case.headers or {}), **auth("admin")}
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.text)
    if response.status_code >= 400:
        detail = response.json()["detail"]
        assert detail and all(set(d) == {"loc", "msg", "type"} for d in detail), detail
