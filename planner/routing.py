"""Routes between endpoints and the arc index the cost model works on."""

from __future__ import annotations

import heapq

import numpy as np

from planner.errors import RequestError
from planner.topology import Topology

# A route minimises the time to move REF_BYTES through it hop by hop: latency plus
# serialisation on each arc. This prefers fast fabrics (NVLink over PCIe) and few hops.
REF_BYTES = 1 << 20


class Router:
    """Shortest routes over the topology's arcs, cached per (src, dst) node pair.

    Arcs are numbered; ``bw`` (bytes/s) and ``lat`` (s) are numpy arrays indexed by arc id.
    """

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.arc_id: dict[tuple[str, str], int] = {}
        bw, lat = [], []
        self._adj: dict[str, list[tuple[str, float]]] = {n: [] for n in topo.graph.nodes}
        for u, v, data in topo.graph.edges(data=True):
            self.arc_id[(u, v)] = len(bw)
            bw.append(data["bw"])
            lat.append(data["lat"])
            self._adj[u].append((v, data["lat"] + REF_BYTES / data["bw"]))
        self.bw = np.asarray(bw, dtype=float)
        self.lat = np.asarray(lat, dtype=float)
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}
        self._forwarding = {n for n, node in topo.nodes.items() if not node.can_hold_rank}

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        """The node sequence from ``src`` to ``dst`` (both endpoints included)."""
        key = (src, dst)
        cached = self._paths.get(key)
        if cached is None:
            cached = self._dijkstra(src, dst)
            self._paths[key] = cached
        return cached

    def _dijkstra(self, src: str, dst: str) -> tuple[str, ...]:
        dist = {src: 0.0}
        prev: dict[str, str] = {}
        heap = [(0.0, src)]
        while heap:
            d, u = heapq.heappop(heap)
            if u == dst:
                break
            if d > dist[u]:
                continue
            for v, w in self._adj[u]:
                nd = d + w
                if nd < dist.get(v, float("inf")):
                    dist[v] = nd
                    prev[v] = u
                    heapq.heappush(heap, (nd, v))
        if dst not in dist:
            raise RequestError(f"no route from {src!r} to {dst!r}")
        nodes = [dst]
        while nodes[-1] != src:
            nodes.append(prev[nodes[-1]])
        return tuple(reversed(nodes))

    def arcs(self, path: tuple[str, ...]) -> list[int]:
        """Arc ids along a node path; KeyError if two consecutive nodes are not linked."""
        return [self.arc_id[(path[i], path[i + 1])] for i in range(len(path) - 1)]

    def path_latency(self, path: tuple[str, ...]) -> float:
        return float(sum(self.lat[a] for a in self.arcs(path)))

    def bottleneck(self, path: tuple[str, ...]) -> float:
        """The smallest arc bandwidth along the path, bytes/s."""
        return float(min(self.bw[a] for a in self.arcs(path)))
