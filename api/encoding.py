"""JSON bodies kept serialized, plain and gzip-compressed, and served as they are."""

from __future__ import annotations

import gzip
import hashlib
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


def accepts_gzip(request: Request) -> bool:
    return "gzip" in request.headers.get("accept-encoding", "").lower()


def not_modified(request: Request, etag: str) -> bool:
    """Whether the request's If-None-Match names ``etag`` (weak comparison) or is ``*``."""
    header = request.headers.get("if-none-match")
    if not header or not etag:
        return False
    tags = {t.strip().removeprefix("W/") for t in header.split(",")}
    return "*" in tags or etag.removeprefix("W/") in tags


def respond(request: Request, body: Body, status: int = 200) -> Response:
    """The stored bytes, gzip-encoded when the client accepts it; 304 without a body when
    the client already holds them (If-None-Match)."""
    headers = {"ETag": body.etag} if body.etag else {}
    if body.gz is not None:
        headers["Vary"] = "Accept-Encoding"
    if status == 200 and request.method in ("GET", "HEAD") and not_modified(request,
                                                                              body.etag):
        return Response(status_code=304, headers=headers)
    if body.gz is not None and accepts_gzip(request):
        headers["Content-Encoding"] = "gzip"
        return Response(body.gz, status_code=status, media_type="application/json",
                        headers=headers)
    return Response(body.raw, status_code=status, media_type="application/json",
                    headers=headers)
