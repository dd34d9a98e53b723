"""Builders of cluster topologies: the shipped examples, benchmarks and random test graphs.

``python -m syncplan.planner.examples OUTDIR`` writes every example topology as JSON.
"""

from __future__ import annotations

import random
from typing import Any

NVLINK_GBPS = 300.0  # per GPU to the NVSwitch, per direction (A100-class)
PCIE_GBPS = 25.0  # PCIe gen4 x16, per direction
LAT_NVLINK, LAT_PCIE, LAT_NET = 0.5, 0.5, 1.0  # microseconds


class TopologyBuilder:
    """Accumulates nodes and links in the topology file format (docs/formats.md)."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []

    def node(self, nid: str, kind: str, host: str | None = None) -> str:
        entry: dict[str, Any] = {"id": nid, "kind": kind}
        if host is not None:
            entry["host"] = host
        self.nodes.append(entry)
        return nid

    def link(self, src: str, dst: str, bw: float, lat: float, kind: str) -> None:
        self.links.append(
            {"src": src, "dst": dst, "bandwidth_GBps": bw, "latency_us": lat, "kind": kind}
        )

    def dgx_host(self, host: str, gpus: int = 8, nic_GBps: list[float] | None = None) -> list[str]:
        """An NVSwitch host: GPUs on one NVSwitch; GPU pairs and NICs under PCIe switches.

        ``nic_GBps`` lists the NICs' rates; NIC j sits under the PCIe switch of GPU
        ``j * gpus // len(nics)``. Returns the NIC ids.
        """
        nic_GBps = nic_GBps if nic_GBps is not None else [12.5]
        nvs = self.node(f"{host}/nvswitch0", "nvswitch", host)
        cpu = self.node(f"{host}/cpu_socket0", "cpu_socket", host)
        switches = []
        for s in range((gpus + 1) // 2):
            sw = self.node(f"{host}/pcie_switch{s}", "pcie_switch", host)
            self.link(sw, cpu, PCIE_GBPS, LAT_PCIE, "pcie")
            switches.append(sw)
        for g in range(gpus):
            gid = self.node(f"{host}/gpu{g}", "gpu", host)
            self.link(gid, nvs, NVLINK_GBPS, LAT_NVLINK, "nvlink")
            self.link(gid, switches[g // 2], PCIE_GBPS, LAT_PCIE, "pcie")
        nics = []
        for j, _rate in enumerate(nic_GBps):
            nic = self.node(f"{host}/nic{j}", "nic", host)
            self.link(nic, switches[(j * gpus // len(nic_GBps)) // 2], PCIE_GBPS, LAT_PCIE, "pcie")
            nics.append(nic)
        return nics

    def pcie_host(self, host: str, gpus: int = 4, nic_GBps: list[float] | None = None) -> list[str]:
        """A PCIe-only host: GPU pairs under PCIe switches joined by the CPU socket."""
        nic_GBps = nic_GBps if nic_GBps is not None else [12.5, 12.5]
        cpu = self.node(f"{host}/cpu_socket0", "cpu_socket", host)
        switches = []
        for s in range((gpus + 1) // 2):
            sw = self.node(f"{host}/pcie_switch{s}", "pcie_switch", host)
            self.link(sw, cpu, PCIE_GBPS, LAT_PCIE, "pcie")
            switches.append(sw)
        for g in range(gpus):
            gid = self.node(f"{host}/gpu{g}", "gpu", host)
            self.link(gid, switches[g // 2], PCIE_GBPS, LAT_PCIE, "pcie")
        nics = []
        for j, _rate in enumerate(nic_GBps):
            nic = self.node(f"{host}/nic{j}", "nic", host)
            self.link(nic, switches[j % len(switches)], PCIE_GBPS, LAT_PCIE, "pcie")
            nics.append(nic)
        return nics

    def to_dict(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "links": self.links}


def dgx_cluster(
    hosts: int,
    nics_per_host: int = 1,
    nic_GBps: float = 12.5,
    slow: dict[int, float] | None = None,
    gpus: int = 8,
) -> dict[str, Any]:
    """Hosts of ``gpus`` GPUs; one NIC -> one switch, several NICs -> one rail switch per NIC.

    ``slow`` maps a host index to the rate of all its NICs (a slow or degraded host).
    """
    b = TopologyBuilder()
    rails = [
        b.node(f"rail{j}" if nics_per_host > 1 else "switch0", "switch")
        for j in range(nics_per_host)
    ]
    for h in range(hosts):
        rate = (slow or {}).get(h, nic_GBps)
        nics = b.dgx_host(f"h{h}", gpus, [rate] * nics_per_host)
        for j, nic in enumerate(nics):
            b.link(nic, rails[j], rate, LAT_NET, "network")
    return b.to_dict()


def two_tier(
    racks: int = 2,
    hosts_per_rack: int = 4,
    gpus: int = 4,
    nic_GBps: float = 12.5,
    oversubscription: float = 2.0,
) -> dict[str, Any]:
    """PCIe hosts under top-of-rack switches, ToRs joined by an oversubscribed spine."""
    b = TopologyBuilder()
    spine = b.node("spine0", "switch")
    for r in range(racks):
        tor = b.node(f"tor{r}", "switch")
        b.link(tor, spine, hosts_per_rack * nic_GBps / oversubscription, LAT_NET, "network")
        for k in range(hosts_per_rack):
            host = f"r{r}h{k}"
            for nic in b.pcie_host(host, gpus, [nic_GBps]):
                b.link(nic, tor, nic_GBps, LAT_NET, "network")
    return b.to_dict()


def mixed_pcie_cluster(rates: list[float], gpus: int = 4) -> dict[str, Any]:
    """PCIe hosts with one NIC each at the given rates, on one switch."""
    b = TopologyBuilder()
    sw = b.node("switch0", "switch")
    for h, rate in enumerate(rates):
        for nic in b.pcie_host(f"h{h}", gpus, [rate]):
            b.link(nic, sw, rate, LAT_NET, "network")
    return b.to_dict()


def star(rates: list[float], latency_us: float = 1.0) -> dict[str, Any]:
    """One CPU rank per host, each host linked to one switch at its rate."""
    b = TopologyBuilder()
    sw = b.node("switch0", "switch")
    for h, rate in enumerate(rates):
        cpu = b.node(f"h{h}/cpu0", "cpu", f"h{h}")
        b.link(cpu, sw, rate, latency_us, "network")
    return b.to_dict()


def degraded_rail(
    hosts: int = 4, degraded_host: int = 1, degraded_rail: int = 2, factor: float = 0.25
) -> dict[str, Any]:
    """A rail-optimised cluster whose one NIC-to-rail link runs at ``factor`` of its rate."""
    topo = dgx_cluster(hosts, nics_per_host=8, nic_GBps=25.0)
    for link in topo["links"]:
        if link["src"] == f"h{degraded_host}/nic{degraded_rail}" and link["kind"] == "network":
            link["bandwidth_GBps"] *= factor
    return topo


def random_topology(seed: int, max_hosts: int = 5, max_gpus: int = 4) -> dict[str, Any]:
    """A random valid cluster: hosts of random size and NIC rates, some NVSwitch, some PCIe."""
    rng = random.Random(seed)
    b = TopologyBuilder()
    switches = [b.node(f"sw{k}", "switch") for k in range(rng.randint(1, 2))]
    if len(switches) == 2:
        b.link(switches[0], switches[1], rng.choice([6.25, 12.5, 25.0]), LAT_NET, "network")
    for h in range(rng.randint(1, max_hosts)):
        gpus = rng.randint(1, max_gpus)
        rates = [rng.choice([3.125, 6.25, 12.5, 25.0]) for _ in range(rng.randint(1, 2))]
        nics = (b.dgx_host if rng.random() < 0.5 else b.pcie_host)(f"h{h}", gpus, rates)
        for nic, rate in zip(nics, rates, strict=True):
            b.link(nic, rng.choice(switches), rate, LAT_NET * rng.uniform(0.5, 3), "network")
    return b.to_dict()


EXAMPLES: dict[str, Any] = {
    "dgx-1x8": lambda: dgx_cluster(1),
    "dgx-2x8-1nic": lambda: dgx_cluster(2),
    "dgx-4x8-1nic": lambda: dgx_cluster(4),
    "dgx-16x8-1nic": lambda: dgx_cluster(16),
    "dgx-4x8-rail": lambda: dgx_cluster(4, nics_per_host=8, nic_GBps=25.0),
    "dgx-16x8-rail": lambda: dgx_cluster(16, nics_per_host=8, nic_GBps=25.0),
    "two-tier-oversubscribed": lambda: two_tier(),
    "one-slow-nic": lambda: mixed_pcie_cluster([12.5, 12.5, 12.5, 3.125]),
    "mixed-100-25": lambda: mixed_pcie_cluster([12.5] * 4 + [3.125] * 4),
    "degraded-rail": lambda: degraded_rail(),
    "star-one-slow": lambda: star([12.5, 12.5, 12.5, 3.125]),
}
DEMO = "one-slow-nic"
