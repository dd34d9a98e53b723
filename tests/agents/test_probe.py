"""Probe sessions over real loopback sockets."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
from syncplan.agents.probe import (
    PeerBusy,
    ProbeError,
    ProbeServer,
    ProbeSettings,
    hello,
    probe_peer,
)

FAST = ProbeSettings(duration_s=0.2, ping_count=5)


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    got: list = []
    s = ProbeServer("b", "127.0.0.1", 0, on_result=got.append)
    s.results = got  # type: ignore[attr-defined]
    try:
        yield s
    finally:
        s.stop()


def test_session_measures_both_directions(server) -> None:  # type: ignore[no-untyped-def]
    assert hello("127.0.0.1", server.port) == "b"
    r = probe_peer("a", "b", "127.0.0.1", server.port, FAST, lock=threading.Lock())
    assert r.peer_host == "b" and r.bandwidth_GBps > 0 and r.latency_us > 0
    deadline = time.time() + 5
    while not server.results and time.time() < deadline:
        time.sleep(0.01)
    (back,) = server.results
    assert back.peer_host == "a" and back.bandwidth_GBps > 0
    assert back.latency_us == pytest.approx(r.latency_us)
    deadline = time.time() + 5  # the responder releases its lock right after its last reply
    while server.lock.locked() and time.time() < deadline:
        time.sleep(0.01)
    assert not server.lock.locked()


def test_busy_peer_and_busy_self(server) -> None:  # type: ignore[no-untyped-def]
    with server.lock, pytest.raises(PeerBusy):
        probe_peer("a", "b", "127.0.0.1", server.port, FAST)
    mine = threading.Lock()
    with mine, pytest.raises(PeerBusy):
        probe_peer("a", "b", "127.0.0.1", server.port, FAST, lock=mine)


def test_unreachable_peer() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(ProbeError):
            probe_peer("a", "b", "127.0.0.1", port, FAST, connect_timeout_s=1)


def test_garbage_does_not_hurt_the_server(server) -> None:  # type: ignore[no-untyped-def]
    for junk in (b"not json\n", b"[1,2]\n", b'{"op":"up","token":"nope"}\n', b"x" * 5000):
        with socket.create_connection(("127.0.0.1", server.port), timeout=2) as c:
            c.sendall(junk)
            c.shutdown(socket.SHUT_WR)
            with contextlib.suppress(ConnectionResetError):  # too long: closed unread
                c.recv(100)
    assert probe_peer("a", "b", "127.0.0.1", server.port, FAST).bandwidth_GBps > 0


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="duration"):
        ProbeSettings(duration_s=0)
    with pytest.raises(ValueError, match="ping_count"):
        ProbeSettings(ping_count=0)
