"""Liveness, readiness (store reachable) and Prometheus metrics."""

from __future__ import annotations

from anyio.to_thread import run_sync
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from syncplan.api.db import ping
from syncplan.api.deps import ClusterDep, MetricsDep
from syncplan.api.errors import APIError, responses
from syncplan.api.models import Health, Ready

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Ready, responses=responses(503))
async def readyz(request: Request) -> Ready:
    engine = request.app.state.engine
    try:
        await run_sync(ping, engine)
    except Exception as exc:
        raise APIError(503, f"store unreachable: {type(exc).__name__}", [], "unavailable") from None
    return Ready(status="ready", database=engine.url.get_backend_name())


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}
    },
)
async def metrics(metrics: MetricsDep, cluster: ClusterDep) -> Response:
    snap = cluster.current()
    if snap is None:
        try:
            snap = await run_sync(cluster.refresh)
        except Exception:
            snap = None
    if snap is not None:
        metrics.hosts_stale.set(len(snap.stale))
        metrics.hosts_reporting.set(len(snap.hosts) - len(snap.stale))
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
