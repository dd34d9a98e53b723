"""The merged cluster graph."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import AUTH_ERRORS, ReadToken, SnapshotDep
from api.models import TopologyPublic

router = APIRouter(prefix="/v1", tags=["topology"], responses=AUTH_ERRORS)


@router.get("/topology", response_class=Response,
            responses={200: {"model": TopologyPublic, "description": "the merged graph"}})
async def get_topology(_: ReadToken, snapshot: SnapshotDep) -> Response:
    """The merged graph (CONTRACTS section 1) without stale hosts, its ``version``, and each
    reporting host's freshness."""
    return Response(snapshot.body, media_type="application/json")
