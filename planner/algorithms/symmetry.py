"""Automorphisms of a topology: node permutations that keep every arc, its bandwidth and its
latency, and map ranks to ranks.

Found by individualisation and refinement: colour the nodes (rank or not, kind), refine the
colours by the multiset of (arc label, neighbour colour) in and out until stable, then to map
node ``a`` to node ``b`` give each a colour of its own in two copies of the colouring, refine
both, and branch on the first class with more than one node until every class is a single
node; the mapping that pairs the classes is checked arc by arc. The group is the closure of
the maps found (one per rank of a root's orbit), up to a cap on its order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from planner.algorithms.base import PlanContext

ORDER_PER_RANK = 2  # group elements kept at most, per rank: the programs built from a group
# hold a copy of each tree per element (an 8x8 torus: its 64 translations act on the ranks as
# one orbit; its full group has 512 elements)
MAX_BRANCH = 64  # search nodes per map tried before giving up (a map is found in a few)
WORK_PER_RANK = 12  # colour refinements per rank at most, over the whole search (a 64-rank
# torus needs about 3; dense graphs whose maps are many levels deep give up)
MAX_ARC_VISITS = 3_000_000  # nor more arcs visited by them all (~3 s: a 64-GPU full mesh's
# 4,000 arcs would take 20 s for its 768 refinements)
FAILED_CLOSURES = 4  # targets with no map that keeps the group within the cap, after which
# no more are tried
MAPS_TRIED = 8  # maps from a rank to a target looked at for one that commutes


@dataclass(frozen=True)
class Group:
    """Permutations of the topology's nodes (``nodes`` order), each row one element; the
    same elements acting on ranks (``ctx.ranks`` order) and on arcs (``ctx.router`` ids)."""

    nodes: list[str]
    perms: np.ndarray  # (order, nodes)
    ranks: np.ndarray  # (order, ranks)
    arcs: np.ndarray  # (order, arcs)

    @property
    def order(self) -> int:
        return len(self.perms)

    def rank_orbits(self) -> np.ndarray:
        """Each rank's orbit id (the least rank index in its orbit)."""
        return self.ranks.min(axis=0)

    def arc_orbits(self) -> np.ndarray:
        """Each arc's orbit id (the least arc id in its orbit)."""
        return self.arcs.min(axis=0)


