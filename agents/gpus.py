"""GPU discovery through the :mod:`agents.nvml` adapter: GPUs, PCIe links, NVLinks, ancestors.

Standard library only, so that ``agents/record_nvml.py`` can drive it on a machine that has
nothing but nvidia-ml-py installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syncplan.agents import nvml as N
from syncplan.agents.sysfs import normalize_bdf, pcie_GBps

# Per-link per-direction GB/s by nvmlNvlinkVersion_t, used when NVML has no speed field.
# Values follow the current nvml.h enum (1 = NVLink 1.0 ... 7 = NVLink 5.0).
NVLINK_GBps_BY_VERSION = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0, 8: 100.0}
DEFAULT_NVLINK_GBps = 25.0


@dataclass
class NvLink:
    """One active NVLink of a GPU."""

    link: int
    version: int | None
    p2p: bool | None
    remote_bus_id: str | None
    remote_type: int
    speed_GBps: float


@dataclass
class GpuDev:
    index: int
    uuid: str
    name: str
    pci_bus_id: str  # sysfs form, 0000:18:00.0
    numa_node: int | None = None
    curr_pcie_gen: int | None = None
    curr_pcie_width: int | None = None
    max_pcie_gen: int | None = None
    max_pcie_width: int | None = None
    nvlinks: list[NvLink] = field(default_factory=list)

    @property
    def pcie_gen(self) -> int | None:
        return self.max_pcie_gen or self.curr_pcie_gen

    @property
    def pcie_width(self) -> int | None:
        return self.max_pcie_width or self.curr_pcie_width

    @property
    def pcie_bandwidth_GBps(self) -> float | None:
        """Nominal: the link's maximum, because an idle GPU trains its link down to Gen1."""
        return pcie_GBps(self.pcie_gen, self.pcie_width)


@dataclass
class GpuInventory:
    driver_version: str | None
    gpus: list[GpuDev]
    ancestors: dict[tuple[int, int], int] = field(default_factory=dict)


def _try(fn, *args):
    try:
        return fn(*args)
    except N.NVMLCallError:
        return None


def _speeds(nv: N.NVML, i: int) -> tuple[float | None, dict[int, float]]:
    """(common per-link GB/s, per-link GB/s for links 0..11) from NVML field values."""
    ids = [
        N.NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON,
        *N.NVML_FI_DEV_NVLINK_SPEED_MBPS_L0_5,
        *N.NVML_FI_DEV_NVLINK_SPEED_MBPS_L6_11,
    ]
    values = _try(nv.field_values, i, ids)
    if not values:
        return None, {}
    common: float | None = None
    per: dict[int, float] = {}
    for k, (ret, value) in enumerate(values):
        if ret != N.NVML_SUCCESS or not value or value <= 0:
            continue
        if k == 0:
            common = float(value) / 1000.0  # MBps -> GB/s
        else:
            per[k - 1] = float(value) / 1000.0
    return common, per


def _nvlinks(nv: N.NVML, i: int, gpu_buses: dict[str, int]) -> list[NvLink]:
    common, per = _speeds(nv, i)
    links: list[NvLink] = []
    for link in range(N.NVML_NVLINK_MAX_LINKS):
        try:
            state = nv.nvlink_state(i, link)
        except N.NVMLCallError as exc:
            if exc.code == N.NVML_ERROR_INVALID_ARGUMENT:
                break  # past the GPU's last link
            continue  # NOT_SUPPORTED and friends: no NVLink at this index
        if state != 1:
            continue
        version = _try(nv.nvlink_version, i, link)
        p2p = _try(nv.nvlink_p2p_supported, i, link)
        remote = _try(nv.nvlink_remote_pci_bus_id, i, link)
        remote = normalize_bdf(remote) if remote else None
        if remote == "0000:00:00.0":
            remote = None
        rtype = _try(nv.nvlink_remote_device_type, i, link)
        if rtype is None:
            rtype = (
                N.NVML_NVLINK_DEVICE_TYPE_GPU
                if remote in gpu_buses
                else N.NVML_NVLINK_DEVICE_TYPE_UNKNOWN
            )
        speed = (
            per.get(link) or common or NVLINK_GBps_BY_VERSION.get(version or 0, DEFAULT_NVLINK_GBps)
        )
        links.append(
            NvLink(
                link=link,
                version=version,
                p2p=None if p2p is None else bool(p2p),
                remote_bus_id=remote,
                remote_type=int(rtype),
                speed_GBps=speed,
            )
        )
    return links


def discover_gpus(nv: N.NVML) -> GpuInventory:
    """Query every GPU NVML sees. ``nv`` must be initialised; errors of single calls are
    tolerated (the field stays unknown), errors of the device list propagate."""
    count = nv.device_count()
    driver = _try(nv.driver_version)
    gpus: list[GpuDev] = []
    for i in range(count):
        bus = normalize_bdf(nv.pci_bus_id(i))
        numa = _try(nv.numa_node, i)
        gpus.append(
            GpuDev(
                index=i,
                uuid=str(nv.uuid(i)),
                name=str(nv.name(i)),
                pci_bus_id=bus,
                numa_node=numa if isinstance(numa, int) and numa >= 0 else None,
                curr_pcie_gen=_try(nv.curr_pcie_gen, i),
                curr_pcie_width=_try(nv.curr_pcie_width, i),
                max_pcie_gen=_try(nv.max_pcie_gen, i),
                max_pcie_width=_try(nv.max_pcie_width, i),
            )
        )
    buses = {g.pci_bus_id: g.index for g in gpus}
    for g in gpus:
        g.nvlinks = _nvlinks(nv, g.index, buses)
    ancestors: dict[tuple[int, int], int] = {}
    for a in range(count):
        for b in range(a + 1, count):
            level = _try(nv.common_ancestor, a, b)
            if level is not None:
                ancestors[(a, b)] = int(level)
    return GpuInventory(driver_version=driver, gpus=gpus, ancestors=ancestors)
