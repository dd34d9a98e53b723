"""Builders of host reports and a real service process for the service tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
TOKENS = {
    "admin": "admin-token-0123456789abcdefghijklm",
    "agent": "agent-token-0123456789abcdefghijklm",
    "job": "job-token-0123456789abcdefghijklmnop",
}
AGENT_SECRET = "agent-secret-0123456789abcdefghijklm"


def auth(scope: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[scope]}"}


def host_report(
    host: str,
    seq: int,
    gpus: int = 4,
    peers: dict[str, float] | None = None,
    latency_us: float = 10.0,
    nic: bool = True,
    cpu_only: bool = False,
) -> dict[str, Any]:
    """A report of an NVSwitch host with ``gpus`` GPUs and one NIC, measuring ``peers``
    (peer host -> GB/s)."""
    nodes: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    if not cpu_only:
        nodes.append({"id": "nvswitch0", "kind": "nvswitch"})
        nodes.append({"id": "pcie_switch0", "kind": "pcie_switch"})
        for g in range(gpus):
            nodes.append({"id": f"gpu{g}", "kind": "gpu"})
            links.append(
                {
                    "src": f"gpu{g}",
                    "dst": "nvswitch0",
                    "kind": "nvlink",
                    "bandwidth_GBps": 300.0,
                    "latency_us": 0.5,
                    "measured_bandwidth_GBps": 270.0,
                }
            )
            links.append(
                {
                    "src": f"gpu{g}",
                    "dst": "pcie_switch0",
                    "kind": "pcie",
                    "bandwidth_GBps": 25.0,
                    "latency_us": 0.5,
                }
            )
    if nic:
        nodes.append({"id": "nic0", "kind": "nic"})
        if not cpu_only:
            links.append(
                {
                    "src": "nic0",
                    "dst": "pcie_switch0",
                    "kind": "pcie",
                    "bandwidth_GBps": 25.0,
                    "latency_us": 0.5,
                }
            )
    return {
        "host": host,
        "seq": seq,
        "agent_version": "test",
        "endpoint_kind": "cpu" if cpu_only else "gpu",
        "gpus": [
            {
                "index": g,
                "uuid": f"GPU-{host}-{g}",
                "name": "Test GPU",
                "pci_bus_id": f"0000:{g + 1:02x}:00.0",
                "nvlink_count": 12,
            }
            for g in range(0 if cpu_only else gpus)
        ],
        "nics": [{"name": "eth0", "kind": "ethernet", "speed_GBps": 12.5, "state": "up"}]
        if nic
        else [],
        "nodes": nodes,
        "links": links,
        "peers": [
            {"peer_host": p, "bandwidth_GBps": bw, "latency_us": latency_us}
            for p, bw in (peers or {}).items()
        ],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``syncplan serve`` in a subprocess on a loopback port."""

    def __init__(
        self,
        database_url: str,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "SYNCPLAN_ADMIN_TOKEN": TOKENS["admin"],
            "SYNCPLAN_AGENT_TOKEN": TOKENS["agent"],
            "SYNCPLAN_JOB_TOKEN": TOKENS["job"],
            "SYNCPLAN_AGENT_SECRET": AGENT_SECRET,
            "SYNCPLAN_ALLOW_SHARED_AGENT_TOKEN": "true",
            **(env or {}),
        }
        self.log = log
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0, port: int | None = None) -> ServerProcess:
        self.port = port or free_port()
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from syncplan.cli import main; sys.exit(main())",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--database-url",
                self.database_url,
                *self.extra_args,
            ],
            cwd=REPO,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server not ready within {timeout} s; see {self.log}")

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        code = self.proc.returncode
        self.proc = None
        return code
