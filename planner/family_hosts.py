"""Topology families people own beyond "hosts with NICs on switches" (issue 12).

Every builder returns a topology dict (docs/formats.md, Topology file) and takes a degraded or
slow variant parameter. Figures (per direction) and where they come from:

- NVLink 2 (V100, DGX-1V): 25 GB/s per link, 6 links per GPU; NVLink 1 (P100, DGX-1P): 20 GB/s,
  4 links per GPU (NVIDIA's DGX-1 and Tesla V100 architecture whitepapers).
- AMD Infinity Fabric (xGMI) between MI250X-class GPUs: 50 GB/s per link (AMD CDNA 2
  whitepaper); MI300X quotes 64 GB/s.
- PCIe gen3 x16: ~12 GB/s achievable (15.75 GB/s raw); gen4 x16 25 GB/s (builders.PCIE_GBPS).
- Inter-socket (QPI/UPI) as seen by GPU peer traffic: ~10 GB/s, below one PCIe x16 link.
- Network / direct cables: 100 Gb/s = 12.5 GB/s, 200 Gb/s = 25 GB/s, 400 Gb/s = 50 GB/s.
- TPU-style direct-connect meshes (TPU v4 ICI, ~45-50 GB/s per link, Jouppi et al. ISCA 2023)
  default here to 25 GB/s, a 200 Gb/s direct cable.
- Latencies: NVLink/xGMI/PCIe hop 0.5 us (builders.LAT_*), direct cable 1 us, switch hop 1-2 us.

This module: the builder, the figures and the families of hosts and switches;
``family_grids`` holds the direct-connect grids, ``families`` the random members.
"""

from __future__ import annotations

import random
from typing import Any

from syncplan.planner.builders import LAT_NET, LAT_NVLINK, LAT_PCIE, PCIE_GBPS, TopologyBuilder

NVLINK2_GBPS, NVLINK1_GBPS = 25.0, 20.0  # per link per direction
XGMI_GBPS = 50.0
PCIE3_GBPS = 12.0
INTER_SOCKET_GBPS = 10.0
DIRECT_GBPS = 25.0
LAT_DIRECT, LAT_SWITCH = 1.0, 2.0

# DGX-1V NVLink: quads 0-3 and 4-7 fully connected plus i <-> i+4; 6 links per GPU, so two of
# each GPU's 4 neighbours get 2 links (the NV2 entries of ``nvidia-smi topo -m`` on a DGX-1V).
CUBE_MESH_PAIRS = [
    (0, 1),
    (0, 2),
    (0, 3),
    (1, 2),
    (1, 3),
    (2, 3),
    (4, 5),
    (4, 6),
    (4, 7),
    (5, 6),
    (5, 7),
    (6, 7),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
]
CUBE_MESH_DOUBLE = frozenset({(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)})

Pair = tuple[int, int]


class FamilyBuilder(TopologyBuilder):
    """TopologyBuilder that merges a repeated link into one with the summed bandwidth."""

    def __init__(self) -> None:
        super().__init__()
        self._index: dict[tuple[str, str, bool], int] = {}

    @staticmethod
    def _key(src: str, dst: str, directed: bool) -> tuple[str, str, bool]:
        """The index key of a link: ordered ends when directed, sorted ends otherwise."""
        if directed:
            return (src, dst, True)
        a, b = sorted((src, dst))
        return (a, b, False)

    def add(
        self, src: str, dst: str, bw: float, lat: float, kind: str, directed: bool = False
    ) -> None:
        key = self._key(src, dst, directed)
        if key in self._index:
            self.links[self._index[key]]["bandwidth_GBps"] += bw
            return
        self._index[key] = len(self.links)
        self.link(src, dst, bw, lat, kind)
        if directed:
            self.links[-1]["directed"] = True

    def scale(self, src: str, dst: str, factor: float, directed: bool = False) -> None:
        """Multiply the rate of the link between ``src`` and ``dst`` by ``factor``."""
        key = self._key(src, dst, directed)
        if key not in self._index:
            raise ValueError(f"no link between {src} and {dst} to degrade")
        self.links[self._index[key]]["bandwidth_GBps"] *= factor


def check_factor(factor: float) -> None:
    """Raise ValueError unless ``factor`` is a degradation factor in (0, 1]."""
    if not 0 < factor <= 1:
        raise ValueError(f"degradation factor must be in (0, 1], got {factor}")


