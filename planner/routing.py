"""Routes between endpoints and the arc index the cost model works on.

A route minimises ``sum(lat + REF_BYTES / bw)`` over its arcs (docs/cost-model.md). Shortest
routes are found per host rather than per pair: a route from a node of host H to any node
outside H leaves H by a first arc (u, v), so its length is ``dist inside H (src, u) + w(u, v)
+ dist (v, dst)``; the minimum over H's exit arcs is the shortest distance (weights are
positive, so the concatenation is a simple path). The planner therefore runs one small
Dijkstra inside the source's host per source and one whole-graph Dijkstra per distinct exit
neighbour v (on a rail-optimised cluster: one per rail switch), instead of one whole-graph
search per pair.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

import numpy as np
from syncplan.core.errors import RequestError
from syncplan.planner.topology import Topology

# A route minimises the time to move REF_BYTES through it hop by hop: latency plus
# serialisation on each arc. This prefers fast fabrics (NVLink over PCIe) and few hops.
REF_BYTES = 1 << 20

_TIE = 1e-12  # relative: distances summed in different orders still tie
_Tree = tuple[dict[int, float], dict[int, int]]  # distance and predecessor per reached node


class Router:
    """Shortest routes over the topology's arcs, cached per (src, dst) node pair.

    Arcs are numbered; ``bw`` (bytes/s) and ``lat`` (s) are numpy arrays indexed by arc id.
    """

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.arc_id: dict[tuple[str, str], int] = {}
        self._names = list(topo.graph.nodes)
        self._index = {n: i for i, n in enumerate(self._names)}
        bw: list[float] = []
        lat: list[float] = []
        self._adj: list[list[tuple[int, float]]] = [[] for _ in self._names]
        for u, v, data in topo.graph.edges(data=True):
            self.arc_id[(u, v)] = len(bw)
            bw.append(data["bw"])
            lat.append(data["lat"])
            self._adj[self._index[u]].append((self._index[v], data["lat"] + REF_BYTES / data["bw"]))
        self.bw = np.asarray(bw, dtype=float)
        self.lat = np.asarray(lat, dtype=float)
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}
        self._arc_lists: dict[tuple[str, ...], list[int]] = {}
        members: dict[str, set[int]] = defaultdict(set)
        self._region: list[str | None] = []
        for i, n in enumerate(self._names):
            host = topo.nodes[n].host
            self._region.append(host)
            if host is not None:
                members[host].add(i)
        self._members = dict(members)
        self._exits: dict[str, list[tuple[int, int, float]]] = {}
        self._local: dict[int, _Tree] = {}
        self._global: dict[int, _Tree] = {}
        self._exit_use: dict[tuple[int, int], int] = defaultdict(int)

    def path(self, src: str, dst: str) -> tuple[str, ...]:
        """The node sequence from ``src`` to ``dst`` (both endpoints included)."""
        key = (src, dst)
        cached = self._paths.get(key)
        if cached is None:
            cached = self._route(src, dst)
            self._paths[key] = cached
        return cached

    def _route(self, src: str, dst: str) -> tuple[str, ...]:
        s, d = self._index[src], self._index[dst]
        host = self._region[s]
        if host is None:
            nodes = self._walk(self._global_tree(s), s, d)
            if nodes is None:
                raise RequestError(f"no route from {src!r} to {dst!r}")
            return tuple(self._names[i] for i in nodes)
        ldist, lprev = self._local_tree(s, host)
        best = ldist.get(d, float("inf")) if self._region[d] == host else float("inf")
        via: tuple[int, int] | None = None
        options = []
        for u, v, w in self._exit_arcs(host):
            du = ldist.get(u)
            if du is None:
                continue
            dv = self._global_tree(v)[0].get(d)
            if dv is not None:
                options.append((du + w + dv, u, v))
        shortest = min([best, *(o[0] for o in options)])
        if shortest == float("inf"):
            raise RequestError(f"no route from {src!r} to {dst!r}")
        if best > shortest * (1 + _TIE):
            # equally short exits: take the least used so far, so that routes spread
            tied = [
                (self._exit_use[(u, v)], i)
                for i, (c, u, v) in enumerate(options)
                if c <= shortest * (1 + _TIE)
            ]
            _, u, v = options[min(tied)[1]]
            self._exit_use[(u, v)] += 1
            via = (u, v)
        if via is None:
            nodes = self._walk((ldist, lprev), s, d)
        else:
            head = self._walk((ldist, lprev), s, via[0])
            tail = self._walk(self._global_tree(via[1]), via[1], d)
            assert head is not None and tail is not None
            nodes = head + tail
        assert nodes is not None
        return tuple(self._names[i] for i in nodes)

    def _exit_arcs(self, host: str) -> list[tuple[int, int, float]]:
        hit = self._exits.get(host)
        if hit is None:
            inside = self._members[host]
            hit = self._exits[host] = [
                (u, v, w) for u in sorted(inside) for v, w in self._adj[u] if v not in inside
            ]
        return hit

    def _local_tree(self, s: int, host: str) -> _Tree:
        hit = self._local.get(s)
        if hit is None:
            hit = self._local[s] = self._dijkstra(s, self._members[host])
        return hit

    def _global_tree(self, s: int) -> _Tree:
        hit = self._global.get(s)
        if hit is None:
            hit = self._global[s] = self._dijkstra(s, None)
        return hit

    def _dijkstra(self, src: int, inside: set[int] | None) -> _Tree:
        """Shortest distances from ``src``, through ``inside`` only when given."""
        dist = {src: 0.0}
        prev: dict[int, int] = {}
        done: set[int] = set()
        heap = [(0.0, src)]
        adj = self._adj
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            for v, w in adj[u]:
                if inside is not None and v not in inside:
                    continue
                nd = d + w
                if nd < dist.get(v, float("inf")):
                    dist[v] = nd
                    prev[v] = u
                    heapq.heappush(heap, (nd, v))
        return dist, prev

    @staticmethod
    def _walk(tree: _Tree, src: int, dst: int) -> list[int] | None:
        dist, prev = tree
        if dst not in dist:
            return None
        nodes = [dst]
        while nodes[-1] != src:
            nodes.append(prev[nodes[-1]])
        nodes.reverse()
        return nodes

    def arcs(self, path: tuple[str, ...]) -> list[int]:
        """Arc ids along a node path; KeyError if two consecutive nodes are not linked.
        Memoised per path: the list returned is shared, callers must not change it."""
        hit = self._arc_lists.get(path)
        if hit is None:
            hit = [self.arc_id[(path[i], path[i + 1])] for i in range(len(path) - 1)]
            self._arc_lists[path] = hit
        return hit

    def path_latency(self, path: tuple[str, ...]) -> float:
        return float(sum(self.lat[a] for a in self.arcs(path)))

    def bottleneck(self, path: tuple[str, ...]) -> float:
        """The smallest arc bandwidth along the path, bytes/s."""
        return float(min(self.bw[a] for a in self.arcs(path)))
