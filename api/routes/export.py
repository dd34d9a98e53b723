"""Exports for other tools: a stored plan as MSCCL XML, a host of the merged graph as an
NCCL topology file (or the NCCL environment its jobs should set)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from anyio.to_thread import run_sync
from fastapi import APIRouter, Path, Query, Response
from syncplan.api import store
from syncplan.api.deps import AUTH_ERRORS, ClusterDep, JobToken, PlansDep, SnapshotDep
from syncplan.api.errors import APIError, responses
from syncplan.api.models import HostName
from syncplan.api.state import ClusterState

from syncplan.export.msccl_xml import ExportError

router = APIRouter(tags=["export"])
XML: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/xml": {}}, "description": "the XML document"}
}
MAX_TRANSFERS = 300_000  # larger plans take minutes to lower; export them with the CLI


@router.get(
    "/v1/plans/{plan_id}/export",
    response_class=Response,
    responses={**XML, **AUTH_ERRORS, **responses(404, 422)},
)
async def export_plan(
    plan_id: Annotated[str, Path(max_length=128)],
    _: JobToken,
    plans: PlansDep,
    format: Annotated[Literal["msccl"], Query()] = "msccl",
    target: Annotated[Literal["msccl", "rccl"], Query()] = "msccl",
    chunks: Annotated[int | None, Query(ge=1, le=65536)] = None,
    channels: Annotated[int | None, Query(ge=1, le=32)] = None,
    min_bytes: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    max_bytes: Annotated[int | None, Query(ge=0, le=2**62)] = None,
) -> Response:
    """A stored plan as MSCCL algorithm XML (``target``: the executor whose limits apply;
    ``chunks``/``channels`` default to the fewest that fit). 422 when it cannot fit."""
    plan = await plans.by_id(plan_id)
    if plan is None:
        raise APIError(404, f"no plan {plan_id!r}", ["path", "plan_id"], "not_found")

    def build() -> str:
        from syncplan.export.msccl import export_msccl

        doc = json.loads(plan.body.raw)
        n = sum(len(s) for s in doc.get("program", {}).get("steps", []))
        if n > MAX_TRANSFERS:
            raise ExportError(
                f"the plan has {n} transfers; the service exports up to "
                f"{MAX_TRANSFERS} (use `syncplan export msccl`)"
            )
        algo, _ = export_msccl(
            doc,
            target=target,
            chunks=chunks,
            channels=channels,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
        )
        return algo.to_xml()

    try:
        text = await run_sync(build)
    except ExportError as exc:
        raise APIError(422, str(exc), ["query"], "export") from None
    return Response(text, media_type="application/xml")


def _hardware(cluster: ClusterState, host: str) -> dict[str, Any] | None:
    with cluster.sessions() as s:
        bodies = store.report_bodies(s, [host])
    return json.loads(bodies[host][1]) if host in bodies else None


@router.get(
    "/v1/topology/export", response_class=Response, responses={**XML, **responses(404, 422)}
)
async def export_topology(
    snapshot: SnapshotDep,
    cluster: ClusterDep,
    host: Annotated[HostName, Query()],
    format: Annotated[Literal["nccl", "nccl-env"], Query()] = "nccl",
    sm: Annotated[int, Query(ge=30, le=200)] = 80,
    topo_path: Annotated[str, Query(max_length=512)] = "/etc/syncplan/nccl-topo.xml",
) -> Response:
    """One host of the merged graph as an NCCL topology file (``format=nccl``, for
    ``NCCL_TOPO_FILE``: measured NIC rates, real PCI bus ids and NIC names from the host's
    agent report), or the NCCL environment its jobs should set (``format=nccl-env``,
    ``KEY=VALUE`` lines). Needs no token, like ``GET /v1/topology``."""
    from syncplan.export.nccl_topo import nccl_env, nccl_topology_xml

    if host in snapshot.stale:
        raise APIError(
            404,
            f"host {host!r} is stale (no report within the TTL)",
            ["query", "host"],
            "stale_host",
        )
    if not any(n.get("host") == host for n in snapshot.graph.get("nodes", [])):
        raise APIError(404, f"no host {host!r} in the graph", ["query", "host"], "not_found")
    hardware = await run_sync(_hardware, cluster, host)
    try:
        if format == "nccl":
            return Response(
                nccl_topology_xml(snapshot.graph, host, sm=sm, hardware=hardware),
                media_type="application/xml",
            )
        env = nccl_env(snapshot.graph, host, topo_path, hardware)
    except ExportError as exc:
        raise APIError(422, str(exc), ["query", "host"], "export") from None
    return Response("".join(f"{k}={v}\n" for k, v in env.items()), media_type="text/plain")
