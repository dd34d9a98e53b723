"""Routes between ranks for the tree packings: a tree edge u -> v is a routed path whose inner
nodes only forward (switches, NICs, PCIe switches, CPUs: never another rank), priced per arc.
``RankRoutes`` finds the cheapest such route under any prices (one multi-source Dijkstra);
``QuickRoutes`` keeps each pair's cost-model route where its latency is short enough."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, dijkstra
from syncplan.core.errors import InfeasibleError
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.settings import PACKING
from syncplan.planner.routing import REF_BYTES

Path = tuple[str, ...]


class RankRoutes:
    """Cheapest routes between ranks under per-arc weights (one multi-source Dijkstra)."""

    def __init__(self, ctx: PlanContext, through_ranks: bool = False) -> None:
        router = ctx.router
        names = list(ctx.topo.graph.nodes)
        index = {n: i for i, n in enumerate(names)}
        nv = len(names)
        rank_ix = [index[r] for r in ctx.ranks]
        # each rank gets a source copy holding its out-arcs; unless ``through_ranks``, the
        # rank node itself keeps no out-arcs, so routes never pass through another rank
        copy = {ix: nv + i for i, ix in enumerate(rank_ix)}
        tail, head, ids = [], [], []
        for (u, v), a in router.arc_id.items():
            iu, iv = index[u], index[v]
            if iu in copy:
                tail.append(copy[iu])
                head.append(iv)
                ids.append(a)
                if not through_ranks:
                    continue
            tail.append(iu)
            head.append(iv)
            ids.append(a)
        self.names = names + list(ctx.ranks)
        self.tail, self.head = np.asarray(tail), np.asarray(head)
        self.arc = np.asarray(ids)
        self.size = nv + len(rank_ix)
        self.sources = np.asarray([copy[ix] for ix in rank_ix])
        self.targets = np.asarray(rank_ix)
        self._ends = ([copy[ix] for ix in rank_ix], rank_ix)  # the same, as ints for ``path``
        self.rank_names = list(ctx.ranks)
        self.physical = router.lat + REF_BYTES / router.bw
        # the graph's CSR layout, built once: a solve only puts its weights in (slot[k] is
        # where arc k's weight goes), the same matrix as built from (weights, (tail, head))
        layout = csr_matrix(
            (np.arange(1.0, len(self.arc) + 1), (self.tail, self.head)),
            shape=(self.size, self.size),
        )
        self.graph_layout: tuple[np.ndarray, np.ndarray] | None = None
        if len(layout.data) == len(self.arc):  # else two arcs join the same nodes: summed
            self.graph_layout = (layout.indices, layout.indptr)
            self._slot = np.argsort(layout.data.astype(np.int64))

    def solve(self, price: np.ndarray, tie: bool = True) -> tuple[np.ndarray, list[list[int]]]:
        """(cost, predecessors): cost[i, j] of the cheapest route from rank i to rank j under
        ``price`` per arc (inf where none; 0 on the diagonal), and per rank i each node's
        predecessor on those routes (a list: ``path`` walks it item by item). ``tie`` adds a
        tiny share of each arc's physical cost, so equal prices go to short routes (and no
        weight is 0)."""
        phys = self.physical
        w = price[self.arc]
        if tie:
            w = w + PACKING.price_tie * phys[self.arc] * max(float(price.max()), 1.0 / phys.max())
        else:
            w = np.maximum(w, 1e-300)  # an explicit 0 would still be an edge, but be safe
        if self.graph_layout is None:
            graph = csr_matrix((w, (self.tail, self.head)), shape=(self.size, self.size))
        else:
            data = np.empty(len(w))
            data[self._slot] = w
            graph = csr_matrix((data, *self.graph_layout), shape=(self.size, self.size))
        dist, pred = dijkstra(graph, directed=True, indices=self.sources, return_predecessors=True)
        cost = dist[:, self.targets]
        np.fill_diagonal(cost, 0.0)
        return cost, pred.tolist()

    def path(self, pred: list[list[int]], i: int, j: int) -> Path:
        """Nodes from rank i to rank j along the predecessors of ``solve``."""
        sources, targets = self._ends
        src, node = sources[i], targets[j]
        row = pred[i]
        out = [node]
        while node != src:
            node = row[node]
            if node < 0:
                raise InfeasibleError(
                    f"no route from {self.rank_names[i]!r} to {self.rank_names[j]!r}"
                )
            out.append(node)
        out[-1] = targets[i]
        names = self.names
        return tuple([names[k] for k in reversed(out)])


class QuickRoutes:
    """Rank pairs joined by their cost-model route (``Router.path``) when its latency is at
    most the least that keeps every rank reaching every other (one route per pair, priced
    as the sum of its arcs' prices). Every step of a lockstep program lasts at least its
    slowest route's latency: on meshes whose ranks are also joined by long forwarding routes
    (GPUs over PCIe and the CPU beside their NVLinks), these trees keep steps short."""

    def __init__(self, ctx: PlanContext) -> None:
        n = len(ctx.ranks)
        router = ctx.router
        lat = np.full((n, n), np.inf)
        paths: dict[tuple[int, int], Path] = {}
        for i, a in enumerate(ctx.ranks):
            for j, b in enumerate(ctx.ranks):
                if i != j:
                    paths[i, j] = router.path(a, b)
                    lat[i, j] = float(router.lat[router.arcs(paths[i, j])].sum())
        cap = np.inf
        for c in np.unique(lat[np.isfinite(lat)]):
            adj = csr_matrix(np.where(lat <= c, 1.0, 0.0))
            if connected_components(adj, directed=True, connection="strong")[0] == 1:
                cap = float(c)
                break
        self.pairs = [(i, j) for (i, j) in paths if lat[i, j] <= cap]
        self.paths = paths
        rows, cols = [], []
        for k, (i, j) in enumerate(self.pairs):
            ids = router.arcs(paths[i, j])
            rows.extend([k] * len(ids))
            cols.extend(ids)
        self.incidence = csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(len(self.pairs), len(router.bw))
        )
        self.index = tuple(np.asarray(x) for x in zip(*self.pairs, strict=True))
        self.n = n
        self.physical = router.lat + REF_BYTES / router.bw
        self.cap_s = cap

    def solve(self, price: np.ndarray, tie: bool = True) -> tuple[np.ndarray, None]:
        w = price + (
            PACKING.price_tie * self.physical * max(float(price.max()), 1.0 / self.physical.max())
            if tie
            else 0.0
        )
        cost = np.full((self.n, self.n), np.inf)
        cost[self.index] = self.incidence @ w
        np.fill_diagonal(cost, 0.0)
        return cost, None

    def path(self, pred: None, i: int, j: int) -> Path:
        return self.paths[i, j]


def hop_distances(cost: np.ndarray) -> np.ndarray:
    """Rank-to-rank hops: [i, j] counts routes (each crossing no other rank) from i to j."""
    adj = csr_matrix(np.where(np.isfinite(cost) & (cost > 0), 1.0, 0.0))
    dist = dijkstra(adj, directed=True, unweighted=True)
    if not np.isfinite(dist).all():
        raise InfeasibleError(
            "packing: some rank cannot reach another without forwarding through a third rank"
        )
    return dist.astype(np.int64)
