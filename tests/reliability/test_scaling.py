"""Two ``syncplan serve --reuse-port`` processes on one port and one store: both start,
every report sent over fresh connections (spread by the kernel) is stored, and each process
sees the other's writes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import ServerProcess, auth, free_port, host_report


@pytest.mark.slow
def test_two_processes_one_port(tmp_path: Path) -> None:
    port = free_port()
    url = f"sqlite:///{tmp_path / 's.db'}"
    servers = [
        ServerProcess(url, log=tmp_path / f"s{k}.log", extra_args=["--reuse-port"])
        for k in range(2)
    ]
    try:
        for s in servers:
            s.start(port=port)
        assert all(s.proc is not None and s.proc.poll() is None for s in servers)
        for i in range(40):  # a new connection each: the kernel picks the process
            r = httpx.put(
                f"http://127.0.0.1:{port}/v1/agents/n{i}/report",
                json=host_report(f"n{i}", 1),
                headers=auth("agent"),
                timeout=30,
            )
            assert r.status_code == 200, r.text
        time.sleep(1.2)  # SYNCPLAN_SYNC_INTERVAL_S: each process looks for the other's writes
        for _ in range(10):
            hosts = httpx.get(
                f"http://127.0.0.1:{port}/v1/agents", headers=auth("job"), timeout=30
            ).json()["hosts"]
            assert len(hosts) == 40
    finally:
        for s in servers:
            s.stop()
