"""Agents without ``--peers`` learn each other from a real service and measure each other."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from syncplan.agents.directory import PeerDirectory, parse_address

from tests.api.helpers import TOKENS, ServerProcess, auth

from .test_cli import agent, free_port


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("10.0.0.2:7470", ("10.0.0.2", 7470)),
        ("[fe80::1]:80", ("fe80::1", 80)),
        ("node-3.example:1", ("node-3.example", 1)),
    ],
)
def test_parse_address(text: str, want: tuple[str, int]) -> None:
    assert parse_address(text) == want


@pytest.mark.parametrize("text", ["10.0.0.2", "10.0.0.2:", ":7470", "h:0", "h:70000", "h:x"])
def test_parse_address_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="ADDRESS:PORT"):
        parse_address(text)


def test_directory_keeps_the_last_list_when_the_service_is_down() -> None:
    d = PeerDirectory(f"http://127.0.0.1:{free_port()}", "a", None, timeout_s=1.0)
    d.peers = {"b": ("10.0.0.2", 7470)}
    assert d.refresh() == {"b": ("10.0.0.2", 7470)}


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()


def test_agents_find_peers_through_the_service(tmp_path: Path) -> None:
    srv = ServerProcess(f"sqlite:///{tmp_path / 's.db'}", log=tmp_path / "server.log").start()
    procs: list[subprocess.Popen] = []
    logs = {host: tmp_path / f"agent-{host}.log" for host in ("a", "b")}
    try:
        for host, log in logs.items():
            with log.open("w") as err:
                procs.append(
                    agent(
                        "--server",
                        srv.url,
                        "--token",
                        TOKENS["agent"],
                        "--host-name",
                        host,
                        "--bind",
                        "127.0.0.1",
                        "--probe-port",
                        str(free_port()),
                        "--http-port",
                        "-1",
                        "--interval",
                        "0.5",
                        "--probe-interval",
                        "2",
                        "--probe-duration",
                        "0.1",
                        "--slot",
                        "0.8",
                        "--no-gpu-copy",
                        "--spool-dir",
                        str(tmp_path / host),
                        stderr=err,
                    )
                )

        def learned() -> bool:  # each agent heard of the other from the service
            return all("peers from the service" in log.read_text() for log in logs.values())

        deadline, hosts = time.time() + 60, {}
        while time.time() < deadline:
            hosts = httpx.get(f"{srv.url}/v1/agents", headers=auth("job"), timeout=5).json()[
                "hosts"
            ]
            if len(hosts) == 2 and all(h["measured_GBps"] for h in hosts.values()) and learned():
                break
            time.sleep(0.5)
        assert sorted(hosts) == ["a", "b"], hosts
        for name, st in hosts.items():
            assert st["probe_address"].startswith("127.0.0.1:"), (name, st)
            assert st["measured_GBps"], (name, st)  # a measurement of the a-b link
        assert learned(), {h: log.read_text()[-2000:] for h, log in logs.items()}
    finally:
        _stop(procs)
        srv.stop()
    for log in logs.values():
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
