"""One host of a measured cluster as an NCCL topology file (``NCCL_TOPO_FILE``), and the
NCCL environment a job on that host should set.

NCCL reads ``<system version>`` holding ``<cpu numaid arch vendor ...>`` elements; under each,
``<pci busid class link_speed link_width>`` devices nest as PCIe switches do; a GPU's
``<pci>`` holds ``<gpu dev sm rank gdr>`` with ``<nvlink target count tclass>`` children, a
NIC's holds ``<nic>`` with ``<net name dev speed port latency guid maxconn gdr>`` (speed in
Mbit/s). NCCL prices PCIe at link_width x per-lane rate ("16 GT/s": 1.5 GB/s per lane),
NVLink at count x a per-architecture link rate, and a NIC at its ``speed``: this export sets
them from the graph's link rates, the NIC's from what the agents measured.

PCI bus ids come from the agents' reports when given (``hardware``); otherwise they are
placeholders (``0000:BB:00.0`` numbered in graph order) and NCCL, which matches the file to
the devices it finds by bus id, keeps its own detection for devices it cannot match.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from typing import Any

from syncplan.export.msccl_xml import ExportError

PCI_CLASS = {"bridge": "0x060400", "gpu": "0x030200", "nic": "0x020700", "nvswitch": "0x068000"}
# NCCL's PCIe rates per lane in GB/s for each link_speed string it knows (x100 Mbit/s / 80)
PCI_GEN = {"2.5 GT/s": 15 / 80, "5 GT/s": 30 / 80, "8 GT/s": 60 / 80, "16 GT/s": 120 / 80}
NVLINK_GBPS = {60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6}  # NCCL's per-link rates


def _pci_speed(bw_GBps: float) -> tuple[str, int]:
    """The (link_speed, link_width) whose NCCL rate is closest to ``bw_GBps``."""
    best = min(
        ((g, w) for g in PCI_GEN for w in (1, 2, 4, 8, 16)),
        key=lambda gw: (abs(PCI_GEN[gw[0]] * gw[1] - bw_GBps), -gw[1]),
    )
    return best


def host_nodes(graph: dict[str, Any], host: str) -> tuple[dict[str, dict], list[dict]]:
    """The nodes of ``host`` and every link that touches one of them."""
    nodes = {n["id"]: n for n in graph.get("nodes", []) if n.get("host") == host}
    if not nodes:
        hosts = sorted({n["host"] for n in graph.get("nodes", []) if n.get("host")})
        raise ExportError(
            f"no host {host!r} in the topology; hosts: "
            f"{', '.join(hosts[:10])}{' ...' if len(hosts) > 10 else ''}"
        )
    links = [lk for lk in graph.get("links", []) if lk["src"] in nodes or lk["dst"] in nodes]
    return nodes, links


def nccl_topology_xml(
    graph: dict[str, Any], host: str, *, sm: int = 80, hardware: dict[str, Any] | None = None
) -> str:
    """The NCCL topology XML of ``host`` in the topology ``graph`` (docs/formats.md, Topology file).
    ``hardware``: the host's agent report (``gpus`` with ``index``/``pci_bus_id``, ``nics``
    with ``name``/``pci_address``), used for real bus ids and NIC names."""
    nodes, links = host_nodes(graph, host)
    adj: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for lk in links:
        adj[lk["src"]].append((lk["dst"], lk))
        adj[lk["dst"]].append((lk["src"], lk))
    local = lambda nid: nid.split("/", 1)[1] if "/" in nid else nid  # noqa: E731
    kind = {nid: n["kind"] for nid, n in nodes.items()}
    of = lambda k: sorted((n for n in nodes if kind[n] == k), key=_natural)  # noqa: E731
    gpus, nics, switches, sockets = of("gpu"), of("nic"), of("pcie_switch"), of("cpu_socket")
    hw = hardware or {}
    gpu_bus = {f"gpu{g['index']}": g.get("pci_bus_id") for g in hw.get("gpus", [])}
    nic_hw = {f"nic{j}": n for j, n in enumerate(hw.get("nics", []))}

    bus_numbers = iter(range(0x10, 0x100))
    busid: dict[str, str] = {}

    def bus(nid: str) -> str:
        if nid not in busid:
            real = gpu_bus.get(local(nid)) or (nic_hw.get(local(nid)) or {}).get("pci_address")
            busid[nid] = _norm_bus(real) if real else f"0000:{next(bus_numbers):02x}:00.0"
        return busid[nid]

    def neighbour(nid: str, k: str) -> tuple[str, dict] | None:
        hits = [(m, lk) for m, lk in adj[nid] if kind.get(m) == k]
        return min(hits, key=lambda h: _natural(h[0])) if hits else None

    system = ET.Element("system", {"version": "1"})
    cpus: dict[str, ET.Element] = {}
    for i, sock in enumerate(sockets or ["(cpu)"]):
        cpus[sock] = ET.SubElement(
            system,
            "cpu",
            {
                "numaid": str(i),
                "arch": "x86_64",
                "vendor": "GenuineIntel",
                "familyid": "6",
                "modelid": "85",
            },
        )
    first_cpu = next(iter(cpus.values()))
    parents: dict[str, ET.Element] = {}
    for sw in switches:
        up = neighbour(sw, "cpu_socket")
        speed, width = _pci_speed(up[1]["bandwidth_GBps"] if up else 24.0)
        parents[sw] = ET.SubElement(
            cpus[up[0]] if up else first_cpu,
            "pci",
            {
                "busid": bus(sw),
                "class": PCI_CLASS["bridge"],
                "link_speed": speed,
                "link_width": str(width),
            },
        )

    def attach(nid: str) -> ET.Element:
        up = neighbour(nid, "pcie_switch") or neighbour(nid, "cpu_socket")
        parent = first_cpu  # an Element with no children is falsy: no `or` here
        if up is not None and up[0] in parents:
            parent = parents[up[0]]
        elif up is not None and up[0] in cpus:
            parent = cpus[up[0]]
        speed, width = _pci_speed(up[1]["bandwidth_GBps"] if up else 24.0)
        cls = PCI_CLASS["gpu" if kind[nid] == "gpu" else "nic"]
        return ET.SubElement(
            parent,
            "pci",
            {"busid": bus(nid), "class": cls, "link_speed": speed, "link_width": str(width)},
        )

    nv_rate = NVLINK_GBPS.get(sm, 20.0)
    for dev, g in enumerate(gpus):
        el = ET.SubElement(
            attach(g), "gpu", {"dev": str(dev), "sm": str(sm), "rank": str(dev), "gdr": "1"}
        )
        for other, lk in sorted(adj[g], key=lambda h: _natural(h[0])):
            if lk.get("kind") != "nvlink" or other not in kind:
                continue
            target = kind[other]
            if target not in ("gpu", "nvswitch"):
                continue
            count = max(1, round(lk["bandwidth_GBps"] / nv_rate))
            ET.SubElement(
                el,
                "nvlink",
                {
                    "target": bus(other),
                    "count": str(count),
                    "tclass": PCI_CLASS["gpu" if target == "gpu" else "nvswitch"],
                },
            )
    for dev, nic in enumerate(nics):
        out = [lk for m, lk in adj[nic] if m not in nodes]
        rate = max((lk["bandwidth_GBps"] for lk in out), default=None)
        lat = min((lk.get("latency_us", 0.0) for lk in out), default=0.0)
        info = nic_hw.get(local(nic), {})
        net = {
            "name": info.get("name") or local(nic),
            "dev": str(dev),
            "speed": str(round(rate * 8000)) if rate else "-1",
            "port": "1",
            "latency": f"{lat:g}",
            "guid": hex(0x1000 + dev),
            "maxconn": "131072",
            "gdr": "1",
        }
        ET.SubElement(ET.SubElement(attach(nic), "nic"), "net", net)
    ET.indent(system, "  ")
    return ET.tostring(system, encoding="unicode") + "\n"


def nccl_env(
    graph: dict[str, Any], host: str, topo_file: str, hardware: dict[str, Any] | None = None
) -> dict[str, str]:
    """The NCCL environment for a job's ranks on ``host``: the topology file, and the NICs
    to use (InfiniBand/RoCE by device name, Ethernet by interface name) when known."""
    nodes, _ = host_nodes(graph, host)
    env = {"NCCL_TOPO_FILE": topo_file}
    nics = (hardware or {}).get("nics", [])
    ib = [n["name"] for n in nics if n.get("kind") in ("infiniband", "roce")]
    eth = [n["name"] for n in nics if n.get("kind") == "ethernet"]
    if ib:
        env["NCCL_IB_HCA"] = ",".join(ib)
    elif eth:
        env["NCCL_SOCKET_IFNAME"] = ",".join(eth)
        env["NCCL_IB_DISABLE"] = "1"
    if not any(n["kind"] == "gpu" for n in nodes.values()):
        raise ExportError(f"host {host!r} has no GPU: NCCL needs none of this")
    return env


def _norm_bus(bus: str) -> str:
    """NVML writes 00000000:07:00.0; NCCL wants 0000:07:00.0, lower case."""
    bus = bus.lower()
    dom, _, rest = bus.partition(":")
    return f"{dom[-4:]:0>4}:{rest}" if rest else bus


def _natural(nid: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", nid))
