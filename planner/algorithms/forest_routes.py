"""Equal-cost routes between switches for the host-structured forest.

The router gives every node pair one shortest route, so on a fabric with several equally
short routes between two switches (a fat tree's uplinks to its aggregation switches) every
tree edge between them would cross the same arcs and the others would idle. Here each tree
edge between switches takes, in a fixed order, the equally short route (the router's metric,
``lat + REF_BYTES / bw`` per arc, ties within a relative 1e-9) whose busiest arc is the
least loaded so far, counting every edge routed before it with its tree's share.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence

import numpy as np

from planner.routing import REF_BYTES, Router

Path = tuple[str, ...]
EdgeKey = tuple[int, int, int]  # (tree, from host, to host)

TIE = 1e-9  # relative: routes this close to the shortest count as equally short


class EqualCost:
    """Per switch pair: the arcs of the routes equally as short as the shortest (a DAG)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self._names = list(router.topo.graph.nodes)
        self._index = {n: i for i, n in enumerate(self._names)}
        self._succ: list[list[tuple[int, float, int]]] = [[] for _ in self._names]
        self._pred: list[list[tuple[int, float]]] = [[] for _ in self._names]
        for (u, v), a in router.arc_id.items():
            w = float(router.lat[a] + REF_BYTES / router.bw[a])
            iu, iv = self._index[u], self._index[v]
            self._succ[iu].append((iv, w, a))
            self._pred[iv].append((iu, w))
        self._from: dict[int, dict[int, float]] = {}
        self._to: dict[int, dict[int, float]] = {}
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
        """Nodes on an equally short route from ``src`` to ``dst`` in order of distance from
        ``src``, and per such node its arcs (next node, arc id) along those routes."""
        key = (src, dst)
        hit = self._dags.get(key)
        if hit is not None:
            return hit
        s, t = self._index[src], self._index[dst]
        ds, dt = self._dist(s, True), self._dist(t, False)
        total = ds.get(t, math.inf)
        slack = total * TIE
        on = sorted((v for v in ds if v in dt and ds[v] + dt[v] <= total + slack),
                    key=lambda v: (ds[v], v))
        keep = set(on)
        out: dict[int, list[tuple[int, int]]] = {}
        for u in on:
            out[u] = [(v, a) for v, w, a in self._succ[u]
                      if v in keep and ds[u] + w + dt[v] <= total + slack and ds[v] > ds[u]]
        self._dags[key] = (on, out)
        return on, out

    def alternatives(self, src: str, dst: str) -> bool:
        """Whether more than one route from ``src`` to ``dst`` is equally short."""
        on, out = self.dag(src, dst)
        return any(len(out[u]) > 1 for u in on)

    def least_loaded(self, src: str, dst: str, load: np.ndarray, add: float) -> Path:
        """The equally short route whose busiest arc, after adding ``add`` seconds per byte to
        each arc's ``load`` (seconds per byte), is least loaded; ties: least summed load,
        then the first in node order."""
        on, out = self.dag(src, dst)
        s, t = self._index[src], self._index[dst]
        bw = self.router.bw
        best: dict[int, tuple[float, float, tuple[int, ...]]] = {s: (0.0, 0.0, (s,))}
        for u in on:
            cur = best.get(u)
            if cur is None:
                continue
            for v, a in out[u]:
                x = load[a] + add / bw[a]
                cand = (max(cur[0], x), cur[1] + x, (*cur[2], v))
                old = best.get(v)
                if old is None or cand[:2] < old[:2]:
                    best[v] = cand
        return tuple(self._names[i] for i in best[t][2])


def spread(pairs: Sequence[tuple[EdgeKey, str, str, float]], equal: EqualCost,
           base: np.ndarray) -> dict[EdgeKey, Path]:
    """Routes for tree edges between switches: per (edge, from switch, to switch, share), in
    order, the least loaded equally short route given ``base`` (seconds per byte per arc of
    everything else) and the edges routed before it."""
    load = base.copy()
    bw = equal.router.bw
    out: dict[EdgeKey, Path] = {}
    for key, a, b, share in pairs:
        path = equal.least_loaded(a, b, load, share)
        ids = equal.router.arcs(path)
        load[ids] += share / bw[ids]
        out[key] = path
    return out
