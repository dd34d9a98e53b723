"""JSON bodies kept serialized, plain and gzip-compressed, and served as they are."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from fastapi import Request, Response

GZIP_LEVEL = 5
GZIP_MIN_BYTES = 1024


@dataclass(frozen=True)
class Body:
    """A serialized JSON document, its weak ETag and, when it is worth it, its gzip
    encoding."""

    raw: bytes
    gz: bytes | None = None
    etag: str = ""

    @classmethod
    def of(cls, raw: bytes, level: int = GZIP_LEVEL) -> Body:
        """Hash and compress once (call from a worker thread for large bodies)."""
        etag = f'W/"{hashlib.sha256(raw).hexdigest()[:32]}"'
        if len(raw) < GZIP_MIN_BYTES:
            return cls(raw, None, etag)
        return cls(raw, gzip.compress(raw, level, mtime=0), etag)

    @property
    def size(self) -> int:
        return len(self.raw) + len(self.gz or b"")


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """Whether an If-None-Match value names ``etag`` (weak comparison) or is ``*``."""
    if not if_none_match or not etag:
        return False
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or etag.removeprefix("W/") in tags


def negotiate(
    body: Body, method: str, headers: Mapping[str, str], status: int = 200
) -> tuple[int, bytes, dict[str, str]]:
    """(status, payload, extra headers) for ``body`` given the request's method and
    (lower-case) headers: gzip when accepted, 304 for a GET whose If-None-Match matches."""
    extra = {"etag": body.etag} if body.etag else {}
    if body.gz is not None:
        extra["vary"] = "Accept-Encoding"
    if (
        status == 200
        and method in ("GET", "HEAD")
        and not_modified(headers.get("if-none-match"), body.etag)
    ):
        return 304, b"", extra
    if body.gz is not None and "gzip" in headers.get("accept-encoding", "").lower():
        extra["content-encoding"] = "gzip"
        return status, body.gz, extra
    return status, body.raw, extra


def respond(request: Request, body: Body, status: int = 200) -> Response:
    """The stored bytes, gzip-encoded when the client accepts it; 304 without a body when
    the client already holds them (If-None-Match)."""
    status, payload, extra = negotiate(body, request.method, request.headers, status)
    if status == 304:
        return Response(status_code=304, headers=extra)
    return Response(payload, status_code=status, media_type="application/json", headers=extra)
