"""The host report an agent sends to ``PUT /v1/agents/{host}/report``.

This module is the single definition of the report format; the agent builds it and the
service validates it. Units follow ../shared/CONTRACTS.md: GB/s (10^9 bytes/s, per
direction), microseconds, bytes, seconds.

Local endpoint names inside a report are host-relative (``gpu0``, ``nic1``, ``cpu0``,
``nvswitch0``, ``pcie_switch0``); the service prefixes them with ``{host}/`` to form the
cluster-wide node ids of the topology file (``h0/gpu0``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

REPORT_SCHEMA_VERSION = 1

LocalKind = Literal["gpu", "cpu", "nic", "nvswitch", "pcie_switch", "cpu_socket"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GPUInfo(_Strict):
    """One GPU as NVML sees it."""

    index: int = Field(ge=0)
    uuid: str
    name: str
    pci_bus_id: str
    numa_node: int | None = None
    pcie_gen: int | None = Field(default=None, ge=1)
    pcie_width: int | None = Field(default=None, ge=1)
    pcie_bandwidth_GBps: float | None = Field(default=None, gt=0)
    nvlink_count: int = Field(default=0, ge=0)


class NICInfo(_Strict):
    """One network interface (Ethernet from /sys/class/net, or an InfiniBand port)."""

    name: str
    kind: Literal["ethernet", "infiniband", "roce", "other"] = "ethernet"
    speed_GBps: float | None = Field(default=None, gt=0)
    state: str = "unknown"
    pci_address: str | None = None
    numa_node: int | None = None
    closest_gpus: list[int] = Field(default_factory=list)
    address: str | None = None


class LocalNode(_Strict):
    """A node inside the host: ``id`` is host-relative, for example ``gpu3`` or ``nvswitch0``."""

    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    kind: LocalKind


class LocalLink(_Strict):
    """A link between two local nodes, full duplex unless ``directed``."""

    src: str
    dst: str
    kind: str = "pcie"
    bandwidth_GBps: float = Field(gt=0)
    latency_us: float = Field(default=0.0, ge=0)
    measured_bandwidth_GBps: float | None = Field(default=None, gt=0)
    directed: bool = False


class PeerMeasurement(_Strict):
    """Throughput and latency measured from this host to ``peer_host``."""

    peer_host: str
    bandwidth_GBps: float = Field(gt=0)
    latency_us: float = Field(ge=0)
    nic: str | None = None
    measured_at: datetime | None = None
    samples: int = Field(default=1, ge=1)


class HostReport(_Strict):
    """Everything one host reports; ``seq`` grows by at least one with each new report."""

    schema_version: int = REPORT_SCHEMA_VERSION
    host: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    seq: int = Field(ge=0, le=2**63 - 1)  # stored as a signed 64-bit integer
    generated_at: datetime | None = None
    agent_version: str = "unknown"
    endpoint_kind: Literal["gpu", "cpu"] = "gpu"
    gpus: list[GPUInfo] = Field(default_factory=list)
    nics: list[NICInfo] = Field(default_factory=list)
    nodes: list[LocalNode] = Field(default_factory=list)
    links: list[LocalLink] = Field(default_factory=list)
    peers: list[PeerMeasurement] = Field(default_factory=list)
    probe_address: str | None = None
