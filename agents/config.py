"""The agent's configuration: peers, ports, intervals and probe settings, validated."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from syncplan.agents.probe import ProbeSettings
from syncplan.agents.reporter import Backoff

DEFAULT_PROBE_PORT = 7470
DEFAULT_HTTP_PORT = 9470


def parse_peers(text: str | None) -> dict[str, tuple[str, int]]:
    """``h1=10.0.0.2:7470,h2=10.0.0.3`` -> {"h1": ("10.0.0.2", 7470), "h2": (..., default)}."""
    peers: dict[str, tuple[str, int]] = {}
    for item in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, addr = item.partition("=")
        if not sep or not name or not addr:
            raise ValueError(f"peer {item!r} is not NAME=ADDRESS[:PORT]")
        host, _, port = addr.rpartition(":") if ":" in addr else (addr, "", "")
        try:
            peers[name] = (host or addr, int(port) if port else DEFAULT_PROBE_PORT)
        except ValueError:
            raise ValueError(f"peer {item!r} has a bad port {port!r}") from None
    return peers


def is_loopback(address: str) -> bool:
    """Whether ``address`` is reachable only from this host."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@dataclass
class AgentConfig:
    """Everything the agent needs; validated on creation."""

    host: str
    server: str | None = None
    token: str | None = None
    interval_s: float = 30.0
    probe_interval_s: float = 300.0
    peers: dict[str, tuple[str, int]] = field(default_factory=dict)
    bind: str = "0.0.0.0"
    probe_port: int = DEFAULT_PROBE_PORT
    advertise: str | None = None
    http_bind: str = "127.0.0.1"
    http_port: int | None = DEFAULT_HTTP_PORT
    spool_dir: str = "/var/lib/syncplan-agent"
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    nvml_fixture: str | None = None
    probe: ProbeSettings = field(default_factory=ProbeSettings)
    slot_s: float | None = None
    gpu_copy: bool = True
    report_timeout_s: float = 10.0
    peer_wait_s: float = 30.0
    backoff: Backoff = field(default_factory=Backoff)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", self.host):
            raise ValueError(f"host name {self.host!r} must match [A-Za-z0-9_.:-]{{1,128}}")
        if self.interval_s <= 0 or self.probe_interval_s <= 0:
            raise ValueError("interval_s and probe_interval_s must be positive")
        if not 0 <= self.probe_port <= 65535:
            raise ValueError(f"probe port {self.probe_port} out of range")
        if self.http_port is not None and not 0 <= self.http_port <= 65535:
            raise ValueError(f"http port {self.http_port} out of range")
        if self.server and not self.server.startswith(("http://", "https://")):
            raise ValueError(f"server {self.server!r} must start with http:// or https://")
        if self.host in self.peers:
            self.peers = {k: v for k, v in self.peers.items() if k != self.host}
        if not 0 <= self.peer_wait_s <= 3600:
            raise ValueError(f"peer_wait_s must be in [0, 3600], got {self.peer_wait_s}")
        if self.slot_s is None:
            self.slot_s = round(2 * self.probe.duration_s + 3.0, 3)
        if self.http_port is not None and not is_loopback(self.http_bind) and not self.token:
            raise ValueError(
                f"--http-bind {self.http_bind} exposes the agent's control "
                "endpoints (POST /v1/probe, /v1/report): give the agent its "
                "token (--token) to protect them, or bind 127.0.0.1"
            )

    @property
    def control_token(self) -> str | None:
        """The token the control endpoints require: the agent's own token when the HTTP
        port is reachable from other hosts, none on loopback."""
        return None if is_loopback(self.http_bind) else self.token
        if self.slot_s < 2 * self.probe.duration_s + 0.5:
            raise ValueError(
                f"slot_s {self.slot_s} is too short for two {self.probe.duration_s}s transfers"
            )
