"""The host report an agent sends to ``PUT /v1/agents/{host}/report``.

This module is the single definition of the report format; the agent builds it and the
service validates it. Units follow docs/formats.md: GB/s (10^9 bytes/s, per
direction), microseconds, bytes, seconds.

Local endpoint names inside a report are host-relative (``gpu0``, ``nic1``, ``cpu0``,
``nvswitch0``, ``pcie_switch0``); the service prefixes them with ``{host}/`` to form the
cluster-wide node ids of the topology file (``h0/gpu0``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
)

REPORT_SCHEMA_VERSION = 1

# Limits of one report (the service answers 422 naming the field beyond them). A real host
# has tens of nodes; these leave room for large NVSwitch systems while keeping each check
# cheap. Numbers must be finite (JSON ``Infinity``/``NaN``/``1e400`` are refused).
MAX_NODES = 4096
MAX_LINKS = 16384
MAX_PEERS = 4096
MAX_GPUS = 1024
MAX_NICS = 1024
MIN_BANDWIDTH_GBPS = 1e-6  # 1 kB/s: anything slower is a measurement error
MAX_BANDWIDTH_GBPS = 1e6  # 1 PB/s
MAX_LATENCY_US = 1e8  # 100 s
HOST_PATTERN = r"^[A-Za-z0-9_.:-]+$"

LocalKind = Literal["gpu", "cpu", "nic", "nvswitch", "pcie_switch", "cpu_socket"]
HostName = Annotated[str, Field(min_length=1, max_length=128, pattern=HOST_PATTERN)]
LocalId = Annotated[str, Field(min_length=1, max_length=128, pattern=HOST_PATTERN)]
Text = Annotated[str, Field(max_length=256)]
# Numbers are strict: "12" or true is refused where the schema says number (JSON integers
# are accepted for floats).
Bandwidth = Annotated[float, Field(strict=True, ge=MIN_BANDWIDTH_GBPS, le=MAX_BANDWIDTH_GBPS)]
Latency = Annotated[float, Field(strict=True, ge=0, le=MAX_LATENCY_US)]
Numa = Annotated[StrictInt, Field(ge=-1, le=4096)]


def _iso_time(value: object) -> object:
    """Times are ISO 8601 strings in JSON (a bare number is refused, as the schema says)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError("expected an ISO 8601 date-time string")
    return value


Time = Annotated[datetime, BeforeValidator(_iso_time)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class GPUInfo(_Strict):
    """One GPU as NVML sees it."""

    index: StrictInt = Field(ge=0, le=MAX_GPUS * 64)
    uuid: Text
    name: Text
    pci_bus_id: Text
    numa_node: Numa | None = None
    pcie_gen: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    pcie_width: Annotated[StrictInt, Field(ge=1, le=1024)] | None = None
    pcie_bandwidth_GBps: Bandwidth | None = None
    nvlink_count: StrictInt = Field(default=0, ge=0, le=1024)


class NICInfo(_Strict):
    """One network interface (Ethernet from /sys/class/net, or an InfiniBand port)."""

    name: Text
    kind: Literal["ethernet", "infiniband", "roce", "other"] = "ethernet"
    speed_GBps: Bandwidth | None = None
    state: Text = "unknown"
    pci_address: Text | None = None
    numa_node: Numa | None = None
    closest_gpus: list[Annotated[StrictInt, Field(ge=0, le=MAX_GPUS * 64)]] = Field(
        default_factory=list, max_length=MAX_GPUS
    )
    address: Text | None = None


class LocalNode(_Strict):
    """A node inside the host: ``id`` is host-relative, for example ``gpu3`` or ``nvswitch0``."""

    id: LocalId
    kind: LocalKind


class LocalLink(_Strict):
    """A link between two local nodes, full duplex unless ``directed``."""

    src: LocalId
    dst: LocalId
    kind: Annotated[str, Field(min_length=1, max_length=64)] = "pcie"
    bandwidth_GBps: Bandwidth
    latency_us: Latency = 0.0
    measured_bandwidth_GBps: Bandwidth | None = None
    directed: StrictBool = False


class PeerMeasurement(_Strict):
    """Throughput and latency measured from this host to ``peer_host``."""

    peer_host: HostName
    bandwidth_GBps: Bandwidth
    latency_us: Latency
    nic: LocalId | None = None
    measured_at: Time | None = None
    samples: StrictInt = Field(default=1, ge=1, le=2**31)


class HostReport(_Strict):
    """Everything one host reports; ``seq`` grows by at least one with each new report."""

    schema_version: StrictInt = Field(default=REPORT_SCHEMA_VERSION, ge=0, le=1000)
    host: HostName
    seq: StrictInt = Field(ge=0, le=2**63 - 1)  # stored as a signed 64-bit integer
    generated_at: Time | None = None
    agent_version: Text = "unknown"
    endpoint_kind: Literal["gpu", "cpu"] = "gpu"
    gpus: list[GPUInfo] = Field(default_factory=list, max_length=MAX_GPUS)
    nics: list[NICInfo] = Field(default_factory=list, max_length=MAX_NICS)
    nodes: list[LocalNode] = Field(default_factory=list, max_length=MAX_NODES)
    links: list[LocalLink] = Field(default_factory=list, max_length=MAX_LINKS)
    peers: list[PeerMeasurement] = Field(default_factory=list, max_length=MAX_PEERS)
    probe_address: Text | None = None
