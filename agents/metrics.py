"""The agent's Prometheus metrics and its small HTTP endpoint.

``GET /metrics`` (Prometheus text), ``GET /healthz``, ``GET /v1/report`` (the latest report
JSON) and ``POST /v1/probe`` (start a probe cycle now).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class AgentMetrics:
    """Metrics in their own registry, so several agents can live in one process (tests)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.probe_bandwidth = Gauge(
            "syncplan_agent_probe_bandwidth_GBps",
            "Last measured throughput to a peer host (GB/s)",
            ["peer"],
            registry=r,
        )
        self.probe_latency = Gauge(
            "syncplan_agent_probe_latency_us",
            "Last measured one-way latency to a peer host (us)",
            ["peer"],
            registry=r,
        )
        self.probe_failures = Counter(
            "syncplan_agent_probe_failures", "Probe sessions that failed", ["peer"], registry=r
        )
        self.probe_last = Gauge(
            "syncplan_agent_probe_last_timestamp_seconds",
            "When the last probe of a peer succeeded",
            ["peer"],
            registry=r,
        )
        self.gpu_copy = Gauge(
            "syncplan_agent_gpu_copy_GBps",
            "Measured GPU copy bandwidth",
            ["kind", "src", "dst"],
            registry=r,
        )
        self.report_success = Gauge(
            "syncplan_agent_last_report_success_timestamp_seconds",
            "When the service last accepted a report",
            registry=r,
        )
        self.report_seq = Gauge(
            "syncplan_agent_last_report_seq",
            "Sequence number of the last accepted report",
            registry=r,
        )
        self.report_failures = Counter(
            "syncplan_agent_report_failures", "Report deliveries that failed", registry=r
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


class AgentHTTP:
    """A threaded HTTP server for the agent's endpoints; ``stop()`` shuts it down."""

    def __init__(
        self,
        metrics: AgentMetrics,
        bind: str,
        port: int,
        report: Callable[[], dict | None],
        trigger: Callable[[], None],
        control_token: str | None = None,
    ) -> None:
        """``control_token``: when set, ``/v1/report`` and ``POST /v1/probe`` need
        ``Authorization: Bearer`` with it (``/metrics`` and ``/healthz`` stay open)."""
        outer = self
        expected = f"Bearer {control_token}".encode() if control_token else None

        def authorized(headers: object) -> bool:
            if expected is None:
                return True
            given = (headers.get("Authorization") or "").encode()  # type: ignore[attr-defined]
            return hmac.compare_digest(given, expected)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _reply(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, outer.metrics.render(), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._reply(200, b'{"ok": true}')
                elif path == "/v1/report" and not authorized(self.headers):
                    self._reply(401, b'{"error": "missing or invalid bearer token"}')
                elif path == "/v1/report":
                    rep = outer.report()
                    if rep is None:
                        self._reply(404, b'{"error": "no report yet"}')
                    else:
                        self._reply(200, json.dumps(rep).encode())
                else:
                    self._reply(404, b'{"error": "not found"}')

            def do_POST(self) -> None:
                if self.path.split("?", 1)[0] != "/v1/probe":
                    self._reply(404, b'{"error": "not found"}')
                elif not authorized(self.headers):
                    self._reply(401, b'{"error": "missing or invalid bearer token"}')
                else:
                    outer.trigger()
                    self._reply(202, b'{"ok": true, "probe": "scheduled"}')

        self.metrics = metrics
        self.report = report
        self.trigger = trigger
        self._server = ThreadingHTTPServer((bind, port), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET socket's name is (host str, port)
        self.address: tuple[str, int] = (host, port)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            daemon=True,
            name="agent-http",
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.address[1])

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self._server.server_close()

    close = stop
