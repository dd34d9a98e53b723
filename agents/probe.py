"""Host-to-host probes over TCP: latency (ping-pong) and throughput in both directions.

One probe *session* measures a pair. The initiator opens a control connection; the
responder takes its host's probe lock (or answers ``busy``), so a host is never in two
sessions at once and probes never overlap on its NIC. Inside the session:

1. latency: ``count`` ping-pongs of ``size`` bytes on the control connection; median RTT / 2;
2. upload: a data connection on which the initiator sends for ``duration`` seconds; the
   responder counts bytes from the first byte to end of stream and answers the rate;
3. download: a data connection on which the responder sends for ``duration`` seconds; the
   initiator counts, and tells the responder the rate on the control connection.

Each side keeps the direction it sends in: the initiator records upload, the responder
download. Every message of the control protocol is one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("syncplan.agent.probe")

CHUNK = 256 * 1024
MAX_LINE = 4096
IO_TIMEOUT_S = 10.0


class ProbeError(Exception):
    """A probe could not complete (peer unreachable, protocol error, timeout)."""


class PeerBusy(ProbeError):
    """The peer is in another probe session; try again later."""


@dataclass(frozen=True)
class ProbeSettings:
    duration_s: float = 1.5
    ping_count: int = 20
    ping_size: int = 64

    def __post_init__(self) -> None:
        if not 0.05 <= self.duration_s <= 60:
            raise ValueError(f"probe duration_s must be in [0.05, 60], got {self.duration_s}")
        if not 1 <= self.ping_count <= 10_000:
            raise ValueError(f"ping_count must be in [1, 10000], got {self.ping_count}")
        if not 1 <= self.ping_size <= 65_536:
            raise ValueError(f"ping_size must be in [1, 65536], got {self.ping_size}")


@dataclass(frozen=True)
class PairResult:
    """What a session measured, seen from the side that records it."""

    peer_host: str
    bandwidth_GBps: float  # this host -> peer
    latency_us: float
    measured_at: float


def _send_line(sock: socket.socket, obj: dict) -> None:
    sock.sendall(json.dumps(obj, separators=(",", ":")).encode() + b"\n")


def _recv_line(sock: socket.socket) -> dict:
    buf = bytearray()
    while not buf.endswith(b"\n"):
        b = sock.recv(1)
        if not b:
            raise ProbeError("connection closed during a control message")
        buf += b
        if len(buf) > MAX_LINE:
            raise ProbeError("control message too long")
    try:
        obj = json.loads(buf)
    except ValueError as exc:
        raise ProbeError(f"bad control message: {exc}") from None
    if not isinstance(obj, dict):
        raise ProbeError("control message is not an object")
    return obj


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        b = sock.recv(n - len(buf))
        if not b:
            raise ProbeError("connection closed during ping")
        buf += b
    return bytes(buf)


def _send_for(sock: socket.socket, duration: float) -> int:
    payload = b"\0" * CHUNK
    sent = 0
    end = time.monotonic() + duration
    while time.monotonic() < end:
        sent += sock.send(payload)
    sock.shutdown(socket.SHUT_WR)
    return sent


def _count_until_eof(sock: socket.socket) -> tuple[int, float]:
    """Bytes received and seconds from the first byte to end of stream."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    first: float | None = None
    while True:
        n = sock.recv_into(view)
        if n == 0:
            break
        if first is None:
            first = time.monotonic()
        total += n
    if first is None:
        return 0, 0.0
    return total, time.monotonic() - first


def _rate(nbytes: int, seconds: float) -> float:
    if nbytes <= 0 or seconds <= 0:
        raise ProbeError("no data arrived")
    return nbytes / seconds / 1e9


