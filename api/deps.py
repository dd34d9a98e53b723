"""FastAPI dependencies as ``Annotated`` aliases: settings, store session, cluster snapshot,
and bearer tokens of each scope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Annotated, Literal

from anyio.to_thread import run_sync
from fastapi import Depends, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session
from syncplan.api.errors import APIError, responses
from syncplan.api.identity import scopes_of, token_host
from syncplan.api.ingest import ReportWriter
from syncplan.api.jobs import JobService
from syncplan.api.metrics import Metrics
from syncplan.api.planning import PlanService
from syncplan.api.settings import Settings
from syncplan.api.state import ClusterState, Snapshot


# The trivial getters are ``async`` so FastAPI does not send them to a worker thread.
async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def get_session(request: Request) -> Iterator[Session]:
    """A store session; used by sync routes, which run in the worker threads anyway."""
    with request.app.state.sessions() as session:
        yield session


async def get_cluster(request: Request) -> ClusterState:
    return request.app.state.cluster


async def get_plans(request: Request) -> PlanService:
    return request.app.state.plans


async def get_jobs(request: Request) -> JobService:
    return request.app.state.jobs


async def get_report_writer(request: Request) -> ReportWriter:
    return request.app.state.reports


async def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


async def get_snapshot(request: Request) -> Snapshot:
    cluster: ClusterState = request.app.state.cluster
    snap = cluster.current()
    if snap is None:
        snap = await run_sync(cluster.refresh)
    return snap


SettingsDep = Annotated[Settings, Depends(get_settings)]
SessionDep = Annotated[Session, Depends(get_session)]
ClusterDep = Annotated[ClusterState, Depends(get_cluster)]
SnapshotDep = Annotated[Snapshot, Depends(get_snapshot)]
PlansDep = Annotated[PlanService, Depends(get_plans)]
JobsDep = Annotated[JobService, Depends(get_jobs)]
PlanFormat = Annotated[
    Literal["full", "compact"],
    Query(
        alias="format",
        description="full: plan documents (docs/formats.md); compact: each `program` replaced by a "
        "lossless `program_compact` (core/compact.py), about 5x smaller, 20x "
        "smaller gzip-encoded",
    ),
]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
ReportWriterDep = Annotated[ReportWriter, Depends(get_report_writer)]

bearer = HTTPBearer(
    auto_error=False,
    description="Authorization: Bearer <token>; the admin "
    "token has every scope, the agent and job tokens their own plus 'read'.",
)


HOST_TOKEN_SCOPES = frozenset({"read"})


def identify(request: Request, token: str) -> tuple[frozenset[str], str | None] | None:
    """(scopes, bound host) of ``token``: a service token (host None) or a per-host agent
    token (api/identity.py); None when it is neither."""
    state = request.app.state
    granted = scopes_of(state.token_scopes, token)
    if granted is not None:
        return granted, None
    host = token_host(state.agent_secret, token)
    return (HOST_TOKEN_SCOPES, host) if host is not None else None


def _identity(
    request: Request, cred: HTTPAuthorizationCredentials | None
) -> tuple[frozenset[str], str | None]:
    if cred is None:
        raise APIError(
            401,
            "missing bearer token",
            ["header", "Authorization"],
            "unauthorized",
            {"WWW-Authenticate": "Bearer"},
        )
    found = identify(request, cred.credentials)
    if found is None:
        raise APIError(
            401,
            "invalid bearer token",
            ["header", "Authorization"],
            "unauthorized",
            {"WWW-Authenticate": "Bearer"},
        )
    return found


def _require(scope: str) -> Callable[..., Awaitable[str]]:
    async def check(
        request: Request, cred: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> str:
        granted, _ = _identity(request, cred)
        if scope not in granted:
            raise APIError(
                403,
                f"this token lacks the {scope!r} scope",
                ["header", "Authorization"],
                "forbidden",
            )
        return scope

    check.__name__ = f"require_{scope}"
    return check


async def require_report(
    request: Request, cred: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> str:
    """A report for ``{host}``: that host's own token, the admin token, or (development, or
    SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN) the shared agent token."""
    granted, bound = _identity(request, cred)
    host = request.path_params.get("host", "")
    if bound is not None:
        if bound != host:
            raise APIError(
                403,
                f"this agent token is bound to host {bound!r}, not {host!r}",
                ["header", "Authorization"],
                "wrong_host",
            )
        return bound
    if "agent" not in granted:
        msg = (
            "the shared agent token may report only in development; give each agent its "
            "host token (syncplan token agent HOST)"
            if "read" in granted and "job" not in granted
            else "this token lacks the 'agent' scope"
        )
        raise APIError(403, msg, ["header", "Authorization"], "forbidden")
    return host


AdminToken = Annotated[str, Security(_require("admin"))]
AgentToken = Annotated[str, Security(_require("agent"))]
ReportToken = Annotated[str, Security(require_report)]
JobToken = Annotated[str, Security(_require("job"))]
ReadToken = Annotated[str, Security(_require("read"))]

AUTH_ERRORS = responses(401, 403)
