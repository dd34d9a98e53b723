"""A real HTTP server on a loopback port answering job plans and their ``?rank=`` slices."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from syncplan.core.compact import compact_document
from syncplan.core.slice import slice_document


class SliceServer:
    """``plans[job]`` is the job's plan document; ``odd[job][endpoint]`` another plan whose
    slice that endpoint gets instead. ``fetches`` lists (job, rank or None, format) per
    request."""

    def __init__(
        self, plans: dict[str, dict[str, Any]], odd: dict[str, dict[str, Any]] | None = None
    ) -> None:
        self.fetches: list[tuple[str, str | None, str]] = []
        server = self
        odd = odd or {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                q = {k: v[-1] for k, v in parse_qs(query).items()}
                job = path.removeprefix("/v1/jobs/").removesuffix("/plan")
                rank, form = q.get("rank"), q.get("format", "full")
                server.fetches.append((job, rank, form))
                status, body = 404, {"detail": "no such job"}
                if self.headers.get("Authorization") != "Bearer tok":
                    status, body = 401, {"detail": "missing or wrong token"}
                elif job in plans:
                    doc = odd.get(job, {}).get(rank or "", plans[job])
                    status, body = 200, doc if rank is None else slice_document(doc, rank)
                    if form == "compact":
                        body = compact_document(body)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[SliceServer]:
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()
            thread.join(5)