class ProbeServer:
    """The responder: a TCP listener on ``bind:port`` (port 0 picks one); ``stop()`` ends it.

    ``lock`` is the host's probe lock, shared with this host's initiator; ``on_result`` gets
    each download measurement (this host -> the initiator).
    """

    def __init__(
        self,
        host_name: str,
        bind: str = "0.0.0.0",
        port: int = 0,
        *,
        lock: threading.Lock | None = None,
        on_result: Callable[[PairResult], None] | None = None,
    ) -> None:
        self.host_name = host_name
        self.lock = lock or threading.Lock()
        self.on_result = on_result
        self._sock = socket.create_server((bind, port), reuse_port=False, backlog=16)
        self._sock.settimeout(0.5)
        self.address = self._sock.getsockname()[:2]
        self._stop = threading.Event()
        self._sessions: dict[str, dict] = {}
        self._thread = threading.Thread(target=self._serve, name="probe-server", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.address[1])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self._sock.close()

    close = stop

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            threading.Thread(
                target=self._handle, args=(conn,), daemon=True, name="probe-conn"
            ).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(IO_TIMEOUT_S)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                hdr = _recv_line(conn)
                op = hdr.get("op")
                if op == "hello":
                    _send_line(conn, {"ok": True, "host": self.host_name})
                elif op == "session":
                    self._session(conn, hdr)
                elif op in ("up", "down"):
                    self._data(conn, hdr)
                else:
                    _send_line(conn, {"ok": False, "error": f"unknown op {op!r}"})
        except (OSError, ProbeError) as exc:
            log.debug("probe connection ended: %s", exc)

    def _session(self, conn: socket.socket, hdr: dict) -> None:
        if not self.lock.acquire(blocking=False):
            _send_line(conn, {"ok": False, "busy": True})
            return
        token = secrets.token_hex(8)
        try:
            peer = str(hdr.get("from", "?"))
            settings = ProbeSettings(
                float(hdr.get("duration_s", 1.0)),
                int(hdr.get("ping_count", 20)),
                int(hdr.get("ping_size", 64)),
            )
            self._sessions[token] = {"settings": settings}
            _send_line(conn, {"ok": True, "token": token, "host": self.host_name})
            for _ in range(settings.ping_count):
                conn.sendall(_recv_exact(conn, settings.ping_size))
            conn.settimeout(IO_TIMEOUT_S + 4 * settings.duration_s)
            msg = _recv_line(conn)  # the initiator's result, after both data phases
            if msg.get("op") == "result" and self.on_result:
                self.on_result(
                    PairResult(
                        peer_host=peer,
                        bandwidth_GBps=float(msg["down_GBps"]),
                        latency_us=float(msg["latency_us"]),
                        measured_at=time.time(),
                    )
                )
            _send_line(conn, {"ok": True})
        except (ValueError, KeyError, TypeError) as exc:
            with contextlib.suppress(OSError):
                _send_line(conn, {"ok": False, "error": str(exc)})
        finally:
            self._sessions.pop(token, None)
            self.lock.release()

    def _data(self, conn: socket.socket, hdr: dict) -> None:
        session = self._sessions.get(str(hdr.get("token")))
        if session is None:
            _send_line(conn, {"ok": False, "error": "no such session"})
            return
        settings: ProbeSettings = session["settings"]
        _send_line(conn, {"ok": True})
        if hdr["op"] == "up":
            nbytes, secs = _count_until_eof(conn)
            _send_line(conn, {"ok": True, "bytes": nbytes, "seconds": secs})
        else:
            _send_for(conn, settings.duration_s)
            _recv_line(conn)  # the initiator's acknowledgement closes the phase


def probe_peer(
    host_name: str,
    peer_host: str,
    address: str,
    port: int,
    settings: ProbeSettings,
    lock: threading.Lock | None = None,
    connect_timeout_s: float = 3.0,
) -> PairResult:
    """Run one session against a peer's probe server; returns this host -> peer.

    Raises :class:`PeerBusy` when either side is in another session, :class:`ProbeError`
    when the peer cannot be probed.
    """
    if lock is not None and not lock.acquire(blocking=False):
        raise PeerBusy("this host is serving another probe")
    try:
        return _session(host_name, peer_host, address, port, settings, connect_timeout_s)
    except OSError as exc:
        raise ProbeError(f"probe of {peer_host} at {address}:{port} failed: {exc}") from None
    finally:
        if lock is not None:
            lock.release()


def _connect(address: str, port: int, timeout: float) -> socket.socket:
    s = socket.create_connection((address, port), timeout=timeout)
    s.settimeout(IO_TIMEOUT_S)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def _session(
    host_name: str,
    peer_host: str,
    address: str,
    port: int,
    settings: ProbeSettings,
    connect_timeout_s: float,
) -> PairResult:
    with _connect(address, port, connect_timeout_s) as ctl:
        _send_line(
            ctl,
            {
                "op": "session",
                "from": host_name,
                "duration_s": settings.duration_s,
                "ping_count": settings.ping_count,
                "ping_size": settings.ping_size,
            },
        )
        ans = _recv_line(ctl)
        if ans.get("busy"):
            raise PeerBusy(f"{peer_host} is in another probe session")
        if not ans.get("ok"):
            raise ProbeError(f"{peer_host} refused the probe: {ans.get('error')}")
        token = ans["token"]
        ping = b"p" * settings.ping_size
        rtts: list[float] = []
        for _ in range(settings.ping_count):
            t0 = time.perf_counter()
            ctl.sendall(ping)
            _recv_exact(ctl, settings.ping_size)
            rtts.append(time.perf_counter() - t0)
        latency_us = statistics.median(rtts) / 2 * 1e6

        with _connect(address, port, connect_timeout_s) as up:
            up.settimeout(IO_TIMEOUT_S + 2 * settings.duration_s)
            _send_line(up, {"op": "up", "token": token})
            if not _recv_line(up).get("ok"):
                raise ProbeError("upload phase refused")
            _send_for(up, settings.duration_s)
            res = _recv_line(up)
        up_GBps = _rate(int(res.get("bytes", 0)), float(res.get("seconds", 0.0)))

        with _connect(address, port, connect_timeout_s) as down:
            down.settimeout(IO_TIMEOUT_S + 2 * settings.duration_s)
            _send_line(down, {"op": "down", "token": token})
            if not _recv_line(down).get("ok"):
                raise ProbeError("download phase refused")
            nbytes, secs = _count_until_eof(down)
            _send_line(down, {"ok": True})
        down_GBps = _rate(nbytes, secs)

        _send_line(ctl, {"op": "result", "down_GBps": down_GBps, "latency_us": latency_us})
        _recv_line(ctl)
    return PairResult(
        peer_host=peer_host, bandwidth_GBps=up_GBps, latency_us=latency_us, measured_at=time.time()
    )


def hello(address: str, port: int, timeout_s: float = 2.0) -> str:
    """The host name a probe server answers with (a liveness check)."""
    with _connect(address, port, timeout_s) as s:
        _send_line(s, {"op": "hello"})
        return str(_recv_line(s).get("host"))
