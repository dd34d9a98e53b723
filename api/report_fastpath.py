"""Agent reports accepted before FastAPI's routing and dependency machinery.

``PUT /v1/agents/{host}/report`` is what every agent sends every interval, so it is the
write worth making cheap. Here a request with an allowed token (the host's own token, or a
token with the ``agent`` scope), a JSON body that ``HostReport.model_validate_json`` accepts
(parsing and validation in one pass, in a worker thread when the body is large), a body
host equal to the URL's and a seq within the allowed lead is handed to the ReportWriter
(api/ingest.py) and answered as the route would. Every other request, every refused token
and every invalid body included, goes on to the route with its body replayed, so errors keep
exactly the route's shape; outcomes of the store (409 for an old seq, 422 for an
inconsistent report, 503 for an outage) are rendered here in the same shape.
"""

from __future__ import annotations

import re
import time

from anyio.to_thread import run_sync
from pydantic import ValidationError
from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send
from syncplan.api.asgi import read_body, replay, send_json
from syncplan.api.errors import APIError
from syncplan.api.identity import scopes_of, token_host
from syncplan.api.limits import MAX_SEQ_AHEAD_MS
from syncplan.api.models import ReportAccepted
from syncplan.api.outage import is_outage, outage_response
from syncplan.api.state import utc
from syncplan.core.report import HostReport

REPORT_ROUTE = "/v1/agents/{host}/report"
_REPORT_PATH = re.compile(r"/v1/agents/([A-Za-z0-9_.:-]{1,128})/report")
PARSE_INLINE_BYTES = 64 * 1024  # larger bodies are parsed in a worker thread


class _RouteLabel:
    path = REPORT_ROUTE


_ROUTE_LABEL = _RouteLabel()


def allowed(state: State, token: str, host: str) -> bool:
    """Whether ``token`` may report for ``host`` (the route gives the 401/403 otherwise)."""
    granted = scopes_of(state.token_scopes, token)
    if granted is not None:
        return "agent" in granted
    return token_host(state.agent_secret, token) == host


class ReportFastPath:
    """ASGI middleware; ``app.state.report_fast_path = False`` sends every report to the
    route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "PUT" and not scope["query_string"]:
            match = _REPORT_PATH.fullmatch(scope["path"])
            if match and getattr(scope["app"].state, "report_fast_path", False):
                done, receive = await self._serve(scope, receive, send, match.group(1))
                if done:
                    return
        await self.app(scope, receive, send)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, host: str
    ) -> tuple[bool, Receive]:
        state = scope["app"].state
        headers: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, value)
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if (
            scheme.lower() != "bearer"
            or ctype != b"application/json"
            or not allowed(state, token, host)
        ):
            return False, receive
        body = await read_body(receive)
        if body is None:
            return True, receive  # the client went away
        again = replay(body, receive)
        try:
            if len(body) > PARSE_INLINE_BYTES:
                report = await run_sync(HostReport.model_validate_json, body)
            else:
                report = HostReport.model_validate_json(body)
        except ValidationError:
            return False, again
        if report.host != host or report.seq - time.time() * 1000 > MAX_SEQ_AHEAD_MS:
            return False, again
        scope["route"] = _ROUTE_LABEL
        state.report_fast_path_hits += 1
        try:
            outcome, received = await state.reports.submit(report)
        except APIError as exc:
            state.metrics.reports.labels("refused").inc()
            await send_json(send, exc.status, _error(exc), exc.headers)
            return True, again
        except Exception as exc:
            if not is_outage(exc):
                raise
            response = outage_response(exc)
            await response(scope, again, send)
            return True, again
        state.metrics.reports.labels(outcome).inc()
        answer = ReportAccepted(
            host=host,
            seq=report.seq,
            status=outcome,
            received_at=utc(received),
        )
        await send_json(send, 200, answer.model_dump_json().encode())
        return True, again


def _error(exc: APIError) -> bytes:
    import json

    return json.dumps(
        {"detail": [{"loc": exc.loc, "msg": exc.msg, "type": exc.type}]}, separators=(",", ":")
    ).encode()
