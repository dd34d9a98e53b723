"""Direct-connect grids: hosts cabled to their neighbours in a 2-D mesh, a torus or a ring
(TPU-style meshes; figures in ``family_hosts``)."""

from __future__ import annotations

from typing import Any

from syncplan.planner.builders import LAT_NVLINK, LAT_PCIE, PCIE_GBPS
from syncplan.planner.family_hosts import (
    DIRECT_GBPS,
    LAT_DIRECT,
    NVLINK2_GBPS,
    FamilyBuilder,
    check_factor,
)


def direct_grid(
    rows: int,
    cols: int,
    wrap: bool,
    gpus_per_host: int,
    link_GBps: float,
    intra_GBps: float,
    ports: bool,
    degraded: int | None,
    factor: float,
) -> dict[str, Any]:
    """Hosts on a rows x cols grid wired to their neighbours; ``degraded`` indexes the
    inter-host links in the order they are made (row-major, east link before south link)."""
    if rows < 1 or cols < 1 or rows * cols < 2:
        raise ValueError("a grid of hosts needs at least 2 hosts")
    if not 1 <= gpus_per_host <= 4:
        raise ValueError("gpus_per_host must be 1 to 4")
    g = gpus_per_host
    # the GPU each direction's cable attaches to (W, E, N, S): traffic crossing a host moves
    # between its GPUs, as on hosts whose cables hang off different GPUs' NICs
    attach = {"W": 0, "E": g - 1, "N": 1 % g if g > 2 else 0, "S": g - 2 if g > 2 else g - 1}
    b = FamilyBuilder()

    def host(r: int, c: int) -> str:
        return f"h{r}x{c}"

    for r in range(rows):
        for c in range(cols):
            h = host(r, c)
            gpu = [b.node(f"{h}/gpu{k}", "gpu", h) for k in range(g)]
            for i in range(g):
                for j in range(i + 1, g):
                    b.add(gpu[i], gpu[j], intra_GBps, LAT_NVLINK, "nvlink")
            if ports:
                for d, k in attach.items():
                    b.node(f"{h}/port{d}", "nic", h)
                    b.add(gpu[k], f"{h}/port{d}", PCIE_GBPS, LAT_PCIE, "pcie")

    def end(h: str, d: str) -> str:
        return f"{h}/port{d}" if ports else f"{h}/gpu{attach[d]}"

    cables = []
    for r in range(rows):
        for c in range(cols):
            if cols > 1 and (c + 1 < cols or (wrap and cols > 2)):
                cables.append((end(host(r, c), "E"), end(host(r, (c + 1) % cols), "W")))
            if rows > 1 and (r + 1 < rows or (wrap and rows > 2)):
                cables.append((end(host(r, c), "S"), end(host((r + 1) % rows, c), "N")))
    for k, (u, v) in enumerate(cables):
        rate = link_GBps * (factor if k == degraded else 1.0)
        b.add(u, v, rate, LAT_DIRECT, "direct")
    if degraded is not None:
        check_factor(factor)
        if not 0 <= degraded < len(cables):
            raise ValueError(f"degraded link {degraded} out of range 0..{len(cables) - 1}")
    return b.to_dict()


def mesh2d(
    rows: int,
    cols: int,
    gpus_per_host: int = 1,
    link_GBps: float = DIRECT_GBPS,
    intra_GBps: float = 2 * NVLINK2_GBPS,
    ports: bool = False,
    degraded: int | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """A 2D mesh of hosts wired directly to their neighbours, no switch (TPU-slice style).

    ``gpus_per_host`` GPUs per host are fully connected at ``intra_GBps``; with ``ports`` each
    host has one forwarding port node (kind ``nic``) per direction. ``degraded``: the index
    of the inter-host link (row-major, east then south) running at ``factor``.
    """
    return direct_grid(
        rows, cols, False, gpus_per_host, link_GBps, intra_GBps, ports, degraded, factor
    )


def torus(
    rows: int,
    cols: int,
    gpus_per_host: int = 1,
    link_GBps: float = DIRECT_GBPS,
    intra_GBps: float = 2 * NVLINK2_GBPS,
    ports: bool = False,
    degraded: int | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """mesh2d with wrap-around links on every axis longer than 2."""
    return direct_grid(
        rows, cols, True, gpus_per_host, link_GBps, intra_GBps, ports, degraded, factor
    )


def host_ring(
    hosts: int,
    gpus_per_host: int = 2,
    link_GBps: float = DIRECT_GBPS,
    intra_GBps: float = 2 * NVLINK2_GBPS,
    ports: bool = False,
    slow: int | None = None,
    factor: float = 0.25,
) -> dict[str, Any]:
    """A ring of hosts, each cabled directly to the next (2 hosts: one cable).

    A cable leaves a host from its last GPU and enters the next host at its GPU 0. ``slow``:
    the cable from host ``slow`` to the next runs at ``factor``.
    """
    if hosts < 2:
        raise ValueError("a ring needs at least 2 hosts")
    return direct_grid(1, hosts, True, gpus_per_host, link_GBps, intra_GBps, ports, slow, factor)
