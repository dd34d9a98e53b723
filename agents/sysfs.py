"""Read-only access to a sysfs tree under an injectable root (``/sys`` on a real host).

Every read that fails (missing file, ``EINVAL`` from a virtual NIC's ``speed``, permission)
answers ``None`` instead of raising: sysfs is full of attributes that exist but cannot be read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")

# Usable GB/s per lane per direction by transfer rate (GT/s), after line encoding.
PCIE_LANE_GBps_BY_GTs = {2.5: 0.25, 5.0: 0.5, 8.0: 0.985, 16.0: 1.969, 32.0: 3.938, 64.0: 7.563}
PCIE_LANE_GBps_BY_GEN = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def normalize_bdf(bus_id: str) -> str:
    """``00000000:18:00.0`` (NVML) or ``0000:18:00.0`` -> ``0000:18:00.0`` (sysfs form)."""
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 3:
        domain, bus, devfn = parts
        return f"{int(domain, 16):04x}:{bus}:{devfn}"
    if len(parts) == 2:
        return f"0000:{text}"
    return text


@dataclass(frozen=True)
class PciLocation:
    """Where a PCI function hangs: its host bridge and the bridges from root port down."""

    bdf: str
    host_bridge: str
    bridges: tuple[str, ...]

    @property
    def switch(self) -> str | None:
        """The top PCIe switch above the device (its upstream port), if any."""
        return self.bridges[1] if len(self.bridges) >= 2 else None


class SysFS:
    """A sysfs tree rooted at ``root``; paths given to methods are relative to it."""

    def __init__(self, root: str | os.PathLike[str] = "/sys") -> None:
        self.root = Path(root)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def read(self, rel: str) -> str | None:
        try:
            return self.path(rel).read_text(encoding="utf-8", errors="replace").strip()
        except (OSError, ValueError):
            return None

    def read_int(self, rel: str) -> int | None:
        text = self.read(rel)
        if text is None:
            return None
        try:
            return int(text, 0) if text.startswith("0x") else int(text)
        except ValueError:
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def resolve(self, rel: str) -> str | None:
        """The real path of ``rel`` relative to the root, or None if it does not exist."""
        p = self.path(rel)
        if not p.exists():
            return None
        real = Path(os.path.realpath(p))
        try:
            return real.relative_to(os.path.realpath(self.root)).as_posix()
        except ValueError:
            return None

    # PCI ------------------------------------------------------------------------------

    def pci_location_of_path(self, devpath: str) -> PciLocation | None:
        parts = devpath.split("/")
        hb = next((p for p in parts if HOST_BRIDGE_RE.match(p)), None)
        chain = [p for p in parts if BDF_RE.match(p)]
        if hb is None or not chain:
            return None
        return PciLocation(bdf=chain[-1], host_bridge=hb, bridges=tuple(chain[:-1]))

    def pci_location(self, bdf: str) -> PciLocation | None:
        real = self.resolve(f"bus/pci/devices/{normalize_bdf(bdf)}")
        return self.pci_location_of_path(real) if real else None

    def pci_numa_node(self, bdf: str) -> int | None:
        node = self.read_int(f"bus/pci/devices/{normalize_bdf(bdf)}/numa_node")
        return node if node is not None and node >= 0 else None

    def pci_link_GBps(self, bdf: str) -> float | None:
        """Per-direction bandwidth of a PCI function's link from ``current_link_*``."""
        base = f"bus/pci/devices/{normalize_bdf(bdf)}"
        for prefix in ("current", "max"):
            rate = parse_gts(self.read(f"{base}/{prefix}_link_speed"))
            width = self.read_int(f"{base}/{prefix}_link_width")
            if rate and width and width > 0:
                lane = PCIE_LANE_GBps_BY_GTs.get(rate)
                if lane:
                    return round(lane * width, 3)
        return None

    def numa_nodes(self) -> list[int]:
        nodes = [
            int(n[4:])
            for n in self.listdir("devices/system/node")
            if n.startswith("node") and n[4:].isdigit()
        ]
        return sorted(nodes)


def parse_gts(text: str | None) -> float | None:
    """``16.0 GT/s PCIe`` or ``8 GT/s`` -> 16.0 / 8.0; ``Unknown`` -> None."""
    if not text:
        return None
    m = re.match(r"^\s*([0-9.]+)\s*GT/s", text)
    return float(m.group(1)) if m else None


def pcie_GBps(gen: int | None, width: int | None) -> float | None:
    if not gen or not width or gen not in PCIE_LANE_GBps_BY_GEN or width <= 0:
        return None
    return round(PCIE_LANE_GBps_BY_GEN[gen] * width, 3)
