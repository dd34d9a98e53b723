"""A real HTTP server on a loopback port, serving canned job plans (the service's role)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class PlanServer:
    """``routes[path]`` is a list of (status, body) or (status, body, headers) answers, the
    last one repeating; requests without ``Authorization: Bearer {token}`` get 401. ``hits``
    counts requests by path (the query string left out), ``queries`` lists each request's
    query string and ``if_none_match`` its If-None-Match header (None when absent)."""

    def __init__(
        self,
        routes: dict[str, list[tuple[int, Any]]],
        token: str = "tok",
        answer: Callable[[str, str], tuple[int, Any]] | None = None,
    ) -> None:
        """``answer(path, query)``, when given, answers every authorised request instead of
        ``routes``."""
        self.routes = routes
        self.hits: dict[str, int] = {}
        self.queries: list[str] = []
        self.if_none_match: list[str | None] = []
        self.token = token
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                n = server.hits.get(path, 0)
                server.hits[path] = n + 1
                server.queries.append(query)
                server.if_none_match.append(self.headers.get("If-None-Match"))
                extra: dict[str, str] = {}
                if self.headers.get("Authorization") != f"Bearer {server.token}":
                    status, body = 401, {"detail": "missing or wrong token"}
                elif answer is not None:
                    status, body = answer(path, query)
                elif path not in server.routes:
                    status, body = 404, {"detail": "no such job"}
                else:
                    answers = server.routes[path]
                    status, body, *rest = answers[min(n, len(answers) - 1)]
                    extra = rest[0] if rest else {}
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[PlanServer]:
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()
            thread.join(5)
