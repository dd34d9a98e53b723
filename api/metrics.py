"""Prometheus metrics of one app instance (its own registry, so tests can build many)."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
SOLVE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "syncplan_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "syncplan_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.solve = Histogram(
            "syncplan_plan_solve_seconds",
            "time to solve one plan",
            ["algorithm"],
            buckets=SOLVE_BUCKETS,
            registry=r,
        )
        self.cache = Counter(
            "syncplan_plan_cache",
            "plan lookups by cache layer and outcome",
            ["layer", "outcome"],
            registry=r,
        )
        self.shared = Counter(
            "syncplan_plan_requests_coalesced",
            "plan requests that waited for an identical in-flight solve",
            registry=r,
        )
        self.hosts_reporting = Gauge(
            "syncplan_hosts_reporting", "hosts with a fresh report", registry=r
        )
        self.hosts_stale = Gauge(
            "syncplan_hosts_stale", "hosts whose last report is older than the TTL", registry=r
        )
        self.reports = Counter(
            "syncplan_reports", "host reports by outcome", ["outcome"], registry=r
        )


class MetricsMiddleware:
    """Counts requests and observes their latency, labelled by route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics
        self._children: dict[tuple[str, str], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def _send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, _send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            method = scope["method"]
            self.metrics.latency.labels(method, path).observe(time.perf_counter() - start)
            self.metrics.requests.labels(method, path, str(status)).inc()
