"""Stated limits of every request, and the middleware that refuses bodies over the size
limit with a 413 JSON error.

Names that a request may use (``algorithm``, ``collective``) come from the planner's own
tables, so an algorithm added to ``planner.algorithms.ALGORITHMS`` is accepted here at once.
"""

from __future__ import annotations

import json

from starlette.datastructures import State
from starlette.types import ASGIApp, Receive, Scope, Send
from syncplan.api.asgi import BodyTooLarge, read_body, replay
from syncplan.api.identity import scopes_of, token_host
from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.plan import COLLECTIVES
from syncplan.planner.rooted import ROOTED_ALGORITHMS, ROOTED_COLLECTIVES
from syncplan.planner.sizes import parse_size

MAX_RANKS = 65536
MAX_BUCKETS = 4096
MAX_DISTINCT_SIZES = 64  # distinct bucket sizes of one job: each is a solve
MAX_SIZE_BYTES = 2**53  # sizes are exact in a JSON number (double) up to here
MAX_FABRIC_NODES = 100_000
MAX_FABRIC_LINKS = 400_000
MAX_SEQ_AHEAD_MS = 86_400_000  # a report's seq may lead the service's clock (unix ms) by a day
ALGORITHM_NAMES: tuple[str, ...] = ("auto", *ALGORITHMS)
COLLECTIVE_NAMES: tuple[str, ...] = tuple(COLLECTIVES)
# a plan request may also ask for a broadcast or reduce from a root, and its algorithms
PLAN_COLLECTIVE_NAMES: tuple[str, ...] = (*COLLECTIVES, *ROOTED_COLLECTIVES)
PLAN_ALGORITHM_NAMES: tuple[str, ...] = (
    *ALGORITHM_NAMES,
    *(a for a in ROOTED_ALGORITHMS if a not in ALGORITHM_NAMES),
)


def check_size_text(text: str) -> str:
    """``text`` unchanged if it names a whole, positive number of bytes up to
    MAX_SIZE_BYTES (``"256MiB"``); ValueError saying why otherwise."""
    value = parse_size(text)  # RequestError is a ValueError
    if value > MAX_SIZE_BYTES:
        raise ValueError(f"size {text!r} is {value} bytes, more than the limit of 2**53")
    return text


_WRITES = frozenset({"PUT", "POST", "PATCH", "DELETE"})
_UNAUTHORIZED = json.dumps(
    {
        "detail": [
            {
                "loc": ["header", "Authorization"],
                "type": "unauthorized",
                "msg": "missing or invalid bearer token",
            }
        ]
    }
).encode()


def _known_token(state: State, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request carries a token of this service (any scope)."""
    value = next((v for k, v in headers if k == b"authorization"), b"").decode("latin-1")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    return (
        scopes_of(state.token_scopes, token) is not None
        or token_host(state.agent_secret, token) is not None
    )


def _routed(scope: Scope) -> bool:
    """Whether a route takes this method on this path (else the app answers 404/405)."""
    from starlette.routing import Match

    return any(route.matches(scope)[0] == Match.FULL for route in scope["app"].router.routes)


class BodyLimitMiddleware:
    """Refuses a write without a token of this service (401) before reading its body, then
    reads the body up to ``limit`` bytes before the app sees it; more is a 413. Every
    write route needs a token, so no unauthenticated body is ever read or parsed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def _refuse(self, send: Send, size: str) -> None:
        body = json.dumps(
            {
                "detail": [
                    {
                        "loc": ["body"],
                        "type": "too_large",
                        "msg": (
                            f"request body of {size} bytes exceeds the limit of {self.limit} bytes"
                        ),
                    }
                ]
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        if (
            scope["method"] in _WRITES
            and not _known_token(scope["app"].state, scope.get("headers", []))
            and _routed(scope)
        ):
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(_UNAUTHORIZED)).encode()),
                        (b"www-authenticate", b"Bearer"),
                        (b"connection", b"close"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": _UNAUTHORIZED})
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.limit:
                    await self._refuse(send, str(declared))
                    return
        try:
            body = await read_body(receive, self.limit)
        except BodyTooLarge:
            await self._refuse(send, f"more than {self.limit}")
            return
        if body is not None:
            await self.app(scope, replay(body, receive), send)
