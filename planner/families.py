"""Topology families people own beyond "hosts with NICs on switches" (issue 12): seeded
random members of every family and the shipped family examples.

The builders live in ``family_hosts`` (NVLink / xGMI hosts, fat trees, switched and directed
clusters, with the figures they use) and ``family_grids`` (direct-connect meshes, tori and
rings).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from syncplan.planner.family_grids import direct_grid, host_ring, mesh2d, torus
from syncplan.planner.family_hosts import (
    CUBE_MESH_PAIRS,
    directed_cluster,
    fat_tree3,
    full_mesh,
    hybrid_cube_mesh,
    random_two_switch,
)


def _maybe(rng: random.Random, p: float = 0.5) -> bool:
    return rng.random() < p


def _random_member(family: str, rng: random.Random, max_ranks: int) -> dict[str, Any]:
    factor = round(rng.uniform(0.1, 0.75), 3)
    if family == "hybrid_cube_mesh":
        if max_ranks < 8:
            raise ValueError("hybrid_cube_mesh needs max_ranks >= 8")
        hosts = rng.randint(1, min(2, max_ranks // 8))
        return hybrid_cube_mesh(
            hosts,
            rng.choice([1, 2]),
            rng.randint(1 if hosts > 1 else 0, 4),
            rng.choice([12.5, 25.0]),
            rng.choice(CUBE_MESH_PAIRS) if _maybe(rng) else None,
            factor,
        )
    if family == "full_mesh":
        gpus = rng.randint(2, min(8, max_ranks))
        pair: tuple[int, int] | None = None
        if _maybe(rng):
            first, second = rng.sample(range(gpus), 2)
            pair = (first, second)
        return full_mesh(gpus, rng.choice([50.0, 64.0]), _maybe(rng), pair, factor)
    if family in ("mesh2d", "torus", "host_ring"):
        g = rng.randint(1, min(4, max_ranks // 2))
        hosts_max = max_ranks // g
        if family == "host_ring":
            rows, cols = 1, rng.randint(2, min(8, hosts_max))
        else:
            rows = rng.randint(1, min(4, hosts_max // 2))
            cols = rng.randint(2, min(4, hosts_max // rows))
        make = {"mesh2d": mesh2d, "torus": torus}.get(family)
        ncables = len(
            direct_grid(rows, cols, family != "mesh2d", 1, 1.0, 1.0, False, None, 1.0)["links"]
        )
        degraded = rng.randrange(ncables) if _maybe(rng) else None
        link_GBps = rng.choice([12.5, 25.0, 50.0])
        intra_GBps = rng.choice([25.0, 50.0, 100.0])
        ports = _maybe(rng)
        if make is None:
            return host_ring(cols, g, link_GBps, intra_GBps, ports, degraded, factor)
        return make(rows, cols, g, link_GBps, intra_GBps, ports, degraded, factor)
    if family == "fat_tree3":
        gpus = rng.randint(1, 2)
        for _ in range(100):
            dims = [rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 3)]
            if 2 <= dims[0] * dims[1] * dims[2] * gpus <= max_ranks:
                break
        else:
            dims = [1, 1, 2]
            gpus = 1
        nhosts, ntors = dims[0] * dims[1] * dims[2], dims[0] * dims[1]
        slow = rng.choice(["none", "host", "uplink"])
        return fat_tree3(
            dims[0],
            dims[1],
            dims[2],
            gpus=gpus,
            nics_per_host=rng.randint(1, 2),
            nic_GBps=rng.choice([12.5, 25.0, 50.0]),
            aggs_per_pod=rng.randint(1, 2),
            cores=rng.randint(1, 2),
            oversubscription=rng.choice([1.0, 2.0, 3.0]),
            slow_host=rng.randrange(nhosts) if slow == "host" else None,
            slow_uplink=rng.randrange(ntors) if slow == "uplink" else None,
            factor=factor,
        )
    if family == "random_two_switch":
        max_gpus = min(4, max_ranks // 2)
        return random_two_switch(rng.randrange(1 << 30), max(2, max_ranks // max_gpus), max_gpus)
    if family == "directed_cluster":
        g = rng.randint(1, min(3, max_ranks // 3))
        hosts = rng.randint(3, max(3, min(8, max_ranks // g)))
        fwd = rng.choice([12.5, 25.0, 50.0])
        return directed_cluster(
            hosts,
            g,
            fwd,
            fwd * rng.choice([0.125, 0.25, 0.5, 1.0]),
            rng.choice([25.0, 50.0]),
            rng.randrange(hosts) if _maybe(rng) else None,
            factor,
        )
    raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")


FAMILIES = (
    "hybrid_cube_mesh",
    "full_mesh",
    "mesh2d",
    "torus",
    "host_ring",
    "fat_tree3",
    "random_two_switch",
    "directed_cluster",
)


def random_family(family: str, seed: int, max_ranks: int = 16) -> dict[str, Any]:
    """A seeded random member of ``family`` with 2..``max_ranks`` GPUs: random sizes, rates
    within the ranges above and, about half the time, one degraded link or host."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")
    if max_ranks < 6:
        raise ValueError("max_ranks must be at least 6")
    return _random_member(family, random.Random(f"{family}/{seed}"), max_ranks)


FAMILY_EXAMPLES: dict[str, Callable[[], dict[str, Any]]] = {
    "cube-mesh-dgx1v": lambda: hybrid_cube_mesh(),
    "cube-mesh-dgx1v-degraded": lambda: hybrid_cube_mesh(degraded=(0, 3), factor=0.5),
    "xgmi-full-mesh-8": lambda: full_mesh(8),
    "xgmi-full-mesh-8-slow-pair": lambda: full_mesh(8, slow_pair=(2, 5)),
    "mesh-4x4": lambda: mesh2d(4, 4),
    "mesh-4x4-degraded": lambda: mesh2d(4, 4, degraded=5),
    "torus-3x3": lambda: torus(3, 3),
    "torus-3x3-degraded": lambda: torus(3, 3, degraded=4),
    "torus-2x4x2gpu": lambda: torus(2, 4, gpus_per_host=2, ports=True),
    "host-ring-4x2": lambda: host_ring(4),
    "host-ring-4x2-slow": lambda: host_ring(4, slow=2),
    "fat-tree3": lambda: fat_tree3(),
    "fat-tree3-slow-host": lambda: fat_tree3(slow_host=3),
    "random-two-switch-1": lambda: random_two_switch(1),
    "random-two-switch-2": lambda: random_two_switch(2),
    "directed-ring-4x2": lambda: directed_cluster(),
    "directed-ring-4x2-slow": lambda: directed_cluster(slow=1),
}
