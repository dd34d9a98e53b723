"""JSON bodies kept serialized, plain and gzip-compressed, and served as they are."""

from __future__ import annotations

import gzip
from dataclasses import dataclass

from fastapi import Request, Response

GZIP_LEVEL = 5
GZIP_MIN_BYTES = 1024


@dataclass(frozen=True)
class Body:
    """A serialized JSON document and, when it is worth it, its gzip encoding."""

    raw: bytes
    gz: bytes | None = None

    @classmethod
    def of(cls, raw: bytes) -> Body:
        """Compress once (call from a worker thread for large bodies)."""
        if len(raw) < GZIP_MIN_BYTES:
            return cls(raw)
        return cls(raw, gzip.compress(raw, GZIP_LEVEL, mtime=0))

    @property
    def size(self) -> int:
        return len(self.raw) + len(self.gz or b"")


def accepts_gzip(request: Request) -> bool:
    return "gzip" in request.headers.get("accept-encoding", "").lower()


def respond(request: Request, body: Body, status: int = 200) -> Response:
    """The stored bytes, gzip-encoded when the client accepts it."""
    if body.gz is not None and accepts_gzip(request):
        return Response(body.gz, status_code=status, media_type="application/json",
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    headers = {"Vary": "Accept-Encoding"} if body.gz is not None else None
    return Response(body.raw, status_code=status, media_type="application/json",
                    headers=headers)
