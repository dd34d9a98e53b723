"""Pictures of a plan document on its topology: the traffic between hosts, each link's
utilisation against its capacity (the busiest links as bars), and the plan's structure:
a forest's trees (per root host: which hosts send to which while the root's pieces are
reduced) or the stages of a ring or hierarchical plan."""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from syncplan.core.program import Program
from syncplan.draw.canvas import Canvas, ramp
from syncplan.export.msccl import plan_program
from syncplan.planner.topology import Topology

TREE_LIMIT = 60_000  # transfers above which the trees are not derived (a replay per piece)
ARROWS_UP_TO = 24  # hosts; above, the traffic panel is a utilisation grid


@dataclass
class Load:
    """What a program puts on the topology under the cost model."""

    util: dict[tuple[str, str], float]  # arc -> busy time / program time
    host_bytes: dict[tuple[str, str], float]  # (src host, dst host) -> bytes
    time_s: float


def _routes(topo: Topology) -> Any:
    cache: dict[tuple[str, str], list[str]] = {}

    def route(a: str, b: str) -> list[str]:
        if (a, b) not in cache:
            cache[(a, b)] = nx.shortest_path(
                topo.graph, a, b, weight=lambda u, v, d: d["lat"] + (1 << 20) / d["bw"]
            )
        return cache[(a, b)]

    return route


def link_load(program: Program, ranks: list[str], topo: Topology, size: float) -> Load:
    """Per-arc utilisation and host-to-host bytes of ``program`` (lockstep steps, each as
    long as its slowest transfer, as in docs/cost-model.md)."""
    g, route = topo.graph, _routes(topo)
    per_unit = size / program.units
    busy: defaultdict[tuple[str, str], float] = defaultdict(float)
    host_bytes: defaultdict[tuple[str, str], float] = defaultdict(float)
    total = 0.0
    for step in program.steps:
        loads: defaultdict[tuple[str, str], float] = defaultdict(float)
        paths = []
        for t in step:
            path = list(t.path) if t.path else route(ranks[t.src], ranks[t.dst])
            nbytes = (t.hi - t.lo) * per_unit
            arcs = list(itertools.pairwise(path))
            for arc in arcs:
                loads[arc] += nbytes
            paths.append(arcs)
            hs, hd = topo.host_of(ranks[t.src]), topo.host_of(ranks[t.dst])
            if hs != hd:
                host_bytes[(hs, hd)] += nbytes
        worst = max(
            (
                sum(g.edges[a]["lat"] for a in arcs)
                + max(loads[a] / g.edges[a]["bw"] for a in arcs)
                for arcs in paths
            ),
            default=0.0,
        )
        total += worst
        for arc, b in loads.items():
            busy[arc] += b / g.edges[arc]["bw"]
    util = {arc: t / total for arc, t in busy.items()} if total else {}
    return Load(util, host_bytes, total)


def trees(program: Program, ranks: list[str], topo: Topology) -> dict[str, Counter]:
    """Root host -> Counter of (src host, dst host) edges used to reduce the pieces that
    root completes first, weighted by units. A piece's root is the first rank to hold the
    sum of every input."""
    n = len(ranks)
    full = (1 << n) - 1
    cuts = sorted({0, program.units} | {b for s in program.steps for t in s for b in (t.lo, t.hi)})
    seg = {b: i for i, b in enumerate(cuts)}
    value = [[1 << r] * (len(cuts) - 1) for r in range(n)]
    edges: list[list[tuple[int, int]]] = [[] for _ in range(len(cuts) - 1)]
    root: list[int | None] = [None] * (len(cuts) - 1)
    for step in program.steps:
        writes = []
        for t in step:
            for s in range(seg[t.lo], seg[t.hi]):
                if root[s] is None:
                    writes.append((t.dst, s, value[t.src][s], t.reduce))
                    edges[s].append((t.src, t.dst))
        for dst, s, mask, red in writes:
            value[dst][s] = value[dst][s] | mask if red else mask
        for dst, s, _, _ in writes:
            if root[s] is None and value[dst][s] == full:
                root[s] = dst
    out: dict[str, Counter] = defaultdict(Counter)
    for s, r in enumerate(root):
        if r is None:
            continue
        width = cuts[s + 1] - cuts[s]
        rh = topo.host_of(ranks[r])
        for a, b in edges[s]:
            ha, hb = topo.host_of(ranks[a]), topo.host_of(ranks[b])
            if ha != hb:
                out[rh][(ha, hb)] += width
        out.setdefault(rh, Counter())  # a tree inside its root's host still counts
    return out


