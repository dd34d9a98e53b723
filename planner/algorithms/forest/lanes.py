"""Lanes of the host-structured forest: per host a port rank and a way out of the host.

A lane fixes, on every host, one rank (its port) and one route out (a NIC and the switch
behind it); detour lanes leave saturated hosts by another switch. See forest.py."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from syncplan.core.errors import InfeasibleError
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.routing import REF_BYTES

Path = tuple[str, ...]


@dataclass
class Lane:
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


class Arcs:
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


def build_lanes(ctx: PlanContext) -> list[Lane]:
    topo, g = ctx.topo, ctx.topo.graph
    groups = ctx.host_groups
    m = len(groups)
    nlanes = min(FOREST.max_lanes, max(len(gr) for gr in groups))
    by_host: dict[str, set[str]] = defaultdict(set)
    for nid, node in topo.nodes.items():
        if node.host is not None:
            by_host[node.host].add(nid)
    lanes = [Lane([], [], [], np.zeros(m)) for _ in range(nlanes)]
    for h, group in enumerate(groups):
        host = topo.host_of(ctx.ranks[group[0]])
        inside = by_host.get(host, set()) | {ctx.ranks[i] for i in group}
        exits = [
            (u, v)
            for u in sorted(inside)
            for v in g.succ[u]
            if v not in inside and g.has_edge(v, u)
        ]
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
                raise InfeasibleError(
                    f"forest: rank {pnode!r} cannot reach a link out of its host inside the host"
                )
            best = min(cost.values())
            tied = [e for e in exits if e in cost and cost[e] <= best * (1 + 1e-9) + 1e-15]
            exit_ = min(tied, key=lambda e: (used[e], exits.index(e)))
            used[exit_] += 1
            choice.append(exit_)
            u, v = exit_
            lane.up.append((*out_paths[u], v))
            lane.down.append((v, *in_paths[u]))
        for lane, chosen in zip(lanes, choice, strict=True):
            if chosen is None:
                lane.cap[h] = 1.0
                continue
            path = lane.up[h] + lane.down[h][1:]
            bw = min(g.edges[a, b]["bw"] for a, b in itertools.pairwise(path))
            lane.cap[h] = bw / used[chosen]
    for lane in lanes:
        if m > 1:
            usual = max(set(up[-1] for up in lane.up), key=[up[-1] for up in lane.up].count)
            lane.detour = frozenset(
                h
                for h, up in enumerate(lane.up)
                if up[-1] != usual and all(up[-1] in ex for ex in lane.exits)
            )
            if lane.detour:
                lane.groups = [
                    0 if h in lane.detour else g for h, g in enumerate(host_switch_groups(lane))
                ]
    return lanes


def _path_cost(g, path: Path) -> float:
    return sum(_weight(g.edges[a, b]) for a, b in itertools.pairwise(path))


def _inside_adjacency(g, inside: set[str]) -> dict[str, list[tuple[str, float]]]:
    """Each node of ``inside``: its successors inside, in the graph's order, with weights."""
    return {u: [(v, _weight(data)) for v, data in g.succ[u].items() if v in inside] for u in inside}


def _detour(adj: dict[str, list[tuple[str, float]]], path: Path) -> Path | None:
    """Shortest path with ``path``'s endpoints over ``adj`` (``_inside_adjacency``) sharing
    no arc with ``path``."""
    banned: dict[str, set[str]] = {}
    for a, b in itertools.pairwise(path):
        banned.setdefault(a, set()).add(b)
    src, dst = path[0], path[-1]
    dist, prev, heap = {src: 0.0}, {}, [(0.0, src)]
    none: set[str] = set()
    while heap:
        d, u = heapq.heappop(heap)
        if u == dst:
            break
        if d > dist[u]:
            continue
        skip = banned.get(u, none)
        for v, w in adj.get(u, ()):
            if v in skip:
                continue
            nd = d + w
            if nd < dist.get(v, math.inf) - 1e-18:
                dist[v], prev[v] = nd, u
                heapq.heappush(heap, (nd, v))
    if dst not in prev:
        return None
    nodes = [dst]
    while nodes[-1] != src:
        nodes.append(prev[nodes[-1]])
    return tuple(reversed(nodes))


def detour_lanes(ctx: PlanContext, lanes: list[Lane]) -> list[Lane]:
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
            adj = _inside_adjacency(g, inside)
            alt = {}
            for (r, p_in), (_, p_out) in zip(lane.leaves_in[h], lane.leaves_out[h], strict=True):
                a_in, a_out = _detour(adj, p_in), _detour(adj, p_out)
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


def exit_detour_lanes(ctx: PlanContext, lanes: list[Lane], limit: int) -> list[Lane]:
    """Where a host's exit in a lane is slower than its exits in other lanes (a degraded NIC),
    copies of the lane in which that host leaves by another lane's exit, one copy per other
    exit; the host's tree neighbours reach it through their own exit to the same switch. The
    share LP moves bytes off the slow exit onto the others."""
    g = ctx.topo.graph
    out: list[Lane] = []
    for lane in lanes:
        if not lane.up or not lane.up[0]:
            continue
        groups = host_switch_groups(lane)
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
                new = Lane(
                    list(lane.ports),
                    list(lane.up),
                    list(lane.down),
                    cap,
                    list(lane.leaves_in),
                    list(lane.leaves_out),
                    lane.exits,
                    frozenset({h}),
                    groups,
                )
                new.ports[h], new.up[h], new.down[h] = src.ports[h], up, down
                new.leaves_in[h], new.leaves_out[h] = src.leaves_in[h], src.leaves_out[h]
                out.append(new)
                if len(out) >= limit:
                    return out
    return out


def host_switch_groups(lane: Lane) -> list[int]:
    ids: dict[str, int] = {}
    if lane.groups is not None:
        return lane.groups
    return [ids.setdefault(up[-1] if up else "", len(ids)) for up in lane.up]
