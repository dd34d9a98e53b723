"""Issue 15 item 5 against a real server: a write without a valid token is refused (401)
before its body is read or parsed, so an unauthenticated large body costs nothing and
malformed JSON without a token is 401, not 400/422."""

from __future__ import annotations

import socket
import time

import httpx

from tests.api.helpers import ServerProcess, auth


def test_unauthenticated_body_is_never_read(server: ServerProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        # announce 8 MB and send none of it: the answer must not wait for the body
        s.sendall(
            b"PUT /v1/fabric HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: 8000000\r\n\r\n"
        )
        t0 = time.monotonic()
        head = s.recv(65536)
        assert head.startswith(b"HTTP/1.1 401"), head[:200]
        assert time.monotonic() - t0 < 10
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for token in ({}, {"Authorization": "Bearer wrong"}):
            r = c.put(
                "/v1/agents/h0/report",
                content=b'{"host": "h0", "seq": ',
                headers={**token, "Content-Type": "application/json"},
            )
            assert r.status_code == 401, r.text
            assert r.json()["detail"][0]["loc"] == ["header", "Authorization"]
        r = c.put(
            "/v1/agents/h0/report",
            content=b'{"host": "h0", "seq": ',
            headers={**auth("agent"), "Content-Type": "application/json"},
        )
        assert r.status_code == 422  # with a token, the body is read and refused
        assert c.get("/healthz").status_code == 200


def test_unauthenticated_large_bodies_do_not_stall_health(server: ServerProcess) -> None:
    big = b'{"nodes": [' + b'{"id": "x", "kind": "switch"},' * 250_000 + b"{}]}"
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for _ in range(3):
            r = c.put("/v1/fabric", content=big, headers={"Content-Type": "application/json"})
            assert r.status_code == 401
        assert c.get("/healthz").status_code == 200
