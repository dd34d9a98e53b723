"""Forest all-reduce: trees rooted at different ranks, reduce and broadcast pipelined together.

Hosts are super-nodes. A *lane* fixes, on every host, one rank (its port) and one way out of
the host (a NIC and the switch behind it); lanes spread over the host's ranks and NICs, so on
a rail-optimised cluster lane i is GPU i, NIC i and rail i. Every tree lives in one lane:
inside each host the other ranks reduce straight to the port and get the result back from it
(one hop over NVLink/PCIe), and between hosts the ports form a shallow tree whose edges are
routed port -> NIC -> switches -> NIC -> port.

Host-level trees come from degree targets: a host's load on its NIC is its degree in the tree,
so degrees are water-filled in proportion to the host's bandwidth (at least 1, summing to
2 (hosts - 1)), and ``t`` trees are built in which every host is internal in about one tree and
a leaf elsewhere (t = hosts gives stars; t ~ sqrt(hosts) keeps the height at 2). A linear
program over all trees of all lanes (HiGHS) then sets the shares so that the most loaded arc,
counting every arc of every routed path, is as light as possible.

Schedule (lockstep cost model): each tree's share is cut into P pieces; a port at depth k
(of a tree of height <= H) sends its partial sum of piece p at step p + H + 1 - k, as late as
its parent can use it, so the root holds the piece after step p + H; the result reaches depth
k at step p + H + k. Reduce and broadcast are mirror images: a leaf under the root sends and
hears back one step apart. Intra-host transfers are either merged per lane (gathered at step
p, handed back at step p + 2 H + 1, one transfer per 1, 2 or 4 consecutive pieces) or split
per tree (a host at depth k gathers at p + H - k, when its children's sums arrive, and hands
back at p + H + 1 + k); split, a tree's root gathers while its children send, which shortens
the pipeline's fill. The reduce of later pieces overlaps the broadcast of earlier ones. P
trades the pipeline's fill against the latency every step pays; it is chosen on an exact
per-arc model of the step times. On up to 8 hosts, hub trees (a degree-1 root above a hub)
join the stars so that a saturated host can hear before it sends, as a mirrored leaf.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.algorithms.base import Candidate, PlanContext
from planner.errors import InfeasibleError
from planner.program import Program, Step, Transfer
from planner.routing import REF_BYTES

MAX_LANES = 16
INTRA_GROUPS = (1, 2, 4)  # pieces one merged intra-host transfer may cover
HUB_MAX_HOSTS = 8  # stars plus hub trees (see _hub_trees) up to this many hosts
FAN_IN_CONFIGS = 256  # near-best configurations whose per-step fan-in is counted
FAN_IN_TOLERANCE = 0.02  # model time traded for less fan-in: see forest() and docs/planner.md
MAX_TRANSFERS = 800_000  # ~60 MB of JSON with the route table (planner.program)
FEW_TREES_ABOVE = 64  # hosts; see tree_counts
MAX_UNITS = 1 << 20
PIECE_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
STAGGER_WIDTHS = (1, 2, 3, 4, 6, 8)
RAMPS = (0, 1, 2, 3)
MIN_PIECES = 4
BALANCE_MAX_CROSSINGS = 100_000  # arc crossings per piece; above: fluid LP shares only
LP_CONFIGS = 2  # best (trees, stagger) configurations whose piece sizes an LP refines
LP_PIECES_BELOW = 3  # piece counts below the best equal/ramped one to try with LP sizes

Path = tuple[str, ...]


@dataclass
class _Lane:
    ports: list[int]  # per host: rank index of the port
    up: list[Path]  # per host: port -> ... -> first node outside the host
    down: list[Path]  # per host: first node outside -> ... -> port
    cap: np.ndarray  # per host: bytes/s this lane can expect out of the host
    leaves_in: list[list[tuple[int, Path]]] = field(default_factory=list)  # (rank, rank->port)
    leaves_out: list[list[tuple[int, Path]]] = field(default_factory=list)  # (rank, port->rank)
    # per host: first node outside -> (port -> ... -> it, it -> ... -> port), cheapest per node
    exits: list[dict[str, tuple[Path, Path]]] = field(default_factory=list)
    # hosts that leave by another switch than the lane's usual one; tree neighbours follow
    detour: frozenset[int] = frozenset()
    groups: list[int] | None = None  # switch groups for host trees (default: by exit)


@dataclass
class _Tree:
    lane: int
    root: int  # host index
    parent: list[int]  # per host: parent host, -1 at the root
    height: list[int]  # per host: height in the host tree (leaves 0)
    depth: list[int]


class _Arcs:
    """Arc ids and latencies of node paths, cached."""

    def __init__(self, ctx: PlanContext) -> None:
        self.router = ctx.router
        self._cache: dict[Path, tuple[np.ndarray, float]] = {}

    def __call__(self, path: Path) -> tuple[np.ndarray, float]:
        hit = self._cache.get(path)
        if hit is None:
            arcs = np.asarray(self.router.arcs(path), dtype=np.int64)
            hit = (arcs, float(self.router.lat[arcs].sum()))
            self._cache[path] = hit
        return hit


def _weight(data: dict) -> float:
    return data["lat"] + REF_BYTES / data["bw"]


def _local_tree(ctx: PlanContext, inside: set[str], src: str, reverse: bool) -> dict[str, Path]:
    """Shortest paths from ``src`` to (``reverse``: into ``src`` from) every node of ``inside``,
    using only nodes of ``inside``."""
    g = ctx.topo.graph
    adj = g.pred if reverse else g.succ
    dist = {src: 0.0}
    prev: dict[str, str] = {}
    heap = [(0.0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for v, data in adj[u].items():
            if v not in inside:
                continue
            nd = d + _weight(data)
            if nd < dist.get(v, math.inf) - 1e-18:
                dist[v] = nd
                prev[v] = u
                heapq.heappush(heap, (nd, v))
    out: dict[str, Path] = {}
    for v in dist:
        nodes = [v]
        while nodes[-1] != src:
            nodes.append(prev[nodes[-1]])
        out[v] = tuple(nodes) if reverse else tuple(reversed(nodes))
    return out


def _lanes(ctx: PlanContext) -> list[_Lane]:
    topo, g = ctx.topo, ctx.topo.graph
    groups = ctx.host_groups
    m = len(groups)
    nlanes = min(MAX_LANES, max(len(gr) for gr in groups))
    by_host: dict[str, set[str]] = defaultdict(set)
    for nid, node in topo.nodes.items():
        if node.host is not None:
            by_host[node.host].add(nid)
    lanes = [_Lane([], [], [], np.zeros(m)) for _ in range(nlanes)]
    for h, group in enumerate(groups):
        host = topo.host_of(ctx.ranks[group[0]])
        inside = by_host.get(host, set()) | {ctx.ranks[i] for i in group}
        exits = [(u, v) for u in sorted(inside) for v in g.succ[u]
                 if v not in inside and g.has_edge(v, u)]
        if m > 1 and not exits:
            raise InfeasibleError(f"forest: host {host!r} has no full-duplex link out")
        used: dict[tuple[str, str], int] = defaultdict(int)
        choice: list[tuple[str, str] | None] = []
        for lane_i, lane in enumerate(lanes):
            port = group[lane_i % len(group)]
            pnode = ctx.ranks[port]
            out_paths = _local_tree(ctx, inside, pnode, reverse=False)
            in_paths = _local_tree(ctx, inside, pnode, reverse=True)
            lane.ports.append(port)
            lane.leaves_in.append([])
            lane.leaves_out.append([])
            for r in group:
                if r == port:
                    continue
                rn = ctx.ranks[r]
                lane.leaves_in[h].append((r, in_paths.get(rn) or ctx.router.path(rn, pnode)))
                lane.leaves_out[h].append((r, out_paths.get(rn) or ctx.router.path(pnode, rn)))
            lane.exits.append({})
            if m == 1:
                lane.up.append(())
                lane.down.append(())
                choice.append(None)
                continue
            cost = {}
            for u, v in exits:
                if u in out_paths and u in in_paths:
                    d = _path_cost(g, out_paths[u]) + _path_cost(g, in_paths[u])
                    cost[(u, v)] = d + _weight(g.edges[u, v]) + _weight(g.edges[v, u])
            for u, v in sorted(cost, key=lambda e: -cost[e]):  # cheapest per switch last
                lane.exits[h][v] = ((*out_paths[u], v), (v, *in_paths[u]))
            if not cost:
                raise InfeasibleError(f"forest: rank {pnode!r} cannot reach a link out of its "
                                      "host inside the host")
            best = min(cost.values())
            tied = [e for e in exits if e in cost and cost[e] <= best * (1 + 1e-9) + 1e-15]
            exit_ = min(tied, key=lambda e: (used[e], exits.index(e)))
            used[exit_] += 1
            choice.append(exit_)
            u, v = exit_
            lane.up.append((*out_paths[u], v))
            lane.down.append((v, *in_paths[u]))
        for lane, exit_ in zip(lanes, choice, strict=True):
            if exit_ is None:
                lane.cap[h] = 1.0
                continue
            path = lane.up[h] + lane.down[h][1:]
            bw = min(g.edges[a, b]["bw"] for a, b in itertools.pairwise(path))
            lane.cap[h] = bw / used[exit_]
    for lane in lanes:
        if m > 1:
            usual = max(set(up[-1] for up in lane.up), key=[up[-1] for up in lane.up].count)
            lane.detour = frozenset(h for h, up in enumerate(lane.up) if up[-1] != usual
                                    and all(up[-1] in ex for ex in lane.exits))
            if lane.detour:
                lane.groups = [0 if h in lane.detour else g
                               for h, g in enumerate(_host_switch_groups(lane))]
    return lanes


def _path_cost(g, path: Path) -> float:
    return sum(_weight(g.edges[a, b]) for a, b in itertools.pairwise(path))


def _detour(ctx: PlanContext, inside: set[str], path: Path) -> Path | None:
    """Shortest path with ``path``'s endpoints inside ``inside`` sharing no arc with it."""
    g = ctx.topo.graph
    banned = set(itertools.pairwise(path))
    src, dst = path[0], path[-1]
    dist, prev, heap = {src: 0.0}, {}, [(0.0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if u == dst:
            break
        if d > dist[u]:
            continue
        for v, data in g.succ[u].items():
            if v not in inside or (u, v) in banned:
                continue
            nd = d + _weight(data)
            if nd < dist.get(v, math.inf) - 1e-18:
                dist[v], prev[v] = nd, u
                heapq.heappush(heap, (nd, v))
    if dst not in prev:
        return None
    nodes = [dst]
    while nodes[-1] != src:
        nodes.append(prev[nodes[-1]])
    return tuple(reversed(nodes))


def detour_lanes(ctx: PlanContext, lanes: list[_Lane]) -> list[_Lane]:
    """Per lane, a copy whose nearest leaves (per host, those with the cheapest detour) reach
    the port and hear back from it over paths sharing no arc with the lane's own, e.g. a GPU's
    PCIe partner besides NVLink. The share LP splits each lane's bytes between the two, so
    links that the bound counts but the lane leaves idle carry their part."""
    topo, g = ctx.topo, ctx.topo.graph
    out = []
    for lane in lanes:
        ins, outs, swapped = [], [], False
        for h, port in enumerate(lane.ports):
            host = topo.host_of(ctx.ranks[port])
            inside = {n for n, node in topo.nodes.items() if node.host == host}
            inside |= {ctx.ranks[i] for i in ctx.host_groups[h]}
            alt = {}
            for (r, p_in), (_, p_out) in zip(lane.leaves_in[h], lane.leaves_out[h], strict=True):
                a_in, a_out = _detour(ctx, inside, p_in), _detour(ctx, inside, p_out)
                if a_in is not None and a_out is not None:
                    alt[r] = (a_in, a_out, _path_cost(g, a_in) + _path_cost(g, a_out))
            best = min((c for *_, c in alt.values()), default=math.inf)
            pick = {r for r, (*_, c) in alt.items() if c <= best * (1 + 1e-9)}
            swapped |= bool(pick)
            ins.append([(r, alt[r][0] if r in pick else p) for r, p in lane.leaves_in[h]])
            outs.append([(r, alt[r][1] if r in pick else p) for r, p in lane.leaves_out[h]])
        if swapped:
            out.append(dataclasses.replace(lane, leaves_in=ins, leaves_out=outs))
    return out


def exit_detour_lanes(ctx: PlanContext, lanes: list[_Lane], limit: int) -> list[_Lane]:
    """Where a host's exit in a lane is slower than its exits in other lanes (a degraded NIC),
    copies of the lane in which that host leaves by another lane's exit, one copy per other
    exit; the host's tree neighbours reach it through their own exit to the same switch. The
    share LP moves bytes off the slow exit onto the others."""
    g = ctx.topo.graph
    out: list[_Lane] = []
    for lane in lanes:
        if not lane.up or not lane.up[0]:
            continue
        groups = _host_switch_groups(lane)
        for h in range(len(lane.ports)):
            if lane.cap[h] >= max(ln.cap[h] for ln in lanes) * (1 - 1e-9):
                continue
            own = lane.up[h][-1]
            for sw in lane.exits[h]:
                if sw == own or not all(sw in ex for ex in lane.exits):
                    continue
                users = [ln for ln in lanes if ln.up[h][-1] == sw]
                # the host takes the port, leaves and way out of a lane that owns the exit
                src = users[0] if users else lane
                cap = lane.cap.copy()
                up, down = (src.up[h], src.down[h]) if users else lane.exits[h][sw]
                bw = min(g.edges[a, b]["bw"] for a, b in itertools.pairwise(up + down[1:]))
                cap[h] = bw / max(1, len(users))
                new = _Lane(list(lane.ports), list(lane.up), list(lane.down), cap,
                            list(lane.leaves_in), list(lane.leaves_out), lane.exits,
                            frozenset({h}), groups)
                new.ports[h], new.up[h], new.down[h] = src.ports[h], up, down
                new.leaves_in[h], new.leaves_out[h] = src.leaves_in[h], src.leaves_out[h]
                out.append(new)
                if len(out) >= limit:
                    return out
    return out


# ---- host-level trees -------------------------------------------------------------------

def degree_targets(cap: np.ndarray) -> np.ndarray:
    """Tree degrees per host, in [1, m-1], summing to 2 (m-1), as proportional to ``cap`` as
    those limits allow (water-filling)."""
    m = len(cap)
    if m <= 2:
        return np.ones(m)
    target = 2.0 * (m - 1)
    lo, hi = 0.0, (m - 1) / cap.min()
    for _ in range(100):
        mid = (lo + hi) / 2
        if np.clip(mid * cap, 1, m - 1).sum() < target:
            lo = mid
        else:
            hi = mid
    delta = np.clip(hi * cap, 1, m - 1)
    excess = delta - 1
    return 1 + excess * ((m - 2) / excess.sum())


def _round_to_total(x: np.ndarray, total: int) -> np.ndarray:
    base = np.floor(x).astype(np.int64)
    short = total - int(base.sum())
    if short > 0:
        order = np.argsort(-(x - base), kind="stable")
        base[order[:short]] += 1
    return base


def host_trees(cap: np.ndarray, groups: Sequence[int], t: int) -> list[tuple[int, list[int]]]:
    """``t`` spanning trees over hosts as (root, parent list); ``groups[h]`` is the switch
    group of host h (trees cross between groups once per group)."""
    m = len(cap)
    if m == 1:
        return [(0, [-1])]
    delta = degree_targets(cap)
    extra = _round_to_total(t * (delta - 1), t * (m - 2))
    bins: list[dict[int, int]] = [{} for _ in range(t)]
    b, room = 0, m - 2
    for h in np.argsort(-extra, kind="stable"):
        left = int(extra[h])
        while left > 0 and b < t:
            take = min(left, room)
            bins[b][int(h)] = bins[b].get(int(h), 0) + take
            left -= take
            room -= take
            if room == 0:
                b, room = b + 1, m - 2
    order = np.argsort(-cap, kind="stable")
    # hosts that are leaves everywhere and barely above degree 1: their NIC has no slack for
    # a pipeline offset between sending and hearing back, so they go under the root
    lean = {int(h) for h in range(m) if extra[h] == 0 and delta[h] < 1.5}
    trees = []
    for j, budget in enumerate(bins):
        trees.append(_build_tree(m, budget, groups, order, j, lean))
    return trees


def _build_tree(m: int, budget: dict[int, int], groups: Sequence[int], order: np.ndarray,
                j: int, lean: set[int]) -> tuple[int, list[int]]:
    members: dict[int, list[int]] = defaultdict(list)
    for h in order:  # fastest hosts first
        members[groups[h]].append(int(h))
    parent = [-1] * m
    group_roots = []
    for grp, hosts in members.items():
        internal = sorted((h for h in hosts if budget.get(h)), key=lambda h: -budget[h])
        root = internal[0] if internal else hosts[j % len(hosts)]
        children_left = {h: budget.get(h, 0) for h in hosts}
        children_left[root] = budget.get(root, 0) + 1
        # slowest leaves first: they take the root's spare slots, where (sending as late as
        # possible) a leaf's reduce and broadcast are one step apart instead of 2 depth - 1
        leaves = [h for h in reversed(hosts) if h != root and not budget.get(h)]
        near = [h for h in leaves if h in lean]
        if near:  # when the root has too few spare slots, a different one misses out per tree
            k = j % len(near)
            near = near[k:] + near[:k]
        rest = ([h for h in internal if h != root] + near
                + [h for h in leaves if h not in lean])
        queue, qi, ri = [root], 0, 0
        while ri < len(rest) and qi < len(queue):
            node = queue[qi]
            while children_left[node] > 0 and ri < len(rest):
                child = rest[ri]
                ri += 1
                parent[child] = node
                children_left[node] -= 1
                if budget.get(child):
                    queue.append(child)
            qi += 1
        for k, child in enumerate(rest[ri:]):  # rounding left some without a slot
            parent[child] = queue[k % len(queue)]
        group_roots.append((budget.get(root, 0), grp, root))
    group_roots.sort(key=lambda x: -x[0])
    top = group_roots[0][2]
    for _, _, r in group_roots[1:]:
        parent[r] = top
    return top, parent


def _heights(root: int, parent: list[int]) -> tuple[list[int], list[int]]:
    m = len(parent)
    children: list[list[int]] = [[] for _ in range(m)]
    for h, p in enumerate(parent):
        if p >= 0:
            children[p].append(h)
    depth, order = [0] * m, [root]
    for h in order:
        for c in children[h]:
            depth[c] = depth[h] + 1
            order.append(c)
    if len(order) != m:
        raise AssertionError("host tree does not span every host")
    height = [0] * m
    for h in reversed(order):
        for c in children[h]:
            height[h] = max(height[h], height[c] + 1)
    return height, depth


# ---- shares (LP) and pieces ---------------------------------------------------------------

class _Plan:
    """One choice of trees: their routed loads, shares, and the per-arc phase profile.

    Trees of a lane may start later than the lane's first tree (``shift``): staggering the
    trees spreads each NIC's reduce and broadcast bytes over more steps, so the busiest arc
    changes less from step to step and the pipeline's fill and drain cost less.
    """

    def __init__(self, ctx: PlanContext, lanes: list[_Lane], trees: list[_Tree],
                 arcs: _Arcs, split_intra: bool = False, late: bool = True) -> None:
        self.ctx, self.lanes, self.trees, self.arcs = ctx, lanes, trees, arcs
        self.split_intra = split_intra and late
        self.late = late
        self.hmax = max((max(tr.height) for tr in trees), default=0)
        self.base_offsets = 2 * self.hmax + 2
        self.shift = np.zeros(len(trees), dtype=np.int64)
        self.offsets = self.base_offsets
        self._core: dict[tuple[str, str], Path] = {}
        self._flat: tuple[np.ndarray, ...] | None = None

    def set_stagger(self, width: int) -> None:
        """Tree k of each lane starts ``k mod width`` steps after the lane's first tree."""
        seen: dict[int, int] = defaultdict(int)
        for j, tr in enumerate(self.trees):
            self.shift[j] = seen[tr.lane] % width
            seen[tr.lane] += 1
        self.offsets = self.base_offsets + int(self.shift.max(initial=0))

    def edge_path(self, lane: _Lane, a: int, b: int) -> Path:
        """Route from the port of host a to the port of host b."""
        up, down = lane.up[a], lane.down[b]
        if up[-1] != down[0] and (a in lane.detour) != (b in lane.detour):
            if b in lane.detour:
                up = lane.exits[a].get(down[0], (up,))[0]
            else:
                down = lane.exits[b].get(up[-1], (None, down))[1]
        if up[-1] == down[0]:
            return up + down[1:]
        key = (up[-1], down[0])
        core = self._core.get(key)
        if core is None:
            core = self._core[key] = self.ctx.router.path(*key)
        return up + core[1:] + down[1:]

    def offsets_of(self, j: int) -> tuple[list[int], list[int]]:
        """Per host of tree j: the offset at which its port sends its partial sum up (the root:
        H + 1, when it starts the broadcast) and at which it hears the result.

        ``late``: a port at depth k sends at H + 1 - k, as late as its parent can use it, and
        hears at H + k; reduce and broadcast are mirror images (send + hear = 2 H + 1).
        Otherwise a port sends at 1 + its height and hears at H + k."""
        tr, hmax = self.trees[j], self.hmax
        if not self.late:
            return [1 + h for h in tr.height], [hmax + d for d in tr.depth]
        send = [0] * len(tr.parent)
        send[tr.root] = hmax + 1
        children: list[list[int]] = [[] for _ in tr.parent]
        for c, q in enumerate(tr.parent):
            if q >= 0:
                children[q].append(c)
        order = [tr.root]
        for q in order:
            for c in children[q]:
                send[c] = send[q] - 1
                order.append(c)
        return send, [2 * hmax + 1 - x for x in send]

    def phases(self, j: int) -> list[tuple[int, int, int, bool, Path]]:
        """Network transfers of tree j: (offset, src rank, dst rank, reduce, path), at the
        offsets of ``offsets_of``."""
        tr, lane = self.trees[j], self.lanes[self.trees[j].lane]
        s = int(self.shift[j])
        send, hear = self.offsets_of(j)
        out = []
        for c, q in enumerate(tr.parent):
            if q < 0:
                continue
            out.append((s + send[c], lane.ports[c], lane.ports[q], True,
                        self.edge_path(lane, c, q)))
            out.append((s + hear[c], lane.ports[q], lane.ports[c], False,
                        self.edge_path(lane, q, c)))
        return out

    def tree_intra(self, j: int) -> list[tuple[int, int, int, bool, Path]]:
        """Split intra-host transfers of tree j: a host gathers its ranks' values one offset
        before it sends (when its children's sums arrive) and hands the result back one
        offset after it hears (when it forwards it to its children)."""
        if not self.split_intra:
            return []
        lane = self.lanes[self.trees[j].lane]
        s = int(self.shift[j])
        send, hear = self.offsets_of(j)
        out = []
        for h, port in enumerate(lane.ports):
            for r, path in lane.leaves_in[h]:
                out.append((s + send[h] - 1, r, port, True, path))
            for r, path in lane.leaves_out[h]:
                out.append((s + hear[h] + 1, port, r, False, path))
        return out

    def intra(self, li: int) -> list[tuple[int, int, int, bool, Path]]:
        """Merged intra-host transfers of lane li (all its trees): gather at offset 0, hand
        back at the last offset; none when intra-host transfers are split per tree."""
        if self.split_intra:
            return []
        lane = self.lanes[li]
        out = []
        for h, port in enumerate(lane.ports):
            for r, path in lane.leaves_in[h]:
                out.append((0, r, port, True, path))
            for r, path in lane.leaves_out[h]:
                out.append((self.offsets - 1, port, r, False, path))
        return out

    def _entries(self) -> tuple[np.ndarray, ...]:
        """Every arc crossing of every tree at shift 0, flattened: (arc, column, offset,
        path latency, is-final-intra); column j < trees is tree j, trees + l is lane l's
        intra-host transfers."""
        if self._flat is not None:
            return self._flat
        nt = len(self.trees)
        arc_l: list[np.ndarray] = []
        meta: list[tuple[int, int, float, bool]] = []

        def add(col: int, items: list, final: bool) -> None:
            for off, _, _, _, path in items:
                ids, plat = self.arcs(path)
                arc_l.append(ids)
                meta.append((col, off, plat, final and off > 0))

        saved = self.shift.copy()
        self.shift[:] = 0
        for j in range(nt):
            add(j, self.phases(j), False)
            add(j, self.tree_intra(j), False)
        self.shift[:] = saved
        for li in range(len(self.lanes)):
            add(nt + li, self.intra(li), True)
        counts = np.fromiter((len(a) for a in arc_l), dtype=np.int64, count=len(arc_l))
        cols, offs, lats, finals = (np.repeat(np.asarray(x), counts)
                                    for x in zip(*meta, strict=True))
        self._flat = (np.concatenate(arc_l), cols, offs, lats, finals)
        return self._flat

    def solve_shares(self) -> float:
        """Set ``self.w`` (share per tree) minimising the busiest arc; return its time per
        byte of buffer (the fluid time / size)."""
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix, csr_matrix, hstack

        nt = len(self.trees)
        bw = self.ctx.router.bw
        arc, col, *_ = self._entries()
        lane_of = np.array([tr.lane for tr in self.trees] + list(range(len(self.lanes))))
        narcs = len(bw)
        # crossings per (arc, tree), and per (arc, lane) for the lanes' intra-host transfers
        net = col < nt
        m_net = coo_matrix((np.ones(int(net.sum())), (arc[net], col[net])),
                           shape=(narcs, nt)).tocsr()
        m_intra = coo_matrix((np.ones(int((~net).sum())), (arc[~net], lane_of[col[~net]])),
                             shape=(narcs, len(self.lanes))).tocsr()
        tree_lane = csr_matrix((np.ones(nt), ([tr.lane for tr in self.trees], np.arange(nt))),
                               shape=(len(self.lanes), nt))
        load = (m_net + m_intra @ tree_lane).tocsr()
        used = np.unique(load.nonzero()[0])
        load = csr_matrix(load[used].multiply(1.0 / bw[used][:, None]))
        self.busy_arcs = used
        if nt == 1:
            self.w = np.ones(1)
            return float(load.toarray().max())
        scale = float(np.abs(load.data).max())  # HiGHS' tolerances want entries near 1
        a_ub = hstack([load / scale, coo_matrix(-np.ones((len(used), 1)))]).tocsr()
        a_eq = np.hstack([np.ones(nt), [0.0]])[None, :]
        cost = np.zeros(nt + 1)
        cost[-1] = 1.0
        res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(len(used)), A_eq=a_eq, b_eq=[1.0],
                      bounds=[(0, None)] * (nt + 1), method="highs")
        if res.status != 0:
            self.w = np.full(nt, 1.0 / nt)
            return float((load @ self.w).max())
        w = np.maximum(res.x[:nt], 0)
        self.w = w / w.sum()
        arc_time = load @ self.w
        self.busy_arcs = used[arc_time >= arc_time.max() * (1 - 1e-6)]
        return float(arc_time.max())

    def leaf_bound(self) -> bool:
        """Whether a busiest arc of the fluid optimum carries intra-host leaf transfers."""
        arc, col, *_ = self._entries()
        leaf_arcs = arc[col >= len(self.trees)]
        return bool(np.isin(self.busy_arcs, leaf_arcs).any())

    def balance_phases(self, fluid: float, slack: float = 1e-4) -> None:
        """Among shares within ``slack`` of the fluid optimum, pick ones whose pipeline fill
        and drain are cheapest: minimise, summed over the first and last ``offsets - 1`` steps
        of an equal-piece pipeline, the busiest arc's load (the bytes that started or still
        have to run). Mirror-image trees (one reducing where another broadcasts) then share
        the arcs, so every arc's load has the same shape in every step."""
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix, csr_matrix, hstack, vstack

        nt, no = len(self.trees), self.base_offsets
        if nt == 1:
            return
        bw = self.ctx.router.bw
        arc, col, off, _, last = self._entries()
        off = np.where(last, no - 1, off)
        lane_of = np.array([tr.lane for tr in self.trees] + list(range(len(self.lanes))))
        tree_lane = csr_matrix((np.ones(nt), ([tr.lane for tr in self.trees], np.arange(nt))),
                               shape=(len(self.lanes), nt))
        used = np.unique(arc)
        pos = np.searchsorted(used, arc)
        na = len(used)
        net = col < nt
        per_off = []
        for o in range(no):
            sel_n, sel_i = net & (off == o), ~net & (off == o)
            mn = coo_matrix((np.ones(int(sel_n.sum())), (pos[sel_n], col[sel_n])), shape=(na, nt))
            mi = coo_matrix((np.ones(int(sel_i.sum())), (pos[sel_i], lane_of[col[sel_i]])),
                            shape=(na, len(self.lanes)))
            per_off.append(csr_matrix((mn.tocsr() + mi.tocsr() @ tree_lane)
                                      .multiply(1.0 / bw[used][:, None])))
        total = per_off[0]
        prefix = [per_off[0]]
        for o in range(1, no):
            total = total + per_off[o]
            if o < no - 1:
                prefix.append(total)
        blocks = prefix + [total - p for p in prefix]
        nz = len(blocks)
        scale = float(abs(total).max())
        if scale <= 0:
            return
        a_ub = vstack([hstack([b / scale, coo_matrix((-np.ones(na), (np.arange(na),
                                                                      np.full(na, k))),
                                                     shape=(na, nz))])
                       for k, b in enumerate(blocks)]
                      + [hstack([total / scale, csr_matrix((na, nz))])]).tocsr()
        b_ub = np.concatenate([np.zeros(na * nz), np.full(na, fluid * (1 + slack) / scale)])
        a_eq = np.concatenate([np.ones(nt), np.zeros(nz)])[None, :]
        cost = np.concatenate([np.zeros(nt), np.ones(nz)])
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0],
                      bounds=[(0, None)] * (nt + nz), method="highs")
        if res.status == 0:
            w = np.maximum(res.x[:nt], 0)
            self.w = w / w.sum()

    def profile(self) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct arc profile: seconds per byte of buffer in each phase offset, then in
        the lanes' merged intra-host gather and hand-back (two more columns, placed per group
        of pieces by ``model_time``), and the largest path latency through the arc in each
        (-inf where unused)."""
        nt, no = len(self.trees), self.offsets
        bw = self.ctx.router.bw
        narcs = len(bw)
        arc, col, off, plat, last = self._entries()
        lane_w = np.zeros(len(self.lanes))
        np.add.at(lane_w, [tr.lane for tr in self.trees], self.w)
        weight = np.concatenate([self.w, lane_w])[col]
        off = np.where(col < nt, off + self.shift[np.minimum(col, nt - 1)],
                       np.where(last, no + 1, no))
        live = weight > 0
        idx = arc[live] * (no + 2) + off[live]
        load = np.bincount(idx, weights=weight[live], minlength=narcs * (no + 2))
        lat = np.full(narcs * (no + 2), -np.inf)
        np.maximum.at(lat, idx, plat[live])
        load = load.reshape(narcs, no + 2) / bw[:, None]
        lat = lat.reshape(narcs, no + 2)
        keep = np.isfinite(lat).any(axis=1)
        table = np.hstack([load[keep], lat[keep]])
        table = np.unique(np.round(table, 15), axis=0)
        return table[:, :no + 2], table[:, no + 2:]

    def transfer_counter(self) -> Callable[[int, int], int]:
        """(pieces, group) -> transfers of a program of that many pieces whose merged
        intra-host transfers each cover ``group`` consecutive pieces."""
        per_piece = self.transfers_per_piece()
        intra = 0 if self.split_intra else sum(
            2 * sum(len(x) for x in self.lanes[li].leaves_in)
            for li in {self.trees[j].lane for j in range(len(self.trees)) if self.w[j] > 0})
        return lambda pieces, group: pieces * (per_piece - intra) + -(-pieces // group) * intra

    def transfers_per_piece(self, all_trees: bool = False) -> int:
        """Transfers one piece adds (``all_trees``: before shares are known)."""
        live = [j for j in range(len(self.trees)) if all_trees or self.w[j] > 0]
        lanes_used = {self.trees[j].lane for j in live}
        net = sum(2 * (len(self.trees[j].parent) - 1) for j in live)
        if not self.split_intra:
            return net + sum(2 * sum(len(x) for x in self.lanes[li].leaves_in)
                             for li in lanes_used)
        by_lane: dict[int, list[int]] = defaultdict(list)
        for j in live:
            by_lane[self.trees[j].lane].append(j)
        for li, js in by_lane.items():  # build_program merges runs of equal offsets
            shift = self.shift[js][:, None]
            send = np.array([self.offsets_of(j)[0] for j in js])
            runs = ((np.diff(shift - send, axis=0) != 0).sum(axis=0)
                    + (np.diff(shift + send, axis=0) != 0).sum(axis=0) + 2)
            net += int(runs @ np.array([len(x) for x in self.lanes[li].leaves_in]))
        return net


def piece_fractions(pieces: int, ramp: int) -> np.ndarray:
    """Piece sizes as fractions of a share: equal, or halving over ``ramp`` pieces at both
    ends (small first and last pieces shorten the pipeline's fill and drain)."""
    ramp = min(ramp, pieces // 2)
    sizes = np.ones(pieces)
    for i in range(ramp):
        sizes[i] = sizes[pieces - 1 - i] = 0.5 ** (ramp - i)
    return sizes / sizes.sum()


def _placements(columns: int, pieces: int, group: int,
                intra: bool) -> tuple[int, list[np.ndarray]]:
    """Steps, and per profile column a 0/1 (pieces x steps) matrix: where that column's
    bytes of each piece run. Offset o runs piece p at step p + o; with ``intra`` the last two
    columns are the merged intra-host gather, at the first step of the piece's group of
    ``group`` pieces, and hand-back, at the last offset of the group's last piece."""
    no = columns - 2 if intra else columns
    nsteps = pieces + no - 1
    p = np.arange(pieces)
    mats = []
    for o in range(no):
        m = np.zeros((pieces, nsteps))
        m[p, p + o] = 1
        mats.append(m)
    if intra:
        first = p // group * group
        lastp = np.minimum(first + group, pieces) - 1
        for steps in (first, lastp + no - 1):
            m = np.zeros((pieces, nsteps))
            m[p, steps] = 1
            mats.append(m)
    return nsteps, mats


def model_time(load: np.ndarray, lat: np.ndarray, size: float, fracs: np.ndarray,
               group: int = 1, intra: bool = False, min_step: float = 0.0) -> float:
    """Program time under the cost model for pieces of the given fractions, from the arc
    profile (``intra``: its last two columns are the merged intra-host transfers, grouped
    by ``group`` pieces; ``min_step``: the least time of a step)."""
    nsteps, mats = _placements(load.shape[1], len(fracs), group, intra)
    step_load = np.zeros((load.shape[0], nsteps))
    step_lat = np.full((load.shape[0], nsteps), -np.inf)
    for k, m in enumerate(mats):
        step_load += load[:, k:k + 1] * (fracs @ m)[None, :]
        present = m.any(axis=0)
        step_lat[:, present] = np.maximum(step_lat[:, present], lat[:, k:k + 1])
    t = step_lat + step_load * size
    per_step = np.where(np.isfinite(t), t, -np.inf).max(axis=0)
    busy = np.isfinite(per_step)
    return float(np.maximum(per_step[busy], min_step).clip(min=0).sum())


def lp_fractions(load: np.ndarray, lat: np.ndarray, size: float, pieces: int,
                 group: int = 1, intra: bool = False, min_step: float = 0.0
                 ) -> np.ndarray | None:
    """Piece fractions minimising the program time for ``pieces`` pieces exactly as
    ``model_time`` counts it (a linear program: each step is at least every arc's latency plus
    its load); None if the solver fails."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    na = load.shape[0]
    nsteps, mats = _placements(load.shape[1], pieces, group, intra)
    step_lat = np.full((na, nsteps), -np.inf)
    for k, m in enumerate(mats):
        present = m.any(axis=0)
        step_lat[:, present] = np.maximum(step_lat[:, present], lat[:, k:k + 1])
    live = np.isfinite(step_lat)
    row_of = np.full((na, nsteps), -1, dtype=np.int64)
    nrows = int(live.sum())
    row_of[live] = np.arange(nrows)
    rows, cols, vals = [], [], []
    for k, m in enumerate(mats):
        arcs_k = np.nonzero(load[:, k] > 0)[0]
        p_idx, s_idx = np.nonzero(m)
        rows.append(row_of[arcs_k[:, None], s_idx[None, :]].ravel())
        cols.append(np.tile(p_idx, len(arcs_k)))
        vals.append(np.repeat(load[arcs_k, k] * size, len(p_idx)))
    a_idx, s_idx = np.nonzero(live)
    rows.append(row_of[a_idx, s_idx])
    cols.append(pieces + s_idx)
    vals.append(np.full(nrows, -1.0))
    a_ub = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(nrows, pieces + nsteps)).tocsr()
    scale = max(float(np.abs(step_lat[live]).max()), 1e-12)  # HiGHS wants entries near 1
    cost = np.concatenate([np.zeros(pieces), np.ones(nsteps)])
    a_eq = np.concatenate([np.ones(pieces), np.zeros(nsteps)])[None, :]
    res = linprog(cost, A_ub=a_ub / scale, b_ub=-step_lat[live] / scale, A_eq=a_eq, b_eq=[1.0],
                  bounds=[(0, None)] * pieces + [(min_step, None)] * nsteps,
                  method="highs")
    if res.status != 0:
        return None
    f = np.maximum(res.x[:pieces], 0)
    f = f[f > f.max() * 1e-6]
    return f / f.sum()


# ---- program ------------------------------------------------------------------------------

def _units_per_tree(w: np.ndarray, total: int) -> np.ndarray:
    return _round_to_total(w * total / w.sum(), total)


def build_program(plan: _Plan, fracs: np.ndarray, units: int, group: int = 1) -> Program:
    """The program: per lane, per piece, per tree a contiguous range of units; merged
    intra-host transfers cover ``group`` consecutive pieces of a lane."""
    trees, w = plan.trees, plan.w
    pieces = len(fracs)
    cum = np.concatenate([[0.0], np.cumsum(fracs)])
    cum[-1] = 1.0
    live = [j for j in range(len(trees)) if w[j] > 0]
    per_tree = dict(zip(live, _units_per_tree(w[live], units), strict=True))
    nsteps = pieces + plan.offsets - 1
    steps: list[Step] = [[] for _ in range(nsteps)]
    by_lane: dict[int, list[int]] = defaultdict(list)
    for j in live:
        by_lane[trees[j].lane].append(j)
    base = 0
    for li in sorted(by_lane):
        js = by_lane[li]
        intra = plan.intra(li)
        nets = {j: plan.phases(j) for j in js}
        split = {j: plan.tree_intra(j) for j in js}
        for p in range(pieces):
            if p % group == 0:
                start = base
            ends: dict[tuple, tuple[int, int]] = {}  # split transfer -> (step, index)
            for j in js:
                u = int(per_tree[j])
                a, b = base, base + (round(u * cum[p + 1]) - round(u * cum[p]))
                base = b
                if a == b:
                    continue
                for off, src, dst, red, path in nets[j]:
                    steps[p + off].append(Transfer(src, dst, a, b, red, path))
                for key in split[j]:
                    off, src, dst, red, path = key
                    at = ends.get(key)
                    if at is not None and steps[at[0]][at[1]].hi == a:
                        steps[at[0]][at[1]] = steps[at[0]][at[1]]._replace(hi=b)
                    else:
                        ends[key] = (p + off, len(steps[p + off]))
                        steps[p + off].append(Transfer(src, dst, a, b, red, path))
            if (p % group == group - 1 or p == pieces - 1) and base > start:
                first = p // group * group
                for off, src, dst, red, path in intra:
                    at = first if off == 0 else p + off
                    steps[at].append(Transfer(src, dst, start, base, red, path))
    return Program(units, [s for s in steps if s])


def _host_switch_groups(lane: _Lane) -> list[int]:
    ids: dict[str, int] = {}
    if lane.groups is not None:
        return lane.groups
    return [ids.setdefault(up[-1] if up else "", len(ids)) for up in lane.up]


def host_fan_in(ctx: PlanContext, program: Program) -> int:
    """The most hosts that send to one host in one step."""
    host = [ctx.topo.host_of(r) for r in ctx.ranks]
    worst = 0
    for step in program.steps:
        into: dict[str, set[str]] = defaultdict(set)
        for t in step:
            if host[t.src] != host[t.dst]:
                into[host[t.dst]].add(host[t.src])
        worst = max(worst, max((len(v) for v in into.values()), default=0))
    return worst


def max_fan_in(plan: _Plan) -> int:
    """The most children any host has in any tree that carries data."""
    fan = 0
    for tree, w in zip(plan.trees, plan.w, strict=True):
        if w > 0:
            kids = Counter(p for p in tree.parent if p >= 0)
            fan = max(fan, max(kids.values(), default=0))
    return fan


def tree_counts(m: int) -> list[int]:
    """Trees per lane to try: stars, height-2 and height-3 trees, and on more than
    FEW_TREES_ABOVE hosts 4 and 5 deeper trees, whose programs fit more pieces under
    MAX_TRANSFERS (at 128 and 512 hosts they price 2-13 % below the shallower sets)."""
    if m <= 2:
        return [1 if m == 1 else 2]
    cands = {m, math.isqrt(m - 1) + 2, round(m ** (1 / 3)) + 2}
    if m > FEW_TREES_ABOVE:
        cands |= {4, 5}
    return sorted(c for c in cands if c <= m)


def _trees(lanes: list[_Lane], t: int) -> list[_Tree]:
    trees = []
    for li, lane in enumerate(lanes):
        groups = _host_switch_groups(lane)
        m = len(groups)
        if t == m and len(set(groups)) == 1:
            sets = [(r, [-1 if h == r else r for h in range(m)]) for r in range(m)]
        else:
            sets = host_trees(lane.cap, groups, t)
        for root, parent in sets:
            height, depth = _heights(root, parent)
            trees.append(_Tree(li, root, parent, height, depth))
    return trees


def _hub_trees(lanes: list[_Lane]) -> list[_Tree]:
    """Per lane on one switch, per root r and hub c = r + 1, r + 2: r's only child is c, the
    other hosts are c's children. The root has degree 1 like a leaf but hears the partial sum
    before it sends the result, the mirror image of a leaf's order: mixed with stars, a host
    whose NIC has no room for a star's root can still balance its sends against its receives
    in every step."""
    trees = []
    for li, lane in enumerate(lanes):
        groups = _host_switch_groups(lane)
        m = len(groups)
        if m < 3 or len(set(groups)) > 1:
            continue
        for r in range(m):
            for k in (1, 2)[:m - 2]:
                c = (r + k) % m
                parent = [c] * m
                parent[r], parent[c] = -1, r
                height, depth = _heights(r, parent)
                trees.append(_Tree(li, r, parent, height, depth))
    return trees


def _price(plan: _Plan, fluid: float, size: float, max_units: int,
           configs: dict[tuple[int, int, int], tuple],
           max_transfers: int = MAX_TRANSFERS) -> None:
    """Price every stagger, intra-host grouping, piece count and ramp of ``plan`` on the
    per-arc model; keep the best per (plan, stagger, grouping) in ``configs``. Piece counts
    are tried up to the most that fit ``max_transfers``."""
    if len(plan._entries()[0]) <= BALANCE_MAX_CROSSINGS:
        plan.balance_phases(fluid)
    t = max(Counter(tr.lane for tr in plan.trees).values())
    min_step = plan.ctx.cost.min_step_s
    live = int((plan.w > 0).sum())
    if live > max_units:
        return
    for width in STAGGER_WIDTHS:
        if width > 1 and width > t:
            break
        plan.set_stagger(width)
        load, lat = plan.profile()
        count = plan.transfer_counter()
        for group in (1,) if plan.split_intra else INTRA_GROUPS:
            most = 0
            while (most < PIECE_CHOICES[-1] and (most + 1) * live <= max_units
                   and count(most + 1, group) <= max_transfers):
                most += 1
            if group > 1 and most <= group:
                continue
            # the size limits often bind: the most pieces they allow is a candidate too
            fits = sorted({p for p in PIECE_CHOICES if p <= most} | ({most} if most else set()))
            key = (id(plan), width, group)
            for pieces in fits:
                for ramp in RAMPS:
                    if ramp and 2 * ramp > pieces:
                        break
                    fracs = piece_fractions(pieces, ramp)
                    est = model_time(load, lat, size, fracs, group, intra=True,
                                     min_step=min_step)
                    if est < configs.get(key, (math.inf,))[0]:
                        configs[key] = (est, plan, width, group, fracs, fits, fluid * size)


def _refine(config: tuple, size: float) -> tuple[float, _Plan, int, int, np.ndarray, float]:
    """A configuration with piece sizes from the LP near its piece count, where that is
    faster: (model time, plan, stagger, intra-host grouping, fractions, fluid time)."""
    est0, plan, width, group, fracs0, fits, fluid = config
    best = (est0, plan, width, group, fracs0, fluid)
    plan.set_stagger(width)
    load, lat = plan.profile()
    k = fits.index(len(fracs0))
    for pieces in fits[max(0, k - LP_PIECES_BELOW):k + 2]:
        fracs = lp_fractions(load, lat, size, pieces, group, intra=True,
                             min_step=plan.ctx.cost.min_step_s)
        if fracs is None:
            continue
        est = model_time(load, lat, size, fracs, group, intra=True,
                         min_step=plan.ctx.cost.min_step_s)
        if est < best[0]:
            best = (est, plan, width, group, fracs, fluid)
    return best


def forest(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("forest", 0.0, lambda: Program(1, []), {"trees": 0})
    lanes = _lanes(ctx)
    lanes = lanes + exit_detour_lanes(ctx, lanes, 2 * MAX_LANES - len(lanes))
    arcs = _Arcs(ctx)
    m = len(ctx.host_groups)
    size = float(ctx.size_bytes)
    max_units = min(MAX_UNITS, ctx.size_bytes)
    configs: dict[tuple[int, int, int], tuple] = {}
    t_min = min(tree_counts(m))
    detoured = False
    for t in tree_counts(m):
        plan = _Plan(ctx, lanes, _trees(lanes, t), arcs)
        # a tree set that fits fewer than MIN_PIECES pieces pays the whole pipeline fill
        if plan.transfers_per_piece(all_trees=True) * MIN_PIECES > MAX_TRANSFERS and t != t_min:
            continue
        fluid = plan.solve_shares()
        if not detoured and plan.leaf_bound():
            detoured = True
            extra = detour_lanes(ctx, lanes)
            if extra:
                lanes = lanes + extra
                plan = _Plan(ctx, lanes, _trees(lanes, t), arcs)
                fluid = plan.solve_shares()
        plans = [(plan, fluid)]
        split = _Plan(ctx, lanes, plan.trees, arcs, split_intra=True)
        if split.transfers_per_piece(all_trees=True) * MIN_PIECES <= MAX_TRANSFERS:
            plans.append((split, split.solve_shares()))
        if plan.transfers_per_piece(all_trees=True) * MIN_PIECES > MAX_TRANSFERS:
            # few pieces: sending at 1 + height sometimes overlaps the trees better
            early = _Plan(ctx, lanes, plan.trees, arcs, late=False)
            plans.append((early, early.solve_shares()))
        if 3 <= m <= HUB_MAX_HOSTS and t < m:
            # one tree per lane: the least fan-in per step (see FAN_IN_TOLERANCE)
            per_lane: dict[int, list[_Tree]] = defaultdict(list)
            for tr in plan.trees:
                per_lane[tr.lane].append(tr)
            for k in range(t):
                single = [trs[k] for trs in per_lane.values() if k < len(trs)]
                for late in (True, False):
                    one = _Plan(ctx, lanes, single, arcs, late=late)
                    plans.append((one, one.solve_shares()))
        for plan, fluid in plans:
            _price(plan, fluid, size, max_units, configs)
    if 3 <= m <= HUB_MAX_HOSTS:
        hubs = _hub_trees(lanes)
        if hubs:
            plan = _Plan(ctx, lanes, _trees(lanes, m) + hubs, arcs, split_intra=True)
            _price(plan, plan.solve_shares(), size, max_units, configs)
    if not configs:
        raise InfeasibleError("forest: no tree set fits the plan size limits")
    # piece sizes from an LP, for the best configurations, near their best piece count
    ranked = sorted(configs.values(), key=lambda c: c[0])
    best = min((_refine(c, size) for c in ranked[:LP_CONFIGS]), key=lambda c: c[0])
    # Many-to-one fan-in costs real transports more than the model says (incast at a star's
    # root): among configurations within FAN_IN_TOLERANCE of the best, take the least fan-in.
    calm = [c for c in ranked if c[0] <= best[0] * (1 + FAN_IN_TOLERANCE)][:FAN_IN_CONFIGS]

    def fan_in(plan: _Plan, width: int, group: int, fracs: np.ndarray) -> int:
        if m > HUB_MAX_HOSTS:  # building every program costs too much: trees' fan-in
            return max_fan_in(plan)
        plan.set_stagger(width)
        return host_fan_in(ctx, build_program(plan, fracs, max_units, group))

    pick = min(calm, key=lambda c: (fan_in(c[1], c[2], c[3], c[4]), c[0]), default=None)
    if pick is not None and (fan_in(pick[1], pick[2], pick[3], pick[4])
                             < fan_in(best[1], best[2], best[3], best[4])):
        best = _refine(pick, size)
    _, plan, width, group, fracs, fluid = best
    plan.set_stagger(width)
    program = build_program(plan, fracs, max_units, group)
    predicted = ctx.cost.program_time(ctx.ranks, program, size)
    details = {"trees": int((plan.w > 0).sum()), "lanes": len(lanes), "pieces": len(fracs),
               "smallest_piece": round(float(fracs.min() / fracs.max()), 4),
               "stagger": width, "intra_group": group, "host_tree_height": plan.hmax,
               "fluid_time_s": fluid}
    return Candidate("forest", predicted, lambda: program, details)
