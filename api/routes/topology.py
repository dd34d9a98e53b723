"""The merged cluster graph."""

from __future__ import annotations

from fastapi import APIRouter, Response
from syncplan.api.deps import SnapshotDep
from syncplan.api.models import TopologyPublic

router = APIRouter(prefix="/v1", tags=["topology"])


@router.get(
    "/topology",
    response_class=Response,
    responses={200: {"model": TopologyPublic, "description": "the merged graph"}},
)
async def get_topology(snapshot: SnapshotDep) -> Response:
    """The merged graph (docs/formats.md, topology) without stale hosts, its ``version``, and each
    reporting host's freshness. Needs no token: agents, launchers and dashboards read it,
    and it holds no secret."""
    return Response(snapshot.body, media_type="application/json")
