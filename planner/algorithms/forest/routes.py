"""Routes between switches for the host-structured forest, spread over the arcs.

The router gives every node pair one route, so every tree edge between two switches would
cross the same arcs and the others would idle (a fat tree's second uplink per ToR, or the
fast one where the other is degraded). Here each tree edge between switches takes, in a
fixed order, among the routes no longer in latency than the router's (hops break latency
ties: ``FOREST.hop_s`` per hop), the one whose busiest arc is least loaded so far in seconds per
byte, counting every edge routed before it with its tree's share. Each step of the lockstep
schedule pays its slowest route's latency, so no step gets slower; bandwidth is the share
LP's to balance.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence

import numpy as np
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.routing import Router

Path = tuple[str, ...]
EdgeKey = tuple[int, int, int]  # (id of the tree, from host, to host)


class RouteDag:
    """Per switch pair: the arcs of the routes no longer in latency than the router's, kept
    where they get farther from the source (a DAG)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.node_names = list(router.topo.graph.nodes)
        self.node_index = {n: i for i, n in enumerate(self.node_names)}
        self._succ: list[list[tuple[int, float, int]]] = [[] for _ in self.node_names]
        self._pred: list[list[tuple[int, float]]] = [[] for _ in self.node_names]
        for (u, v), a in router.arc_id.items():
            w = float(router.lat[a]) + FOREST.hop_s
            iu, iv = self.node_index[u], self.node_index[v]
            self._succ[iu].append((iv, w, a))
            self._pred[iv].append((iu, w))
        self._from: dict[int, dict[int, float]] = {}
        self._to: dict[int, dict[int, float]] = {}
        self._bw = [float(x) for x in router.bw]
        self._alt: dict[tuple[str, str], bool] = {}
        self._dags: dict[tuple[str, str], tuple[list[int], dict[int, list[tuple[int, int]]]]] = {}

    def _dist(self, src: int, forward: bool) -> dict[int, float]:
        cache = self._from if forward else self._to
        hit = cache.get(src)
        if hit is not None:
            return hit
        dist = {src: 0.0}
        heap = [(0.0, src)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            edges: Iterable[tuple] = self._succ[u] if forward else self._pred[u]
            for e in edges:
                v, w = e[0], e[1]
                nd = d + w
                if nd < dist.get(v, math.inf):
                    dist[v] = nd
                    heapq.heappush(heap, (nd, v))
        cache[src] = dist
        return dist

    def dag(self, src: str, dst: str) -> tuple[list[int], dict[int, list[tuple[int, int]]]]:
        """Nodes on a route from ``src`` to ``dst`` no longer than the router's, in order of
        distance from ``src``, and per such node its arcs (next node, arc id) that stay on
        such a route and get farther from ``src``."""
        key = (src, dst)
        hit = self._dags.get(key)
        if hit is not None:
            return hit
        s, t = self.node_index[src], self.node_index[dst]
        ds, dt = self._dist(s, True), self._dist(t, False)
        total = self.length(self.router.path(src, dst))
        slack = total * FOREST.route_tie
        on = sorted(
            (v for v in ds if v in dt and ds[v] + dt[v] <= total + slack), key=lambda v: (ds[v], v)
        )
        keep = set(on)
        out: dict[int, list[tuple[int, int]]] = {}
        for u in on:
            out[u] = [
                (v, a)
                for v, w, a in self._succ[u]
                if v in keep and ds[u] + w + dt[v] <= total + slack and ds[v] > ds[u]
            ]
        self._dags[key] = (on, out)
        return on, out

    def length(self, path: Path) -> float:
        """Latency of ``path`` plus FOREST.hop_s per hop."""
        return float(self.router.path_latency(path)) + FOREST.hop_s * (len(path) - 1)

    def alternatives(self, src: str, dst: str) -> bool:
        """Whether the DAG from ``src`` to ``dst`` holds more than one route, all through
        nodes that hold no rank (switches: on direct-wired meshes and tori, whose GPUs
        forward, the host trees are 4-14x the floor and spreading was most of their time)."""
        key = (src, dst)
        hit = self._alt.get(key)
        if hit is None:
            on, out = self.dag(src, dst)
            nodes = self.router.topo.nodes
            hit = self._alt[key] = any(len(out[u]) > 1 for u in on) and not any(
                nodes[self.node_names[u]].can_hold_rank for u in on[1:-1]
            )
        return hit

    def least_loaded(self, src: str, dst: str, load: list[float], add: float) -> Path:
        """The route of the DAG whose busiest arc, after adding ``add`` bytes to each of its
        arcs, is least loaded (``load``: seconds per byte per arc); ties: least summed load,
        then the first in node order. The router's route where that one is longer than it
        (the DAG's arcs each lie on a route no longer than the router's; their chains need
        not)."""
        on, out = self.dag(src, dst)
        s, t = self.node_index[src], self.node_index[dst]
        bw = self._bw
        # per node reached: the busiest arc and the summed load of its best route so far,
        # and the node before it (nodes come in order of distance, so a node is final
        # before any arc leaves it)
        top: dict[int, float] = {s: 0.0}
        total: dict[int, float] = {s: 0.0}
        prev: dict[int, int] = {s: -1}
        for u in on:
            m0 = top.get(u)
            if m0 is None:
                continue
            s0 = total[u]
            for v, a in out[u]:
                x = load[a] + add / bw[a]
                m = m0 if m0 > x else x
                sm = s0 + x
                old = top.get(v)
                if old is None or m < old or (m == old and sm < total[v]):
                    top[v], total[v], prev[v] = m, sm, u
        if t not in top:
            return self.router.path(src, dst)
        chain = [t]
        while prev[chain[-1]] >= 0:
            chain.append(prev[chain[-1]])
        path = tuple(self.node_names[i] for i in reversed(chain))
        limit = self.length(self.router.path(src, dst)) * (1 + FOREST.route_tie)
        return path if self.length(path) <= limit else self.router.path(src, dst)


def spread(
    pairs: Sequence[tuple[EdgeKey, str, str, float]], dag: RouteDag, base: np.ndarray
) -> dict[EdgeKey, Path]:
    """Routes for tree edges between switches: per (edge, from switch, to switch, share), in
    order, the least loaded route (``RouteDag.least_loaded``) given ``base`` (seconds per
    byte per arc of everything else) and the edges routed before it."""
    load = [float(x) for x in base]
    bw = dag._bw
    out: dict[EdgeKey, Path] = {}
    for key, a, b, share in pairs:
        path = dag.least_loaded(a, b, load, share)
        for i in dag.router.arcs(path):
            load[i] += share / bw[i]
        out[key] = path
    return out
