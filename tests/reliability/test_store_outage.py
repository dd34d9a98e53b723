"""Issue 15 item 8 against a real server: with the store unreachable every data endpoint
answers 503 with Retry-After on a connection that stays open, and the service recovers
without a restart when the store is back (PostgreSQL stopped and started; SQLite locked)."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import TOKENS, ServerProcess, auth, host_report
from tests.reliability.pg import PgCluster


class RawConnection:
    """One keep-alive HTTP/1.1 connection; ``request`` fails if the server closed it."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def request(
        self, method: str, path: str, token: str, body: bytes = b""
    ) -> tuple[int, dict[str, str], bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.sock.sendall(head.encode() + body)
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        payload, self.buf = self.buf[:length], self.buf[length:]
        return int(lines[0].split()[1]), headers, payload

    def close(self) -> None:
        self.sock.close()


def _report(host: str, seq: int) -> bytes:
    return json.dumps(host_report(host, seq, peers={"h1" if host == "h0" else "h0": 10.0})).encode()


REQUESTS = [
    ("PUT", "/v1/agents/h0/report", "agent"),
    ("GET", "/v1/agents", "job"),
    ("PUT", "/v1/jobs/j2", "job"),
    ("GET", "/v1/jobs/j1/plan", "job"),
    ("POST", "/v1/plans", "job"),
    ("GET", "/v1/fabric", "admin"),
    ("GET", "/v1/topology", "job"),
]
JOB = json.dumps({"ranks": ["h0/gpu0", "h1/gpu0"], "size_bytes": 8192}).encode()


def _body(method: str, path: str, seq: int) -> bytes:
    if path.endswith("/report"):
        return _report("h0", seq)
    return JOB if method in ("PUT", "POST") else b""


def _outage_then_recovery(
    server: ServerProcess, stop: object, start: object, writes_only: bool = False
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for seq, host in enumerate(("h0", "h1"), 1):
            c.put(
                f"/v1/agents/{host}/report",
                content=_report(host, seq),
                headers={**auth("agent"), "Content-Type": "application/json"},
            ).raise_for_status()
        c.put(
            "/v1/jobs/j1", content=JOB, headers={**auth("job"), "Content-Type": "application/json"}
        ).raise_for_status()
    conn = RawConnection(server.port)
    try:
        stop()  # type: ignore[operator]
        time.sleep(1.2)  # past SYNCPLAN_SYNC_INTERVAL_S: every read goes to the store
        for i, (method, path, scope) in enumerate(REQUESTS):
            status, headers, payload = conn.request(
                method, path, TOKENS[scope], _body(method, path, 10 + i)
            )
            if path == "/v1/jobs/j1/plan" and status == 200:
                continue  # a plan already cached needs no store (its first solve writes)
            if method == "GET" and writes_only and not path.endswith("/plan"):
                assert status in (200, 404), (path, status, payload[:300])
                continue  # a locked SQLite still serves reads
            assert status == 503, (method, path, status, payload[:300])
            assert int(headers["retry-after"]) > 0
            assert headers.get("connection", "").lower() != "close"
            detail = json.loads(payload)["detail"]
            assert detail[0]["type"] == "store_unavailable", detail
        status, _, _ = conn.request("GET", "/readyz", "")
        assert status == (200 if writes_only else 503)
        start()  # type: ignore[operator]
        deadline = time.monotonic() + 30
        while True:  # same process, same connection
            status, _, payload = conn.request(
                "PUT", "/v1/agents/h0/report", TOKENS["agent"], _report("h0", 100)
            )
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert status == 200, payload[:300]
        for method, path, scope in REQUESTS[1:]:
            status, _, payload = conn.request(method, path, TOKENS[scope], _body(method, path, 0))
            assert status in (200, 404), (method, path, status, payload[:300])
    finally:
        conn.close()


@pytest.mark.slow
def test_postgresql_down_is_503_and_recovers(tmp_path: Path) -> None:
    pg = PgCluster()
    server = ServerProcess(pg.url, env={"SYNCPLAN_DB_TIMEOUT_S": "2"}, log=tmp_path / "server.log")
    try:
        server.start()
        _outage_then_recovery(server, pg.stop, pg.start)
        assert server.proc is not None and server.proc.poll() is None
    finally:
        server.stop()
        pg.remove()


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    db = tmp_path / "s.db"
    server = ServerProcess(
        f"sqlite:///{db}", env={"SYNCPLAN_DB_TIMEOUT_S": "0.3"}, log=tmp_path / "server.log"
    ).start()
    yield server, db
    server.stop()


@pytest.mark.slow
def test_sqlite_locked_is_503_and_recovers(sqlite_server: tuple[ServerProcess, Path]) -> None:
    server, db = sqlite_server
    holder: list[sqlite3.Connection] = []

    def lock() -> None:
        conn = sqlite3.connect(db, isolation_level=None, timeout=5)
        conn.execute("BEGIN EXCLUSIVE")  # WAL: other writers wait, readers go on
        conn.execute("UPDATE meta SET value = value WHERE key = 'generation'")
        holder.append(conn)

    def unlock() -> None:
        conn = holder.pop()
        conn.execute("COMMIT")
        conn.close()

    _outage_then_recovery(server, lock, unlock, writes_only=True)
