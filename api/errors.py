"""One error shape for every 4xx/5xx body, and the handlers that produce it.

Every error body is ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}``: ``loc``
names the offending field (for example ``["body", "ranks", 3]``), ``msg`` says what is
wrong. FastAPI's own validation errors already have this shape; the handlers below trim
them to these three keys and give every other error the same form.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from syncplan.api.validation import plain_items
from syncplan.core.errors import InfeasibleError, PlannerError, RequestError, TopologyError

log = logging.getLogger(__name__)


class ErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorBody(BaseModel):
    detail: list[ErrorItem]


class APIError(Exception):
    """An error with an HTTP status and the field it concerns."""

    def __init__(
        self,
        status: int,
        msg: str,
        loc: list[str | int] | None = None,
        type_: str = "invalid",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(msg)
        self.status, self.msg, self.loc, self.type = status, msg, loc or [], type_
        self.headers = headers


def error_json(
    status: int, items: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"detail": items}, status_code=status, headers=headers)


_DESCRIPTIONS = {
    401: "missing or invalid bearer token",
    403: "token of the wrong scope",
    404: "not found",
    409: "conflicts with the stored state or infeasible",
    413: "request body over the size limit",
    422: "invalid input; detail names the field",
    429: "this client's solve quota is in use; see Retry-After",
    503: "store unreachable or planner busy; see Retry-After",
    504: "the solve did not finish in time; it goes on, retry later",
}


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the given error statuses."""
    return {c: {"model": ErrorBody, "description": _DESCRIPTIONS.get(c, "error")} for c in codes}


_FIELD = re.compile(
    r"^([A-Za-z_]\w*(?:\[\d+\])*(?:\.[A-Za-z_]\w*(?:\[\d+\])*)*)"
    r"(?: \([^)]*\))?(:?) "
)
_KNOWN = frozenset(
    {
        "ranks",
        "algorithm",
        "collective",
        "size_bytes",
        "nodes",
        "links",
        "peers",
        "gpus",
        "bucket_sizes",
    }
)


def planner_loc(msg: str, prefix: list[str | int]) -> list[str | int]:
    """Turn a planner message's leading ``ranks[3]:`` (or a leading request field name, as
    in ``algorithm 'x' is unknown``) into ``prefix + ["ranks", 3]``."""
    m = _FIELD.match(msg)
    if not m or not (m.group(2) or m.group(1) in _KNOWN):
        return list(prefix)
    loc: list[str | int] = list(prefix)
    for part in m.group(1).split("."):
        name, *idx = re.split(r"\[(\d+)\]", part)
        loc.append(name)
        loc.extend(int(i) for i in idx if i)
    return loc


def planner_error(exc: PlannerError, prefix: list[str | int]) -> APIError:
    """Map a planner exception: bad input is 422, an infeasible request 409."""
    if isinstance(exc, InfeasibleError):
        return APIError(409, str(exc), planner_loc(str(exc), prefix), "infeasible")
    kind = "topology" if isinstance(exc, TopologyError) else "request"
    if not isinstance(exc, RequestError | TopologyError):
        kind = "planner"
    return APIError(422, str(exc), planner_loc(str(exc), prefix), kind)


def validation_items(errors: list[Any], prefix: list[str | int]) -> list[dict[str, Any]]:
    """Pydantic's errors as plain items: one per field, naming the field and the rule
    (api/validation.py)."""
    return plain_items(errors, prefix, planner_loc, request_fields())


@functools.cache
def request_fields() -> tuple[str, ...]:
    """The field names of every request body (api/models.py): what an unknown field may be a
    misspelling of."""
    from pydantic import BaseModel as Model
    from syncplan.api import models

    names: set[str] = set()
    for obj in vars(models).values():
        if isinstance(obj, type) and issubclass(obj, Model) and obj is not Model:
            names |= set(obj.model_fields)
    return tuple(sorted(names))


_STATUS_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    500: "internal",
}


def allowed_methods(request: Request) -> list[str]:
    """Every method some route takes on the request's path."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.router.routes:
        if route.matches(request.scope)[0] != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the shape above."""

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return error_json(
            exc.status, [{"loc": exc.loc, "msg": exc.msg, "type": exc.type}], exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_json(422, validation_items(list(exc.errors()), []))

    @app.exception_handler(ValidationError)
    async def _pydantic(_: Request, exc: ValidationError) -> JSONResponse:
        return error_json(422, validation_items(list(exc.errors()), ["body"]))

    @app.exception_handler(PlannerError)
    async def _planner(_: Request, exc: PlannerError) -> JSONResponse:
        err = planner_error(exc, ["body"])
        return error_json(err.status, [{"loc": err.loc, "msg": err.msg, "type": err.type}])

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        msg = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        headers = getattr(exc, "headers", None)
        if exc.status_code == 400:  # FastAPI's "error parsing the body": the body is invalid
            return error_json(422, [{"loc": ["body"], "msg": msg, "type": "invalid_body"}])
        if exc.status_code == 405:  # Allow lists every method of the path, not the first
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return error_json(
            exc.status_code,
            [{"loc": [], "msg": msg, "type": _STATUS_TYPES.get(exc.status_code, "error")}],
            headers,
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_json(
            500, [{"loc": [], "msg": "internal error; see the service log", "type": "internal"}]
        )
