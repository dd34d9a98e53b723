"""NIC discovery from sysfs: ``/sys/class/infiniband/*/ports/*`` and ``/sys/class/net/*``.

Rules (see docs/agent.md):

* InfiniBand/RoCE ports come from ``class/infiniband``; a net interface on the same PCI
  function (IPoIB ``ib0``, a RoCE port's Ethernet netdev) is folded into that port.
* A *physical* NIC has a ``device`` link (it sits on a bus). Loopback is always skipped.
* Only NICs whose state is up are reported (a down port carries no traffic).
* When no physical NIC is up (a container or a network namespace, where a veth is the only way
  out) every non-loopback interface that is up and holds an IPv4 address is used instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from syncplan.agents.sysfs import SysFS

ARPHRD_LOOPBACK = 772
SPEED_UNKNOWN_LIMIT = 2**31 - 1  # some kernels print SPEED_UNKNOWN as 4294967295

NicKind = Literal["ethernet", "infiniband", "roce", "other"]


@dataclass
class NicDev:
    """One NIC as discovered; ``speed_GBps`` is the nominal line rate per direction."""

    name: str
    kind: NicKind = "ethernet"
    speed_GBps: float | None = None
    state: str = "unknown"
    pci_address: str | None = None
    numa_node: int | None = None
    address: str | None = None
    netdevs: list[str] = field(default_factory=list)
    physical: bool = True


def natural_key(name: str) -> list[object]:
    """Sort key so that ``mlx5_2`` comes before ``mlx5_10``."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def parse_ib_rate(text: str | None) -> float | None:
    """``200 Gb/sec (4X HDR)`` -> 25.0 GB/s."""
    if not text:
        return None
    m = re.match(r"^\s*([0-9.]+)\s*Gb/sec", text)
    if not m:
        return None
    gbps = float(m.group(1))
    return round(gbps / 8.0, 4) if gbps > 0 else None


def parse_ib_state(text: str | None) -> str:
    """``4: ACTIVE`` -> ``up``; ``1: DOWN`` -> ``down``; INIT/ARMED -> ``init``."""
    if not text:
        return "unknown"
    word = text.split(":", 1)[-1].strip().upper()
    return {"ACTIVE": "up", "DOWN": "down", "INIT": "init", "ARMED": "init"}.get(
        word, word.lower() or "unknown"
    )


def net_speed_GBps(sysfs: SysFS, ifname: str) -> float | None:
    """``class/net/X/speed`` in Mb/s -> GB/s; -1, unknown, EINVAL or missing -> None."""
    mbps = sysfs.read_int(f"class/net/{ifname}/speed")
    if mbps is None or mbps <= 0 or mbps >= SPEED_UNKNOWN_LIMIT:
        return None
    return round(mbps / 8000.0, 4)


def net_state(sysfs: SysFS, ifname: str) -> str:
    state = (sysfs.read(f"class/net/{ifname}/operstate") or "unknown").lower()
    if state == "unknown" and sysfs.read_int(f"class/net/{ifname}/carrier") == 1:
        return "up"  # e.g. tun devices and some drivers never set operstate
    return state


def _pci_of(sysfs: SysFS, rel_device_link: str) -> str | None:
    real = sysfs.resolve(rel_device_link)
    if real is None:
        return None
    loc = sysfs.pci_location_of_path(real)
    return loc.bdf if loc else None


def discover_ib(sysfs: SysFS) -> list[NicDev]:
    nics: list[NicDev] = []
    for dev in sysfs.listdir("class/infiniband"):
        base = f"class/infiniband/{dev}"
        pci = _pci_of(sysfs, f"{base}/device")
        netdevs = sysfs.listdir(f"{base}/device/net")
        ports = [p for p in sysfs.listdir(f"{base}/ports") if p.isdigit()]
        for port in ports:
            pb = f"{base}/ports/{port}"
            layer = (sysfs.read(f"{pb}/link_layer") or "InfiniBand").lower()
            nics.append(
                NicDev(
                    name=dev if len(ports) == 1 else f"{dev}:{port}",
                    kind="infiniband" if layer == "infiniband" else "roce",
                    speed_GBps=parse_ib_rate(sysfs.read(f"{pb}/rate")),
                    state=parse_ib_state(sysfs.read(f"{pb}/state")),
                    pci_address=pci,
                    numa_node=sysfs.pci_numa_node(pci) if pci else None,
                    netdevs=list(netdevs),
                    physical=pci is not None,
                )
            )
    return nics


def discover_nics(sysfs: SysFS, addresses: dict[str, str] | None = None) -> list[NicDev]:
    """Usable NICs, sorted by name (natural order); ``addresses`` maps ifname -> IPv4."""
    addresses = addresses or {}
    ib = discover_ib(sysfs)
    by_pci = {n.pci_address: n for n in ib if n.pci_address}
    net: list[NicDev] = []
    for ifname in sysfs.listdir("class/net"):
        base = f"class/net/{ifname}"
        if ifname == "lo" or sysfs.read_int(f"{base}/type") == ARPHRD_LOOPBACK:
            continue
        pci = _pci_of(sysfs, f"{base}/device") if sysfs.exists(f"{base}/device") else None
        owner = by_pci.get(pci) if pci else None
        if owner is not None:
            if owner.address is None and ifname in addresses:
                owner.address = addresses[ifname]
            if ifname not in owner.netdevs:
                owner.netdevs.append(ifname)
            continue
        net.append(
            NicDev(
                name=ifname,
                kind="ethernet",
                speed_GBps=net_speed_GBps(sysfs, ifname),
                state=net_state(sysfs, ifname),
                pci_address=pci,
                numa_node=sysfs.pci_numa_node(pci) if pci else None,
                address=addresses.get(ifname),
                netdevs=[ifname],
                physical=sysfs.exists(f"{base}/device"),
            )
        )
    for n in ib:
        if n.address is None:
            n.address = next((addresses[d] for d in n.netdevs if d in addresses), None)
    every = ib + net
    usable = [n for n in every if n.physical and n.state == "up"]
    if not usable:
        usable = [
            n
            for n in every
            if not n.physical and n.state in ("up", "unknown") and n.address is not None
        ]
    return sorted(usable, key=lambda n: natural_key(n.name))
