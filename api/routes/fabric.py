"""The admin-declared part of the graph."""

from __future__ import annotations

import json
import time
from typing import Any

from anyio.to_thread import run_sync
from fastapi import APIRouter, Response
from syncplan.api import store
from syncplan.api.deps import AUTH_ERRORS, AdminToken, ClusterDep, ReadToken, SessionDep
from syncplan.api.errors import APIError, planner_error, responses
from syncplan.api.fabric import normalize_fabric
from syncplan.api.models import FabricCreate, FabricPublic
from syncplan.api.state import ClusterState, utc
from syncplan.core.errors import PlannerError

router = APIRouter(prefix="/v1/fabric", tags=["fabric"], responses=AUTH_ERRORS)


@router.put("", response_model=FabricPublic, responses=responses(413, 422))
async def put_fabric(fabric: FabricCreate, _: AdminToken, cluster: ClusterDep) -> FabricPublic:
    """Replace the fabric: switches, racks, uplinks, or a whole declared cluster. Links may
    name agents' nodes (``{host}/nic0``) that are not declared here."""
    data = normalize_fabric(fabric)
    try:
        await run_sync(cluster.check_fabric, data)
    except PlannerError as exc:
        raise planner_error(exc, ["body"]) from None
    now = time.time()
    digest = await run_sync(_store, cluster, data, now)
    return FabricPublic(nodes=fabric.nodes, links=fabric.links, digest=digest, updated_at=utc(now))


def _store(cluster: ClusterState, data: dict[str, Any], now: float) -> str:
    with cluster.sessions() as s:
        digest = store.put_fabric(s, data, now)
    cluster.invalidate()
    return digest


@router.get("", response_model=FabricPublic, responses=responses(404))
def get_fabric(_: ReadToken, session: SessionDep) -> FabricPublic:
    """The stored fabric, as given (normalized)."""
    row = store.get_fabric(session)
    if row is None:
        raise APIError(404, "no fabric declared", [], "not_found")
    data = json.loads(row.body)
    return FabricPublic(
        nodes=data["nodes"], links=data["links"], digest=row.digest, updated_at=utc(row.updated_at)
    )


@router.delete("", status_code=204, response_class=Response, responses=responses(404))
def delete_fabric(_: AdminToken, session: SessionDep, cluster: ClusterDep) -> Response:
    """Remove the fabric; agents' reports alone then make the graph."""
    if not store.delete_fabric(session):
        raise APIError(404, "no fabric declared", [], "not_found")
    cluster.invalidate()
    return Response(status_code=204)
