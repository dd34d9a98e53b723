"""Cached job-plan fetches answered before FastAPI's routing and dependency machinery.

``GET /v1/jobs/{job_id}/plan`` with a job (or admin) bearer token, a current cluster
snapshot and a response already in the job-plan cache is answered here with the stored
bytes; the headers and status are those of the route (``syncplan.api.encoding.negotiate``). Every
other request, including every error case, goes on to the app unchanged. A cached fetch
is what every rank of a launching job does, so it is the request worth making cheap.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send
from syncplan.api.encoding import negotiate
from syncplan.api.identity import scopes_of

PLAN_ROUTE = "/v1/jobs/{job_id}/plan"
_PLAN_PATH = re.compile(r"/v1/jobs/([A-Za-z0-9_.:-]{1,128})/plan")
_FORMS = {b"": "full", b"format=full": "full", b"format=compact": "compact"}


class _RouteLabel:
    """What MetricsMiddleware reads of ``scope["route"]``."""

    path = PLAN_ROUTE


_ROUTE_LABEL = _RouteLabel()


class CachedPlanFastPath:
    """ASGI middleware; ``app.state.plan_fast_path_hits`` counts the requests it answered,
    ``app.state.plan_fast_path = False`` turns it off (the route then serves them all)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            match = _PLAN_PATH.fullmatch(scope["path"])
            form = _FORMS.get(scope["query_string"])
            if match and form and await self._serve(scope, send, match.group(1), form):
                return
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, send: Send, job_id: str, form: str) -> bool:
        state = scope["app"].state
        if not state.plan_fast_path:
            return False
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:  # the first of repeated headers, as Starlette
            headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        granted = scopes_of(state.token_scopes, token)
        if granted is None or "job" not in granted:
            return False
        snapshot = state.cluster.current()
        if snapshot is None:
            return False
        body = state.jobs.cached_plan(job_id, snapshot, form)
        if body is None:
            return False
        status, payload, extra = negotiate(body, "GET", headers)
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
        if status != 304:
            raw += [
                (b"content-length", str(len(payload)).encode()),
                (b"content-type", b"application/json"),
            ]
        scope["route"] = _ROUTE_LABEL  # the metrics label it like the route
        state.plan_fast_path_hits += 1
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})
        return True
