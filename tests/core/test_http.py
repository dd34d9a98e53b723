"""core.http against a real HTTP server on 127.0.0.1: retries, Retry-After, token, JSON."""

from __future__ import annotations

import json
import random
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from syncplan.core.http import Backoff, HttpClient, HttpError, retry_after


class Canned:
    """Answers each request with the next of ``answers`` (status, body, headers), the last
    repeating; records each request's method, path, Authorization header and body."""

    def __init__(self, answers: list[tuple[int, Any, dict[str, str]]]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str, str | None, Any]] = []
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size)) if size else None
                n = len(canned.seen)
                canned.seen.append(
                    (self.command, self.path, self.headers.get("Authorization"), body)
                )
                status, out, headers = canned.answers[min(n, len(canned.answers) - 1)]
                data = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[Canned] = []

    def start(*answers: tuple[int, Any] | tuple[int, Any, dict[str, str]]) -> Canned:
        srv = Canned([(a[0], a[1], a[2] if len(a) > 2 else {}) for a in answers])
        threading.Thread(target=srv.httpd.serve_forever, daemon=True).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def client(url: str, **kw: Any) -> tuple[HttpClient, list[float]]:
    slept: list[float] = []
    kw.setdefault("backoff", Backoff(0.01, max_s=1.0, jitter=False))
    return HttpClient(url, token="tok", timeout_s=2.0, sleep=slept.append, **kw), slept


def test_retries_5xx_and_429_then_returns_json_with_the_token(serve: Any) -> None:
    srv = serve((503, {}), (429, {}), (200, {"ok": 1}))
    http, slept = client(srv.url + "/v1/", retries=3)
    with http:
        body, resp = http.request_json("PUT", "/jobs/a", json={"x": 2})
    assert body == {"ok": 1} and resp.status_code == 200
    assert slept == [0.01, 0.02]  # backoff doubles
    assert [s[:2] for s in srv.seen] == [("PUT", "/v1/jobs/a")] * 3
    assert {s[2] for s in srv.seen} == {"Bearer tok"} and srv.seen[-1][3] == {"x": 2}


def test_retry_after_is_honoured_and_capped(serve: Any) -> None:
    srv = serve((429, {}, {"Retry-After": "2"}), (503, {}, {"Retry-After": "999"}), (200, {}))
    http, slept = client(srv.url, retries=2, retry_after_max_s=5.0)
    with http:
        assert http.request("GET", "x").status_code == 200
    assert slept == [2.0, 5.0]


def test_gives_up_naming_the_last_failure(serve: Any) -> None:
    srv = serve((500, {"detail": "boom"}))
    http, slept = client(srv.url, retries=2, backoff=None)
    with http, pytest.raises(HttpError, match=r"GET .*/p failed after 3 attempts: HTTP 500") as e:
        http.request("GET", "p")
    assert e.value.status == 500 and slept == [0.0, 0.0] and len(srv.seen) == 3
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    http, _ = client(dead, retries=1)
    with http, pytest.raises(HttpError, match="after 2 attempts: ConnectError") as e:
        http.request("GET", "p")
    assert e.value.response is None and e.value.status is None


def test_client_errors_are_not_retried_and_bad_json_is_named(serve: Any) -> None:
    srv = serve((404, {"detail": "no such job"}), (200, b"not json"))
    http, _ = client(srv.url, retries=3, retry_statuses={401})
    with http:
        with pytest.raises(HttpError, match=r"HTTP 404: .*no such job") as e:
            http.request_json("GET", "a")
        assert e.value.status == 404 and len(srv.seen) == 1
        with pytest.raises(HttpError, match="not JSON"):
            http.request_json("GET", "a")
        assert http.retryable(401) and http.retryable(429) and not http.retryable(409)


def test_retry_after_parsing_and_backoff() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10
    assert retry_after({}) is None and retry_after({"retry-after": "soon"}) is None
    assert retry_after({"retry-after": "-4"}) == 0.0
    b = Backoff(1.0, 2.0, 8.0)
    rng = random.Random(1)
    for attempt, cap in [(0, 1.0), (2, 4.0), (10, 8.0)]:
        assert all(cap / 2 <= b.delay(attempt, rng) <= cap for _ in range(20))
    assert Backoff(1.0, 3.0, 100.0, jitter=False).delay(2) == 9.0
    with pytest.raises(ValueError):
        Backoff(base_s=0)
    with pytest.raises(ValueError):
        HttpClient("http://x", retries=-1)
