"""Store outages answered 503 with ``Retry-After`` instead of 500.

A store that cannot be reached (PostgreSQL down, a connection dropped, the pool exhausted,
SQLite locked beyond its busy timeout) raises one of SQLAlchemy's connection errors. The
handler registered here answers those with 503, the service's error shape and a
``Retry-After`` header, as an ordinary response: the client's connection stays open, and
the next request after the store is back succeeds without a restart (the engine's pool
pre-pings and replaces dead connections).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sa_exc.DisconnectionError,
)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means the store is unreachable (not a bug in a query)."""
    if isinstance(exc, OUTAGE_ERRORS):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and bool(exc.connection_invalidated)


def outage_response(exc: BaseException) -> JSONResponse:
    log.warning("store unavailable: %s", str(exc).splitlines()[0][:300])
    return JSONResponse(
        {
            "detail": [
                {
                    "loc": [],
                    "type": "store_unavailable",
                    "msg": f"the store is unavailable ({type(exc).__name__}); retry in "
                    f"{RETRY_AFTER_S} s",
                }
            ]
        },
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def install(app: FastAPI) -> None:
    """Register the 503 handler for every outage error class."""

    async def _outage(_: Request, exc: Exception) -> JSONResponse:
        if is_outage(exc):
            return outage_response(exc)
        log.error("store error", exc_info=exc)
        return JSONResponse(
            {
                "detail": [
                    {"loc": [], "type": "internal", "msg": "internal error; see the service log"}
                ]
            },
            status_code=500,
        )

    for cls in (*OUTAGE_ERRORS, sa_exc.DBAPIError):
        app.add_exception_handler(cls, _outage)
