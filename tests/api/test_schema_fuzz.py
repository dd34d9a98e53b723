"""Property-based requests from the OpenAPI document (schemathesis) with every kind of token
and every schemathesis check, response-schema conformance included: the service answers as
its OpenAPI document says (statuses, content types, headers, bodies), never 5xx, and every
error body has the service's error shape."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks
from syncplan.api.identity import host_token
from syncplan.api.main import create_app
from syncplan.api.settings import Settings

from tests.api.helpers import AGENT_SECRET, TOKENS, auth, host_report

load_all_checks()
# Semantic refusals of schema-valid requests (an unknown rank, a stale seq, a job that does
# not exist) are documented 404/409/422 answers, not contract breaches; everything else runs.
EXCLUDED = {
    "positive_data_acceptance",
    "use_after_free",
    "ensure_resource_availability",
    "max_response_time",
}
ALL_CHECKS = [c for c in CHECKS.get_all() if c.__name__ not in EXCLUDED]
TOKEN_KINDS = {
    "admin": auth("admin"),
    "agent-shared": auth("agent"),
    "job": auth("job"),
    "agent-host": {"Authorization": f"Bearer {host_token(AGENT_SECRET, 'h0')}"},
    "none": {},
}


@pytest.fixture(scope="module")
def app_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    db = tmp_path_factory.mktemp("fuzz") / "fuzz.db"
    app = create_app(
        Settings(
            database_url=f"sqlite:///{db}",
            admin_token=TOKENS["admin"],
            agent_token=TOKENS["agent"],
            job_token=TOKENS["job"],
            agent_secret=AGENT_SECRET,
            allow_shared_agent_token=True,
            solve_timeout_s=20,
        )
    )
    with TestClient(app) as client:
        for host, peers in (("h0", {"h1": 10.0}), ("h1", {})):
            client.put(
                f"/v1/agents/{host}/report",
                json=host_report(host, 1, peers=peers),
                headers=auth("agent"),
            ).raise_for_status()
        client.put(
            "/v1/jobs/j1",
            json={"ranks": ["h0/gpu0", "h1/gpu0"], "size_bytes": 1024},
            headers=auth("job"),
        ).raise_for_status()
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("app_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_contract(case: schemathesis.Case) -> None:
    # Each generated request that carries a token is sent with each kind of credential
    # (replacing the generated one), so it reaches the handlers and the refusals alike; one
    # the generator left without a token (a missing-header case) is sent as it is.
    given = case.headers or {}
    headers = {k: v for k, v in given.items() if k.lower() != "authorization"}
    kinds = TOKEN_KINDS if len(headers) < len(given) else {"as generated": {}}
    for kind, token in kinds.items():
        case.headers = {**headers, **token}
        response = case.call()
        case.validate_response(response, checks=ALL_CHECKS, headers=case.headers)
        assert response.status_code < 500, (kind, case.method, case.path, response.text)
        if response.status_code >= 400:
            detail = response.json()["detail"]
            assert detail and all(set(d) == {"loc", "msg", "type"} for d in detail), detail
