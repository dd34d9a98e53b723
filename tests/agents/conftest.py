"""Shared helpers for the agent tests: fixture hosts and a recording HTTP stand-in."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from syncplan.agents.discovery import Discoverer
from syncplan.agents.nvml import RecordedNVML
from syncplan.agents.procfs import ProcFS
from syncplan.agents.sysfs import SysFS
from syncplan.core.report import HostReport

FIXTURES = Path(__file__).parent / "fixtures"

# The sysfs fixture trees contain symlink cycles, as the real /sys does: never walk them.
collect_ignore = ["fixtures"]


def fixture_discoverer(name: str) -> Discoverer:
    base = FIXTURES / name
    return Discoverer(
        name,
        SysFS(base / "sys"),
        ProcFS(base / "proc"),
        lambda: RecordedNVML.load(base / "nvml.json"),
    )


@pytest.fixture(scope="module")
def hgx8() -> HostReport:
    return fixture_discoverer("hgx8").discover()


@pytest.fixture(scope="module")
def pcie4() -> HostReport:
    return fixture_discoverer("pcie4").discover()


class ReportSink:
    """A real HTTP server that accepts ``PUT /v1/agents/{host}/report`` like the service."""

    def __init__(self, port: int = 0, token: str | None = None) -> None:
        self.reports: dict[str, list[dict]] = {}
        self.auth: list[str | None] = []
        self.status = 200
        sink = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                return None

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.auth.append(self.headers.get("Authorization"))
                parts = self.path.strip("/").split("/")
                if token and self.headers.get("Authorization") != f"Bearer {token}":
                    code = 401
                elif len(parts) == 4 and parts[:2] == ["v1", "agents"] and parts[3] == "report":
                    doc = json.loads(body)
                    HostReport.model_validate(doc)
                    stored = sink.reports.setdefault(parts[2], [])
                    code = sink.status
                    if code == 200 and stored and doc["seq"] < stored[-1]["seq"]:
                        code = 409
                    if code == 200:
                        stored.append(doc)
                else:
                    code = 404
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def sink() -> Iterator[ReportSink]:
    s = ReportSink()
    try:
        yield s
    finally:
        s.stop()