def stages(program: Program, ranks: list[str], topo: Topology) -> list[tuple[str, Counter, int]]:
    """Runs of steps that stay inside hosts or cross them: (label, host edges, steps)."""
    out: list[tuple[str, Counter, int]] = []
    for step in program.steps:
        edges: Counter = Counter()
        for t in step:
            ha, hb = topo.host_of(ranks[t.src]), topo.host_of(ranks[t.dst])
            if ha != hb:
                edges[(ha, hb)] += t.hi - t.lo
        label = "across hosts" if edges else "inside hosts"
        if out and out[-1][0] == label:
            out[-1][1].update(edges)
            out[-1] = (label, out[-1][1], out[-1][2] + 1)
        else:
            out.append((label, edges, 1))
    return out


def _ring(hosts: list[str], cx: float, cy: float, r: float) -> dict[str, tuple[float, float]]:
    k = max(1, len(hosts))
    return {
        h: (cx + r * math.sin(2 * math.pi * i / k), cy - r * math.cos(2 * math.pi * i / k))
        for i, h in enumerate(hosts)
    }


def _edges(
    c: Canvas, pos: dict, edges: Mapping[tuple[str, str], float], node_r: float, max_w: float
) -> None:
    top = max(edges.values(), default=1)
    for (a, b), w in edges.items():
        (x1, y1), (x2, y2) = pos[a], pos[b]
        d = math.hypot(x2 - x1, y2 - y1) or 1
        ox, oy = (y2 - y1) / d * 3, (x1 - x2) / d * 3  # a and b both ways: side by side
        sx, sy = x1 + (x2 - x1) * node_r / d + ox, y1 + (y2 - y1) * node_r / d + oy
        ex, ey = x2 - (x2 - x1) * node_r / d + ox, y2 - (y2 - y1) * node_r / d + oy
        c.arrow(sx, sy, ex, ey, "#555", 0.6 + max_w * w / top, head=5)


