"""Plan requests with ``density`` (docs/formats.md): a sparse plan, keyed apart from the
dense one, and clear 422s for bad sparse fields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from syncplan.api.main import create_app
from syncplan.api.settings import Settings
from syncplan.planner.builders import dgx_cluster
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

from tests.api.helpers import TOKENS, auth

pytestmark = pytest.mark.anyio

FABRIC = dgx_cluster(2, gpus=2)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
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
        r = await c.put("/v1/fabric", json=FABRIC, headers=auth("admin"))
        assert r.status_code == 200, r.text
        yield c


def _req(**extra: Any) -> dict[str, Any]:
    return {
        "ranks": [f"h{h}/gpu{g}" for h in range(2) for g in range(2)],
        "size_bytes": 64 << 20,
        **extra,
    }


async def test_density_gives_a_sparse_plan(client: httpx.AsyncClient) -> None:
    dense = (await client.post("/v1/plans", json=_req(), headers=auth("job"))).json()
    r = await client.post("/v1/plans", json=_req(density=0.01), headers=auth("job"))
    assert r.status_code == 200, r.text
    doc = r.json()
    assert "sparse" not in dense and doc["plan_id"] != dense["plan_id"]
    sp = doc["sparse"]
    assert sp["mode"] == "sparse" and sp["block_elems"] == 256
    assert sp["predicted_sparse_s"] < sp["predicted_dense_s"]
    assert verify_plan(doc, Topology.from_dict(FABRIC)).ok
    full = (
        await client.post(
            "/v1/plans",
            json=_req(density=1, density_overlap=True, block_elems=64),
            headers=auth("job"),
        )
    ).json()
    assert full["sparse"]["mode"] == "dense" and full["sparse"]["density_overlap"] is True


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"density": 0}, "density"),
        ({"density": 1.5}, "density"),
        ({"density": "x"}, "density"),
        ({"density": [0.1, 0.2]}, "density"),
        ({"density": 0.1, "block_elems": 0}, "block_elems"),
        ({"density": 0.1, "density_overlap": "yes"}, "density_overlap"),
    ],
)
async def test_bad_sparse_fields_are_422(
    client: httpx.AsyncClient, extra: dict[str, Any], field: str
) -> None:
    r = await client.post("/v1/plans", json=_req(**extra), headers=auth("job"))
    assert r.status_code == 422, r.text
    assert field in r.text