def _mix(x: np.ndarray) -> np.ndarray:
    """A fixed 64-bit mixing of each entry (splitmix64's finaliser): sums of mixed values
    hash multisets."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class _Graph:
    def __init__(self, ctx: PlanContext) -> None:
        g = ctx.topo.graph
        self.nodes = list(g.nodes)
        index = {v: i for i, v in enumerate(self.nodes)}
        ranks = set(ctx.ranks)
        labels: dict[tuple, int] = {}
        self.arcs: dict[tuple[int, int], int] = {}
        for u, v, d in g.edges(data=True):
            lab = labels.setdefault((float(d["bw"]), float(d["lat"])), len(labels))
            self.arcs[index[u], index[v]] = lab
        ends = np.array(list(self.arcs), dtype=np.int64).reshape(-1, 2)
        self.tail, self.head = ends[:, 0], ends[:, 1]
        self.label = np.array(list(self.arcs.values()), dtype=np.uint64)
        kinds: dict[tuple, int] = {}
        self.work = WORK_PER_RANK * len(ranks)  # refinements left
        self.size = len(self.nodes) + 2 * len(self.arcs)  # what one refinement round visits
        self.visits = MAX_ARC_VISITS
        self.start = np.array([kinds.setdefault((v in ranks, g.nodes[v].get("kind")),
                                                len(kinds)) for v in self.nodes])

    def refine(self, colors: np.ndarray) -> np.ndarray:
        """The coarsest stable refinement of ``colors`` (canonical: equal inputs up to a node
        permutation give equal outputs up to it): a node's next colour ranks its colour with
        hashes of the multisets of (arc label, colour) of its out- and in-neighbours."""
        self.work -= 1
        n = len(colors)
        classes = len(np.unique(colors))
        lab = self.label << np.uint64(32)
        while True:
            self.visits -= self.size
            c = colors.astype(np.uint64)
            out = np.zeros(n, dtype=np.uint64)
            inn = np.zeros(n, dtype=np.uint64)
            np.add.at(out, self.tail, _mix(lab | c[self.head]))
            np.add.at(inn, self.head, _mix(lab | c[self.tail] | np.uint64(1 << 31)))
            rows = np.stack([c, out, inn], axis=1)
            _, colors = np.unique(rows, axis=0, return_inverse=True)
            colors = colors.ravel()
            count = int(colors.max()) + 1
            if count == classes:
                return colors
            classes = count

    def spent(self) -> bool:
        return self.work < 0 or self.visits < 0

    def is_automorphism(self, perm: np.ndarray) -> bool:
        return all(self.arcs.get((int(perm[u]), int(perm[v]))) == lab
                   for (u, v), lab in self.arcs.items())

    def individualised(self, a: int) -> np.ndarray:
        """The refined colouring with node a given a colour of its own."""
        colors = self.start.copy()
        colors[a] = int(self.start.max()) + 1
        return self.refine(colors)

    def maps(self, ca: np.ndarray, cb: np.ndarray) -> Iterator[np.ndarray]:
        """Automorphisms taking colouring ``ca`` to ``cb`` (both refined), in search order,
        within MAX_BRANCH search nodes."""
        return self._search(ca, cb, [MAX_BRANCH])

    def _search(self, ca: np.ndarray, cb: np.ndarray, budget: list[int]
                ) -> Iterator[np.ndarray]:
        budget[0] -= 1
        if budget[0] < 0 or self.spent() or sorted(ca.tolist()) != sorted(cb.tolist()):
            return
        counts = np.bincount(ca)
        if counts.max() == 1:
            perm = np.empty(len(ca), dtype=np.int64)
            perm[np.argsort(ca)] = np.argsort(cb)
            if self.is_automorphism(perm):
                yield perm
            return
        cell = int(np.nonzero(counts > 1)[0][0])
        x = int(np.nonzero(ca == cell)[0][0])
        top = int(ca.max()) + 1
        for y in np.nonzero(cb == cell)[0]:
            na, nb = ca.copy(), cb.copy()
            na[x] = nb[int(y)] = top
            yield from self._search(self.refine(na), self.refine(nb), budget)


def automorphisms(ctx: PlanContext, max_order: int | None = None) -> Group | None:
    """A group of automorphisms (memoised on the context): for each rank not yet in the orbit
    of an earlier one, maps from it to the ranks its refined colouring cannot tell from it,
    each kept where the group it generates with those before stays within ``max_order``
    elements (a ring of hosts whose GPUs may swap within every host has 2^hosts, the
    rotations and one swap of all hosts' GPUs only 2 x hosts). None where only the identity
    is found."""
    max_order = max_order or ORDER_PER_RANK * len(ctx.ranks)
    key = ("automorphisms", max_order)
    if key in ctx.memo:
        return ctx.memo[key]
    graph = _Graph(ctx)
    failed = 0
    index = {v: i for i, v in enumerate(graph.nodes)}
    rank_ix = np.array([index[r] for r in ctx.ranks])
    base = []
    for v in rank_ix:
        if graph.spent():
            ctx.memo[key] = None
            return None
        base.append(graph.individualised(int(v)))
    sig = [np.bincount(c).tobytes() for c in base]
    gens: list[np.ndarray] = []
    elems = np.arange(len(graph.nodes))[None, :]
    for i in range(len(rank_ix)):
        if (elems[:, rank_ix[:i]] == rank_ix[i]).any():
            continue  # in the orbit of an earlier rank
        for j in range(i + 1, len(rank_ix)):
            if graph.spent() or failed >= FAILED_CLOSURES:
                break
            if sig[j] != sig[i] or (elems[:, rank_ix[i]] == rank_ix[j]).any():
                continue
            grown = _pick(graph.maps(base[i], base[j]), gens, len(graph.nodes), max_order)
            if grown is None:
                failed += 1
            else:
                gens.append(grown[0])
                elems = grown[1]
    group = None
    if len(elems) > 1:
        where = np.full(len(graph.nodes), -1)
        where[rank_ix] = np.arange(len(rank_ix))
        arc_id = ctx.router.arc_id
        arc_list = list(arc_id)
        arc_ix = np.array([[index[u], index[v]] for u, v in arc_list])
        image = np.array([[arc_id[graph.nodes[int(p[u])], graph.nodes[int(p[v])]]
                           for u, v in arc_ix] for p in elems])
        arcs = np.empty_like(image)
        arcs[:, [arc_id[a] for a in arc_list]] = image
        group = Group(graph.nodes, elems, where[elems[:, rank_ix]], arcs)
    ctx.memo[key] = group
    return group


def _pick(maps: Iterator[np.ndarray], gens: list[np.ndarray], size: int, cap: int
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """Of the first MAPS_TRIED ``maps``, the first that commutes with every generator so far
    and keeps the group within ``cap`` elements, else the first that keeps it within: (the
    map, the group's elements), or None. Commuting maps keep the group small (a torus's
    translations: one per rank)."""
    fallback = None
    for k, perm in enumerate(maps):
        if k >= MAPS_TRIED:
            break
        commutes = all(np.array_equal(perm[g], g[perm]) for g in gens)
        if not commutes and fallback is not None:
            continue
        grown = _closure([*gens, perm], size, cap)
        if grown is None:
            continue
        if commutes:
            return perm, grown
        fallback = (perm, grown)
    return fallback


def _closure(gens: list[np.ndarray], size: int, cap: int) -> np.ndarray | None:
    """Every product of ``gens`` (rows; the identity first), or None past ``cap``."""
    ident = np.arange(size)
    seen = {ident.tobytes(): ident}
    frontier = [ident]
    while frontier:
        nxt = []
        for g in frontier:
            for h in gens:
                p = h[g]
                key = p.tobytes()
                if key not in seen:
                    seen[key] = p
                    nxt.append(p)
                    if len(seen) > cap:
                        return None
        frontier = nxt
    return np.stack(list(seen.values()))
