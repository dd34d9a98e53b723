"""Turn discovered GPUs and NICs into a :class:`syncplan.core.report.HostReport` graph.

Placement follows NCCL's topology search: a device's PCI path in sysfs names its host bridge
and the PCIe switch above it (the upstream port under the root port). GPUs and NICs under
the same switch are joined through a ``pcie_switch{k}`` node, switches and directly attached
devices hang off ``cpu_socket{numa}``, and sockets are joined by an ``smp`` link. NVLinks
join GPUs directly (``gpu-gpu``) or through ``nvswitch{k}`` nodes. A host without GPUs has
one rank endpoint, ``cpu0``, with every NIC attached to it.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass

from syncplan.agents import nvml as N
from syncplan.agents.gpus import GpuInventory
from syncplan.agents.nics import NicDev
from syncplan.agents.sysfs import PciLocation, SysFS
from syncplan.core.report import GPUInfo, HostReport, LocalLink, LocalNode, NICInfo

INTER_SOCKET_GBps = 40.0  # nominal UPI/xGMI per direction; the probes do not measure it
VIRTUAL_NIC_HOST_GBps = 10.0  # host <-> virtual NIC (veth, tun): bounded by memory copies
FALLBACK_PCIE_GBps = 15.76  # Gen3 x16, when neither NVML nor sysfs knows the link
PCIE_LATENCY_US = 1.0
NVLINK_LATENCY_US = 1.0

# Distance classes between two PCI devices, as nvidia-smi topo names them.
PIX, PHB, NODE, SYS = 1, 2, 3, 4


@dataclass
class Placed:
    node_id: str
    loc: PciLocation | None
    numa: int | None


def distance(a: Placed, b: Placed) -> int:
    if a.loc and b.loc and a.loc.host_bridge == b.loc.host_bridge:
        if a.loc.switch and a.loc.switch == b.loc.switch:
            return PIX
        return PHB
    if a.numa is not None and a.numa == b.numa:
        return NODE
    return SYS


def build_report(
    host: str,
    inventory: GpuInventory | None,
    nics: list[NicDev],
    sysfs: SysFS,
    agent_version: str = "unknown",
) -> HostReport:
    """The report's inventory and graph; ``seq`` is 0 (the reporter assigns it)."""
    gpus = inventory.gpus if inventory else []
    nodes: list[LocalNode] = []
    links: list[LocalLink] = []
    nic_ids = {n.name: f"nic{j}" for j, n in enumerate(nics)}

    if not gpus:
        nodes.append(LocalNode(id="cpu0", kind="cpu"))
        for n in nics:
            nodes.append(LocalNode(id=nic_ids[n.name], kind="nic"))
            bw = _nic_host_GBps(n, sysfs)
            links.append(
                LocalLink(
                    src="cpu0",
                    dst=nic_ids[n.name],
                    kind=_nic_link_kind(n),
                    bandwidth_GBps=bw,
                    latency_us=PCIE_LATENCY_US,
                )
            )
        return HostReport(
            host=host,
            seq=0,
            agent_version=agent_version,
            endpoint_kind="cpu",
            nics=[_nic_info(n, []) for n in nics],
            nodes=nodes,
            links=links,
        )

    placed_gpus = [
        Placed(
            f"gpu{g.index}",
            sysfs.pci_location(g.pci_bus_id),
            g.numa_node if g.numa_node is not None else sysfs.pci_numa_node(g.pci_bus_id),
        )
        for g in gpus
    ]
    _nvml_switch_fallback(placed_gpus, inventory)
    placed_nics = [
        Placed(
            nic_ids[n.name],
            sysfs.pci_location(n.pci_address) if n.pci_address else None,
            n.numa_node,
        )
        for n in nics
    ]

    # PCIe switches, numbered in order of (host bridge, upstream port).
    switch_keys = sorted(
        {
            (p.loc.host_bridge, p.loc.switch)
            for p in placed_gpus + placed_nics
            if p.loc and p.loc.switch
        }
    )
    switch_ids = {k: f"pcie_switch{i}" for i, k in enumerate(switch_keys)}
    sockets = sorted({p.numa if p.numa is not None else 0 for p in placed_gpus + placed_nics})
    socket_id = {s: f"cpu_socket{s}" for s in sockets}

    for g in gpus:
        nodes.append(LocalNode(id=f"gpu{g.index}", kind="gpu"))
    for n in nics:
        nodes.append(LocalNode(id=nic_ids[n.name], kind="nic"))
    for k in switch_keys:
        nodes.append(LocalNode(id=switch_ids[k], kind="pcie_switch"))
    for s in sockets:
        nodes.append(LocalNode(id=socket_id[s], kind="cpu_socket"))

    switch_socket: dict[str, int] = {}
    switch_children_bw: dict[str, float] = defaultdict(float)

    def attach(p: Placed, bw: float, kind: str) -> None:
        sock = p.numa if p.numa is not None else 0
        if p.loc and p.loc.switch:
            sw = switch_ids[(p.loc.host_bridge, p.loc.switch)]
            switch_socket.setdefault(sw, sock)
            switch_children_bw[sw] = max(switch_children_bw[sw], bw)
            parent = sw
        else:
            parent = socket_id[sock]
        links.append(
            LocalLink(
                src=p.node_id, dst=parent, kind=kind, bandwidth_GBps=bw, latency_us=PCIE_LATENCY_US
            )
        )

    for g, p in zip(gpus, placed_gpus, strict=True):
        bw = g.pcie_bandwidth_GBps or sysfs.pci_link_GBps(g.pci_bus_id) or FALLBACK_PCIE_GBps
        attach(p, bw, "pcie")
    for n, p in zip(nics, placed_nics, strict=True):
        attach(p, _nic_host_GBps(n, sysfs), _nic_link_kind(n))
    for (_hb, up), sw in switch_ids.items():
        bw = sysfs.pci_link_GBps(up) or switch_children_bw.get(sw) or FALLBACK_PCIE_GBps
        links.append(
            LocalLink(
                src=sw,
                dst=socket_id[switch_socket.get(sw, sockets[0])],
                kind="pcie",
                bandwidth_GBps=bw,
                latency_us=PCIE_LATENCY_US,
            )
        )
    for a, b in itertools.pairwise(sockets):
        links.append(
            LocalLink(
                src=socket_id[a],
                dst=socket_id[b],
                kind="smp",
                bandwidth_GBps=INTER_SOCKET_GBps,
                latency_us=PCIE_LATENCY_US,
            )
        )

    nv_nodes, nv_links = _nvlink_graph(inventory)
    nodes += nv_nodes
    links += nv_links

    # Closest NICs of each GPU: those at the GPU's smallest distance class.
    closest: dict[str, list[int]] = defaultdict(list)
    for g, pg in zip(gpus, placed_gpus, strict=True):
        if not placed_nics:
            break
        dists = {pn.node_id: distance(pg, pn) for pn in placed_nics}
        best = min(dists.values())
        for nid, d in dists.items():
            if d == best:
                closest[nid].append(g.index)

    gpu_infos = [
        GPUInfo(
            index=g.index,
            uuid=g.uuid,
            name=g.name,
            pci_bus_id=g.pci_bus_id,
            numa_node=pg.numa,
            pcie_gen=g.pcie_gen,
            pcie_width=g.pcie_width,
            pcie_bandwidth_GBps=g.pcie_bandwidth_GBps,
            nvlink_count=len(g.nvlinks),
        )
        for g, pg in zip(gpus, placed_gpus, strict=True)
    ]
    return HostReport(
        host=host,
        seq=0,
        agent_version=agent_version,
        endpoint_kind="gpu",
        gpus=gpu_infos,
        nics=[_nic_info(n, sorted(closest[nic_ids[n.name]])) for n in nics],
        nodes=nodes,
        links=links,
    )


