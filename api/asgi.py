"""ASGI pieces the middlewares share: read a request body once (up to a limit) and replay it
to the app, and answer with a JSON body."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import Message, Receive, Send


class BodyTooLarge(Exception):
    """More than the limit arrived; ``str()`` is the limit."""


async def read_body(receive: Receive, limit: int | None = None) -> bytes | None:
    """The whole request body; None when the client went away first. Raises BodyTooLarge
    as soon as more than ``limit`` bytes (when given) have arrived."""
    chunks: list[bytes] = []
    total = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        total += len(chunk)
        if limit is not None and total > limit:
            raise BodyTooLarge(str(limit))
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive callable that hands ``body`` over once, then defers to ``receive``."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def send_json(
    send: Send, status: int, payload: bytes, headers: Mapping[str, str] | None = None
) -> None:
    """Answer ``status`` with the JSON ``payload`` and the extra ``headers``."""
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})
