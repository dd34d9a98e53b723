"""The application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from syncplan.api import errors, outage
from syncplan.api.db import init_schema, make_engine, session_factory
from syncplan.api.fastpath import CachedPlanFastPath
from syncplan.api.ingest import ReportWriter
from syncplan.api.jobs import JobService
from syncplan.api.limits import BodyLimitMiddleware
from syncplan.api.metrics import Metrics, MetricsMiddleware
from syncplan.api.planning import PlanService
from syncplan.api.quota import SolveQuota
from syncplan.api.report_fastpath import ReportFastPath
from syncplan.api.routes import agents, fabric, health, jobs, plans, topology, ui
from syncplan.api.routes import export as export_routes
from syncplan.api.settings import Settings
from syncplan.api.state import ClusterState


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the service for ``settings`` (from the environment when omitted); the store's
    schema is created or checked here, so a wrong database fails before serving."""
    settings = settings or Settings()
    engine = make_engine(settings.database_url, settings.db_pool_size, settings.db_timeout_s)
    init_schema(engine)
    sessions = session_factory(engine)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = FastAPI(
        title="syncplan",
        version="0.1.0",
        lifespan=lifespan,
        summary="Central planning service: cluster graph from agents' reports, "
        "per-job all-reduce plans.",
    )
    metrics = Metrics()
    cluster = ClusterState(sessions, settings.stale_after_s, settings.sync_interval_s)
    quota = SolveQuota(settings.solves_per_client, settings.solve_queue, settings.solve_timeout_s)
    planner = PlanService(
        sessions,
        metrics,
        settings.plan_cache_size,
        settings.solver_threads,
        settings.plan_cache_bytes,
        settings.plan_options(),
        quota,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = sessions
    app.state.metrics = metrics
    app.state.cluster = cluster
    app.state.reports = ReportWriter(cluster)
    app.state.plans = planner
    app.state.jobs = JobService(
        sessions, cluster, planner, settings.plan_cache_size * 4, settings.plan_cache_bytes
    )
    app.state.token_scopes = settings.token_scopes()
    app.state.agent_secret = (
        settings.agent_secret.get_secret_value() if settings.agent_secret else None
    )
    app.state.plan_fast_path = True
    app.state.plan_fast_path_hits = 0
    app.state.report_fast_path = True
    app.state.report_fast_path_hits = 0
    errors.install(app)
    outage.install(app)
    for module in (health, agents, fabric, topology, plans, jobs, export_routes, ui):
        app.include_router(module.router)
    app.include_router(ui.root)
    app.add_middleware(CachedPlanFastPath)  # innermost: inside the metrics
    app.add_middleware(ReportFastPath)
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
