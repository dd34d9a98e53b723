"""First-day defects of the web page: ``/`` leads to it, a CPU-only host is not "1 GPU", the
hosts table shows no raw sequence number, and showing the page never starts a solve."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from syncplan.api.db import PlanRow
from syncplan.api.main import create_app
from syncplan.api.settings import DEV_TOKENS, Settings
from syncplan.planner.builders import star

from tests.api.helpers import host_report

ADMIN = {"Authorization": f"Bearer {DEV_TOKENS['admin']}"}
SEQ = 987654321


@pytest.fixture
def client(tmp_path) -> Iterator[TestClient]:  # type: ignore[no-untyped-def]
    app = create_app(
        Settings(environment="development", database_url=f"sqlite:///{tmp_path / 's.db'}")
    )
    with TestClient(app) as c:
        yield c


def _plans_stored(c: TestClient) -> int:
    with c.app.state.sessions() as s:  # type: ignore[attr-defined]
        return int(s.execute(select(func.count()).select_from(PlanRow)).scalar_one())


def test_root_redirects_to_the_page(client: TestClient) -> None:
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"] == "/ui"
    assert "/" not in client.get("/openapi.json").json()["paths"]


def test_the_page_never_starts_a_solve(client: TestClient) -> None:
    assert client.put("/v1/fabric", json=star([12.5, 12.5]), headers=ADMIN).status_code == 200
    job = {"ranks": ["h0/cpu0", "h1/cpu0"], "size_bytes": 1 << 20}
    assert client.put("/v1/jobs/train", json=job, headers=ADMIN).status_code == 200
    page = client.get("/ui")
    assert page.status_code == 200
    assert "not planned yet" in page.text
    assert "not planned yet" in client.get("/ui/jobs/train").text
    assert _plans_stored(client) == 0 and client.app.state.plans.cached_bytes == 0  # type: ignore[attr-defined]
    # once a client asked for the plan, the page shows it
    plan = client.get("/v1/jobs/train/plan", headers=ADMIN).json()
    assert plan["plan_id"] in client.get("/ui").text
    assert f"plan <code>{plan['plan_id']}</code>" in client.get("/ui/jobs/train").text


def test_cpu_only_host_and_no_sequence_number(client: TestClient) -> None:
    rep = host_report("cpuhost", SEQ, cpu_only=True)
    r = client.put("/v1/agents/cpuhost/report", json=rep, headers=ADMIN)
    assert r.status_code == 200, r.text
    rep = host_report("gpuhost", SEQ + 1, gpus=2)
    assert client.put("/v1/agents/gpuhost/report", json=rep, headers=ADMIN).status_code == 200
    html = client.get("/ui").text
    assert "1 GPU" not in html and "1 CPU" in html and "2 GPUs" in html
    assert str(SEQ) not in html and "<th>seq</th>" not in html