def add_cube_mesh_host(
    b: FamilyBuilder,
    host: str,
    nvlink_gen: int = 2,
    nics: int = 0,
    nic_GBps: float = 12.5,
    degraded: Pair | None = None,
    factor: float = 0.25,
) -> list[str]:
    """A DGX-1-style host into ``b``; returns its NIC ids.

    8 GPUs on the hybrid cube-mesh (CUBE_MESH_PAIRS; with ``nvlink_gen=2`` the
    CUBE_MESH_DOUBLE pairs carry two 25 GB/s links, with 1 every pair one 20 GB/s link).
    GPU pairs (0,1), (2,3) | (4,5), (6,7) sit under PCIe gen3 switches, two per CPU socket;
    the sockets are joined by a slower link. NIC j (up to 4) sits under PCIe switch j, as the
    four InfiniBand NICs of a DGX-1 do. ``degraded``: the NVLink pair running at ``factor``.
    """
    if nvlink_gen not in (1, 2):
        raise ValueError("nvlink_gen must be 1 or 2")
    if not 0 <= nics <= 4:
        raise ValueError("a hybrid cube-mesh host has 0 to 4 NICs")
    sockets = [b.node(f"{host}/cpu_socket{s}", "cpu_socket", host) for s in range(2)]
    b.add(sockets[0], sockets[1], INTER_SOCKET_GBPS, LAT_PCIE, "inter_socket")
    switches = []
    for s in range(4):
        switches.append(b.node(f"{host}/pcie_switch{s}", "pcie_switch", host))
        b.add(switches[-1], sockets[s // 2], PCIE3_GBPS, LAT_PCIE, "pcie")
    gpus = [b.node(f"{host}/gpu{g}", "gpu", host) for g in range(8)]
    for g, gid in enumerate(gpus):
        b.add(gid, switches[g // 2], PCIE3_GBPS, LAT_PCIE, "pcie")
    for i, j in CUBE_MESH_PAIRS:
        links = 2 if nvlink_gen == 2 and (i, j) in CUBE_MESH_DOUBLE else 1
        rate = NVLINK2_GBPS if nvlink_gen == 2 else NVLINK1_GBPS
        b.add(gpus[i], gpus[j], links * rate, LAT_NVLINK, "nvlink")
    if degraded is not None:
        check_factor(factor)
        i, j = sorted(degraded)
        if (i, j) not in CUBE_MESH_PAIRS:
            raise ValueError(f"GPUs {i} and {j} have no NVLink in the hybrid cube-mesh")
        b.scale(gpus[i], gpus[j], factor)
    out = []
    for j in range(nics):
        out.append(b.node(f"{host}/nic{j}", "nic", host))
        b.add(out[-1], switches[j], PCIE3_GBPS, LAT_PCIE, "pcie")
    return out


def hybrid_cube_mesh(
    hosts: int = 1,
    nvlink_gen: int = 2,
    nics: int = 0,
    nic_GBps: float = 12.5,
    degraded: Pair | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """DGX-1-style hosts (see add_cube_mesh_host); several hosts share one switch by their NICs.

    ``degraded`` applies to host h0 only.
    """
    if hosts > 1 and nics == 0:
        raise ValueError("several hybrid cube-mesh hosts need at least one NIC each")
    b = FamilyBuilder()
    sw = b.node("switch0", "switch") if hosts > 1 else None
    for h in range(hosts):
        for nic in add_cube_mesh_host(
            b, f"h{h}", nvlink_gen, nics, nic_GBps, degraded if h == 0 else None, factor
        ):
            if sw is not None:
                b.add(nic, sw, nic_GBps, LAT_SWITCH, "network")
    return b.to_dict()


def full_mesh(
    gpus: int = 8,
    link_GBps: float = XGMI_GBPS,
    pcie: bool = True,
    slow_pair: Pair | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """One host of ``gpus`` GPUs, every pair joined by one xGMI link (MI250X/MI300X style).

    With ``pcie`` each GPU also has a PCIe gen4 link to one CPU socket. ``slow_pair``: the
    pair whose link runs at ``factor`` of ``link_GBps``.
    """
    if gpus < 2:
        raise ValueError("a full mesh needs at least 2 GPUs")
    b = FamilyBuilder()
    ids = [b.node(f"h0/gpu{g}", "gpu", "h0") for g in range(gpus)]
    if pcie:
        cpu = b.node("h0/cpu_socket0", "cpu_socket", "h0")
        for gid in ids:
            b.add(gid, cpu, PCIE_GBPS, LAT_PCIE, "pcie")
    for i in range(gpus):
        for j in range(i + 1, gpus):
            b.add(ids[i], ids[j], link_GBps, LAT_NVLINK, "xgmi")
    if slow_pair is not None:
        check_factor(factor)
        i, j = slow_pair
        if i == j or not (0 <= i < gpus and 0 <= j < gpus):
            raise ValueError(f"slow_pair {slow_pair} is not a pair of GPUs 0..{gpus - 1}")
        b.scale(ids[i], ids[j], factor)
    return b.to_dict()


def fat_tree3(
    pods: int = 2,
    tors_per_pod: int = 2,
    hosts_per_tor: int = 2,
    gpus: int = 2,
    nics_per_host: int = 1,
    nic_GBps: float = 25.0,
    aggs_per_pod: int = 2,
    cores: int = 2,
    oversubscription: float = 2.0,
    slow_host: int | None = None,
    slow_uplink: int | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """Three-tier fat tree: PCIe hosts -> ToR -> aggregation (per pod) -> core.

    A ToR's uplinks carry 1/``oversubscription`` of its hosts' NIC rate, spread over the pod's
    aggregation switches; aggregation-to-core links are not oversubscribed. ``slow_host``:
    the host (global index) whose NICs run at ``factor``; ``slow_uplink``: the ToR (global
    index) whose first uplink runs at ``factor``.
    """
    if min(pods, tors_per_pod, hosts_per_tor, gpus, aggs_per_pod, cores) < 1:
        raise ValueError("every fat-tree dimension must be at least 1")
    if oversubscription < 1:
        raise ValueError("oversubscription must be >= 1")
    if slow_host is not None or slow_uplink is not None:
        check_factor(factor)
    b = FamilyBuilder()
    core = [b.node(f"core{k}", "switch") for k in range(cores)]
    tor_up = hosts_per_tor * nics_per_host * nic_GBps / oversubscription
    host_index = tor_index = 0
    for p in range(pods):
        aggs = [b.node(f"pod{p}/agg{a}", "switch") for a in range(aggs_per_pod)]
        for agg in aggs:
            for c in core:
                b.add(agg, c, tors_per_pod * tor_up / aggs_per_pod / cores, LAT_SWITCH, "network")
        for t in range(tors_per_pod):
            tor = b.node(f"pod{p}/tor{t}", "switch")
            for a, agg in enumerate(aggs):
                slow = tor_index == slow_uplink and a == 0
                b.add(
                    tor,
                    agg,
                    tor_up / aggs_per_pod * (factor if slow else 1.0),
                    LAT_SWITCH,
                    "network",
                )
            for _ in range(hosts_per_tor):
                rate = nic_GBps * (factor if host_index == slow_host else 1.0)
                for nic in b.pcie_host(f"p{p}t{t}h{host_index}", gpus, [rate] * nics_per_host):
                    b.add(nic, tor, rate, LAT_NET, "network")
                host_index += 1
            tor_index += 1
    return b.to_dict()


def random_two_switch(seed: int, max_hosts: int = 6, max_gpus: int = 4) -> dict[str, Any]:
    """Random heterogeneous hosts (1-``max_gpus`` GPUs, NVSwitch or PCIe, 1-2 NICs of 25 to
    400 Gb/s) spread over two switches joined by a trunk of random rate."""
    rng = random.Random(seed)
    b = FamilyBuilder()
    sw = [b.node(f"sw{k}", "switch") for k in range(2)]
    b.add(sw[0], sw[1], rng.choice([12.5, 25.0, 50.0, 100.0]), LAT_SWITCH, "network")
    for h in range(rng.randint(2, max(2, max_hosts))):
        rates = [rng.choice([3.125, 6.25, 12.5, 25.0, 50.0]) for _ in range(rng.randint(1, 2))]
        make = b.dgx_host if rng.random() < 0.5 else b.pcie_host
        for nic, rate in zip(make(f"h{h}", rng.randint(1, max_gpus), rates), rates, strict=True):
            b.add(
                nic,
                sw[h % 2 if h < 2 else rng.randint(0, 1)],
                rate,
                round(rng.uniform(1.0, 5.0), 2),
                "network",
            )
    return b.to_dict()


def directed_cluster(
    hosts: int = 4,
    gpus_per_host: int = 2,
    forward_GBps: float = 25.0,
    reverse_GBps: float = 6.25,
    intra_GBps: float = 2 * NVLINK2_GBPS,
    slow: int | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """Hosts on a directed ring (NIC h -> NIC h+1 at ``forward_GBps``) with a slower reverse
    ring (NIC h+1 -> NIC h at ``reverse_GBps``): asymmetric links, ``"directed": true``.

    Each host's GPUs are fully connected at ``intra_GBps`` and reach their NIC over PCIe.
    ``slow``: the forward link out of host ``slow`` runs at ``factor``.
    """
    if hosts < 2 or gpus_per_host < 1:
        raise ValueError("a directed cluster needs at least 2 hosts of at least 1 GPU")
    b = FamilyBuilder()
    nics = []
    for h in range(hosts):
        gpu = [b.node(f"h{h}/gpu{k}", "gpu", f"h{h}") for k in range(gpus_per_host)]
        nics.append(b.node(f"h{h}/nic0", "nic", f"h{h}"))
        for i, gid in enumerate(gpu):
            b.add(gid, nics[-1], PCIE_GBPS, LAT_PCIE, "pcie")
            for other in gpu[i + 1 :]:
                b.add(gid, other, intra_GBps, LAT_NVLINK, "nvlink")
    if slow is not None:
        check_factor(factor)
        if not 0 <= slow < hosts:
            raise ValueError(f"slow host {slow} out of range 0..{hosts - 1}")
    for h in range(hosts):
        nxt = nics[(h + 1) % hosts]
        rate = forward_GBps * (factor if h == slow else 1.0)
        b.add(nics[h], nxt, rate, LAT_DIRECT, "network", directed=True)
        b.add(nxt, nics[h], reverse_GBps, LAT_DIRECT, "network", directed=True)
    return b.to_dict()
