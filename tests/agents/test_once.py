"""``Agent.once`` with peers that come up late: two in-process agents over loopback sockets."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from syncplan.agents.config import AgentConfig
from syncplan.agents.daemon import Agent
from syncplan.agents.probe import ProbeSettings
from syncplan.core.report import HostReport

FAST = ProbeSettings(duration_s=0.1, ping_count=3)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(me: str, peer: str, ports: dict[str, int], tmp: Path, wait_s: float) -> AgentConfig:
    return AgentConfig(
        host=me,
        peers={peer: ("127.0.0.1", ports[peer])},
        bind="127.0.0.1",
        probe_port=ports[me],
        http_port=None,
        spool_dir=str(tmp / me),
        probe=FAST,
        slot_s=0.8,
        gpu_copy=False,
        peer_wait_s=wait_s,
    )


def test_once_waits_for_a_late_peer(tmp_path: Path) -> None:
    ports = {"a": _free_port(), "b": _free_port()}
    reports: dict[str, HostReport] = {}
    agents: list[Agent] = []

    def run(me: str, peer: str) -> None:
        agent = Agent(_config(me, peer, ports, tmp_path, wait_s=20.0)).start(loops=False)
        agents.append(agent)
        try:
            reports[me] = agent.once()
        finally:
            agent.stop()

    first = threading.Thread(target=run, args=("a", "b"))
    first.start()
    # "a" would start its cycle at once; "b" comes up two slots later.
    threading.Event().wait(1.6)
    second = threading.Thread(target=run, args=("b", "a"))
    second.start()
    first.join(60)
    second.join(60)
    assert not first.is_alive() and not second.is_alive()
    assert [p.peer_host for p in reports["a"].peers] == ["b"]
    assert [p.peer_host for p in reports["b"].peers] == ["a"]


def test_once_gives_up_on_a_dead_peer(tmp_path: Path) -> None:
    ports = {"a": _free_port(), "b": _free_port()}
    agent = Agent(_config("a", "b", ports, tmp_path, wait_s=0.5)).start(loops=False)
    try:
        assert agent.wait_for_peers(0.5) == ["b"]
        rep = agent.once()
    finally:
        agent.stop()
    assert rep.peers == []