def _nvml_switch_fallback(placed: list[Placed], inv: GpuInventory | None) -> None:
    """GPUs missing from sysfs: group those NVML places under one switch (PIX/PXB)."""
    if not inv or all(p.loc for p in placed):
        return
    group = list(range(len(placed)))
    for (a, b), level in inv.ancestors.items():
        if level <= N.NVML_TOPOLOGY_MULTIPLE and a < len(placed) and b < len(placed):
            ra, rb = group[a], group[b]
            lo = min(ra, rb)
            group = [lo if x in (ra, rb) else x for x in group]
    for i, p in enumerate(placed):
        if p.loc is None:
            members = [j for j in range(len(placed)) if group[j] == group[i]]
            bdf = inv.gpus[i].pci_bus_id
            sw = f"nvml-group{group[i]}" if len(members) > 1 else None
            p.loc = PciLocation(
                bdf=bdf,
                host_bridge=f"nvml-{bdf}" if sw is None else "nvml",
                bridges=("root", sw) if sw else (),
            )


def _nvlink_graph(inv: GpuInventory | None) -> tuple[list[LocalNode], list[LocalLink]]:
    if not inv:
        return [], []
    by_bus = {g.pci_bus_id: g.index for g in inv.gpus}
    # (gpu, remote key) -> (links, total GB/s)
    groups: dict[tuple[int, str], list[float]] = defaultdict(list)
    switches: set[str] = set()
    for g in inv.gpus:
        for ln in g.nvlinks:
            if ln.remote_bus_id in by_bus and ln.remote_type != N.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                groups[(g.index, f"gpu:{by_bus[ln.remote_bus_id]}")].append(ln.speed_GBps)
            elif ln.remote_type == N.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                key = ln.remote_bus_id or "unknown"
                switches.add(key)
                groups[(g.index, f"sw:{key}")].append(ln.speed_GBps)
    sw_ids = {k: f"nvswitch{i}" for i, k in enumerate(sorted(switches))}
    nodes = [LocalNode(id=sw_ids[k], kind="nvswitch") for k in sorted(switches)]
    links: list[LocalLink] = []
    seen: set[tuple[int, int]] = set()
    for (i, remote), speeds in sorted(groups.items()):
        kind, _, key = remote.partition(":")
        if kind == "gpu":
            j = int(key)
            pair = (min(i, j), max(i, j))
            if pair in seen or i == j:
                continue
            seen.add(pair)
            back = groups.get((j, f"gpu:{i}"), speeds)
            bw = min(sum(speeds), sum(back))
            links.append(
                LocalLink(
                    src=f"gpu{pair[0]}",
                    dst=f"gpu{pair[1]}",
                    kind="nvlink",
                    bandwidth_GBps=round(bw, 3),
                    latency_us=NVLINK_LATENCY_US,
                )
            )
        else:
            links.append(
                LocalLink(
                    src=f"gpu{i}",
                    dst=sw_ids[key],
                    kind="nvlink",
                    bandwidth_GBps=round(sum(speeds), 3),
                    latency_us=NVLINK_LATENCY_US,
                )
            )
    return nodes, links


def _nic_link_kind(n: NicDev) -> str:
    return "pcie" if n.physical and n.pci_address else "virtual"


def _nic_host_GBps(n: NicDev, sysfs: SysFS) -> float:
    if n.physical and n.pci_address:
        bw = sysfs.pci_link_GBps(n.pci_address)
        if bw:
            return bw
        return n.speed_GBps or FALLBACK_PCIE_GBps
    return VIRTUAL_NIC_HOST_GBps


def _nic_info(n: NicDev, closest_gpus: list[int]) -> NICInfo:
    return NICInfo(
        name=n.name,
        kind=n.kind if n.kind in ("ethernet", "infiniband", "roce") else "other",
        speed_GBps=n.speed_GBps,
        state=n.state,
        pci_address=n.pci_address,
        numa_node=n.numa_node,
        closest_gpus=closest_gpus,
        address=n.address,
    )
