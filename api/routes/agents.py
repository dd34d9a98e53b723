"""Host reports from agents."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from syncplan.api import store
from syncplan.api.deps import (
    AUTH_ERRORS,
    AdminToken,
    ClusterDep,
    MetricsDep,
    ReadToken,
    ReportToken,
    ReportWriterDep,
    SessionDep,
    SettingsDep,
    SnapshotDep,
)
from syncplan.api.errors import APIError, responses
from syncplan.api.identity import host_token
from syncplan.api.limits import MAX_SEQ_AHEAD_MS
from syncplan.api.models import AgentsPublic, AgentTokenPublic, HostName, ReportAccepted
from syncplan.api.state import utc
from syncplan.core.report import HostReport

router = APIRouter(prefix="/v1/agents", tags=["agents"], responses=AUTH_ERRORS)


@router.put("/{host}/report", response_model=ReportAccepted, responses=responses(409, 413, 422))
async def put_report(
    host: Annotated[HostName, Path()],
    report: HostReport,
    _: ReportToken,
    writer: ReportWriterDep,
    metrics: MetricsDep,
) -> ReportAccepted:
    """Store one host's report (the host's own agent token, see api/identity.py). A lower
    ``seq`` than the stored one is refused (409); the
    same ``seq`` with the same body is accepted again (``status: unchanged``)."""
    if report.host != host:
        raise APIError(
            422,
            f"body host {report.host!r} differs from the URL's {host!r}",
            ["body", "host"],
            "host_mismatch",
        )
    ahead = report.seq - int(time.time() * 1000)
    if ahead > MAX_SEQ_AHEAD_MS:
        raise APIError(
            422,
            f"seq {report.seq} is more than a day ahead of the service's "
            "clock in unix milliseconds (agents use max(last + 1, unix ms))",
            ["body", "seq"],
            "seq_too_far",
        )
    try:
        status, received = await writer.submit(report)
    except APIError:
        metrics.reports.labels("refused").inc()
        raise
    metrics.reports.labels(status).inc()
    return ReportAccepted(host=host, seq=report.seq, status=status, received_at=utc(received))


@router.post("/{host}/token", response_model=AgentTokenPublic, responses=responses(409))
async def issue_token(
    host: Annotated[HostName, Path()], _: AdminToken, request: Request
) -> AgentTokenPublic:
    """The agent token bound to ``host`` (derived from SYNCPLAN_AGENT_SECRET; the same
    every time). 409 when the service has no agent secret."""
    secret = request.app.state.agent_secret
    if secret is None:
        raise APIError(
            409,
            "SYNCPLAN_AGENT_SECRET is not set: host tokens are disabled",
            ["path", "host"],
            "no_agent_secret",
        )
    return AgentTokenPublic(host=host, token=host_token(secret, host))


@router.get("", response_model=AgentsPublic)
async def list_agents(_: ReadToken, snapshot: SnapshotDep, settings: SettingsDep) -> AgentsPublic:
    """Every host that has reported, with its last seq and whether it is stale."""
    return AgentsPublic(stale_after_s=settings.stale_after_s, hosts=snapshot.hosts)


@router.delete("/{host}", status_code=204, response_class=Response, responses=responses(404))
def delete_agent(
    host: Annotated[HostName, Path()], _: AdminToken, session: SessionDep, cluster: ClusterDep
) -> Response:
    """Forget a decommissioned host's report."""
    if not store.delete_report(session, host):
        raise APIError(404, f"no report from host {host!r}", ["path", "host"], "not_found")
    cluster.invalidate()
    return Response(status_code=204)