def plan_picture(plan: dict[str, Any], topology: dict[str, Any]) -> Canvas:
    """The picture of ``plan`` on ``topology`` (both as documents)."""
    topo = Topology.from_dict({"nodes": topology["nodes"], "links": topology["links"]})
    program = plan_program(plan)
    ranks = list(plan["ranks"])
    size = float(plan.get("size_bytes") or program.units)
    load = link_load(program, ranks, topo, size)
    hosts = sorted({topo.host_of(r) for r in ranks}, key=_natural)
    host_util = {
        h: max(
            (
                u
                for (a, b), u in load.util.items()
                if (topo.host_of(a) == h) != (topo.host_of(b) == h)
                and h in (topo.host_of(a), topo.host_of(b))
            ),
            default=0.0,
        )
        for h in hosts
    }
    c = Canvas(1100, 760)
    pred, bound = plan.get("predicted_time_s"), plan.get("lower_bound_time_s")
    head = (
        f"{plan.get('algorithm', 'plan')}: {len(ranks)} ranks on {len(hosts)} hosts, "
        f"{size / 2**20:g} MiB"
    )
    if pred:
        head += f", predicted {pred * 1e3:.2f} ms"
    if pred and bound:
        head += f", bound {bound * 1e3:.2f} ms ({pred / bound:.3f}x)"
    c.text(20, 28, head, 16, bold=True)
    # traffic between hosts, hosts coloured by their busiest link out of or into the host
    c.text(20, 60, "bytes between hosts (arrows), busiest host link (colour)", 12, bold=True)
    if len(hosts) <= ARROWS_UP_TO:
        pos = _ring(hosts, 250, 250, 170)
        _edges(c, pos, load.host_bytes, 16, 6)
        for h, (x, y) in pos.items():
            c.circle(
                x,
                y,
                16,
                fill=ramp(1 - host_util[h]),
                stroke="#333",
                title=f"{h}: busiest host link {host_util[h]:.0%} busy",
            )
            c.text(x, y + 30, h, 11, "middle")
    else:
        cols = math.ceil(math.sqrt(len(hosts)))
        cell = min(40, 420 / cols)
        for i, h in enumerate(hosts):
            x, y = 40 + (i % cols) * cell, 80 + (i // cols) * cell
            c.rect(
                x,
                y,
                cell - 3,
                cell - 3,
                fill=ramp(1 - host_util[h]),
                stroke="#fff",
                title=f"{h}: {host_util[h]:.0%}",
            )
    c.legend(20, 470, 100, 0, unit="% of the plan's time busy", label="link utilisation")
    # the busiest links against their capacity
    c.text(560, 60, "busiest links: time busy / plan time", 12, bold=True)
    seen: dict[tuple[str, str], float] = {}
    for (a, b), u in load.util.items():
        key = (a, b) if (a, b) < (b, a) else (b, a)
        seen[key] = max(seen.get(key, 0.0), u)
    for i, ((a, b), u) in enumerate(sorted(seen.items(), key=lambda kv: -kv[1])[:14]):
        y = 78 + i * 27
        bw = topo.graph.edges[(a, b)]["bw"] / 1e9
        c.text(560, y + 13, f"{_short(a)} - {_short(b)} ({bw:g} GB/s)", 10)
        c.rect(800, y, 240, 16, fill="#f0f0f0", stroke="#ccc")
        c.rect(800, y, 240 * min(1.0, u), 16, fill=ramp(1 - u), stroke="none", width=0)
        c.text(1046, y + 13, f"{u:.0%}", 10)
    _structure(c, program, ranks, topo, hosts, str(plan.get("algorithm", "")))
    return c


def _structure(
    c: Canvas, program: Program, ranks: list[str], topo: Topology, hosts: list[str], algorithm: str
) -> None:
    y0 = 520
    panels: list[tuple[str, Counter, str | None]] = []
    if algorithm == "forest" and program.transfer_count <= TREE_LIMIT:
        by_root = trees(program, ranks, topo)
        order = sorted(by_root, key=lambda h: (-sum(by_root[h].values()), _natural(h)))
        for h in order[:6]:
            panels.append((f"tree of root host {h}", by_root[h], h))
        title = f"trees: {len(by_root)} root hosts (reduce edges; broadcast runs back)"
    elif algorithm == "forest":
        title = f"trees not drawn: {program.transfer_count} transfers"
    else:
        st = stages(program, ranks, topo)
        for label, edges, k in st[:6]:
            panels.append((f"{k} step{'s' * (k > 1)} {label}", edges, None))
        title = f"stages: {len(st)} runs of steps" + (" (first 6)" if len(st) > 6 else "")
    c.text(20, y0, title, 12, bold=True)
    small = len(hosts) <= ARROWS_UP_TO
    for i, (label, edges, root) in enumerate(panels):
        cx = 100 + i * 180
        c.text(cx, y0 + 22, label, 10, "middle")
        if not small:
            c.text(cx, y0 + 110, f"{len(edges)} host pairs", 10, "middle")
            continue
        pos = _ring(hosts, cx, y0 + 120, 70)
        _edges(c, pos, edges, 6, 3)
        for h, (x, y) in pos.items():
            c.circle(
                x,
                y,
                7 if h == root else 6,
                fill="#3168b4" if h == root else "#eef1f5",
                stroke="#333",
                title=h,
            )
            if len(hosts) <= 8:
                c.text(x, y + 18 if y > y0 + 120 else y - 10, h, 9, "middle", "#555")


def _short(nid: str) -> str:
    return nid if len(nid) <= 16 else nid[:15] + "…"


def _natural(s: str) -> tuple[Any, ...]:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s))
