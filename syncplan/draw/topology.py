"""Pictures of a cluster graph (docs/formats.md topology, or the service's /v1/topology
document). Switched clusters: hosts under their switches, every switch tier above
(ToR/leaf, aggregation, core/spine) with its trunks; switches that serve exactly the same
hosts (rails) share one box. Clusters without switches (rings, tori, meshes): hosts on a
grid when their names say ``<prefix><row>x<col>``, else on a circle, with their direct
links (arcs for wrap-around links, two arrows for a directed pair). A one-host file, or
``host=``, draws that host's inside (see ``syncplan.draw.host``). Above
``AGGREGATE_ABOVE`` hosts each group of hosts becomes one box. Lines are coloured and
widened by rate; slow ones get a red label."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from syncplan.draw.canvas import Canvas
from syncplan.draw.graph import (
    RED,
    Bundle,
    Line,
    Picture,
    Unit,
    avoid_boxes,
    draw_graph,
    natural,
    rate_label,
)
from syncplan.draw.host import host_layout

AGGREGATE_ABOVE = 48
PER_ROW = 8
TIER_DY = 100
GRID = re.compile(r"^(.*?)(\d+)x(\d+)$")


def topology_picture(
    doc: dict[str, Any], host: str | None = None, title: str = "cluster", rates: str = "measured"
) -> Canvas:
    """The picture of ``doc``; with ``host``, that host's inside. ``rates``: where the
    rates come from (``measured``, or e.g. ``file`` for a topology file)."""
    return topology_layout(doc, host, title, rates).canvas


def host_picture(doc: dict[str, Any], host: str, rates: str = "measured") -> Canvas:
    """One host's inside (its links out to the rest drawn to the nodes outside)."""
    return host_layout(doc, host, rates).canvas


def topology_layout(
    doc: dict[str, Any], host: str | None = None, title: str = "cluster", rates: str = "measured"
) -> Picture:
    """The picture of ``doc`` with what it drew, as data."""
    hosts = {n["host"] for n in doc.get("nodes", []) if n.get("host")}
    if host is not None or (len(hosts) == 1 and not doc.get("stale_hosts")):
        return host_layout(doc, host or next(iter(hosts)), rates, title)
    return _cluster(doc, title, rates)


def _cluster(doc: dict[str, Any], title: str, rates: str) -> Picture:
    nodes = {n["id"]: n for n in doc.get("nodes", [])}
    host_of = {i: n["host"] for i, n in nodes.items() if n.get("host")}
    hosts = sorted(set(host_of.values()), key=natural)
    stale = set(doc.get("stale_hosts", []))
    links = doc.get("links", [])
    outside = sorted((i for i in nodes if i not in host_of), key=natural)
    leaf_sets: dict[str, set[str]] = defaultdict(set)
    for lk in links:
        for a, b in ((lk["src"], lk["dst"]), (lk["dst"], lk["src"])):
            if a in host_of and b not in host_of:
                leaf_sets[host_of[a]].add(b)
    c = Canvas(800, 600)
    nend = sum(1 for n in nodes.values() if n.get("host") and n["kind"] in ("gpu", "cpu"))
    gone = sorted(stale - set(hosts), key=natural)
    head = f"{title}: {len(hosts)} hosts, {nend} endpoints"
    c.text(20, 26, head + (f", {len(stale)} stale" if stale else ""), 16, bold=True)
    aggregate = len(hosts) + len(gone) > AGGREGATE_ABOVE
    w, tall = 120.0, 58.0
    for _ in range(3):  # again with the host boxes as large as their largest text
        unit_of = dict(host_of)
        units: dict[str, Unit] = {}
        c.shapes = c.shapes[:1]
        where = {}
        if outside:
            size = (w, tall)
            _switched(c, doc, hosts, outside, leaf_sets, unit_of, units, aggregate, gone, size)
        else:
            where = _direct(hosts, units, gone, w)
        bundles, inside = _bundles(links, unit_of, nodes)
        arcs(bundles, where)
        _host_lines(units, bundles, nodes, stale, aggregate)
        if not outside:
            _inside_lines(units, inside, links)
        switches = {unit_of[sw] for sw in outside}
        boxes = [u for name, u in units.items() if name not in switches]
        need = max(u.size()[0] for u in boxes), max(u.size()[1] for u in boxes)
        for u in boxes:  # host boxes all as tall as the tallest
            u.h = need[1]
        if not outside:
            avoid_boxes(bundles, units)
        if need[0] <= w and need[1] <= tall:
            break
        w, tall = max(w, need[0]), max(tall, need[1])
    return draw_graph(c, units, bundles, inside, rates)


def _bundles(
    links: list[dict], unit_of: dict[str, str], nodes: dict[str, dict]
) -> tuple[list[Bundle], dict[str, list[int]]]:
    """The file's links grouped by the pair of boxes they join (one way, for directed)."""
    groups: dict[tuple[str, str, bool], list[int]] = defaultdict(list)
    inside: dict[str, list[int]] = defaultdict(list)
    for i, lk in enumerate(links):
        a, b = unit_of.get(lk["src"], lk["src"]), unit_of.get(lk["dst"], lk["dst"])
        if a == b:
            inside[a].append(i)
            continue
        directed = bool(lk.get("directed"))
        if not directed and natural(b) < natural(a):
            a, b = b, a
        groups[(a, b, directed)].append(i)
    hosted_ids = {i for i, n in nodes.items() if n.get("host")}
    hosted = {unit_of.get(i, i) for i in hosted_ids}  # host boxes (or boxes of hosts)
    out = []
    for (a, b, directed), idx in groups.items():
        kinds = sorted({str(links[i].get("kind") or "link") for i in idx})
        boxed = (a in hosted) != (b in hosted)
        if b in hosted and a not in hosted:
            a, b = b, a  # the host first: its box prints the rate
        rates = sorted((float(links[i]["bandwidth_GBps"]) for i in idx), reverse=True)
        bundle = Bundle(a, b, idx, rates, "/".join(kinds), directed, boxed=boxed)
        if boxed and len(set(rates)) > 1 and b not in nodes:  # which switch of a group
            worst = min(idx, key=lambda i: links[i]["bandwidth_GBps"])
            far = [e for e in (links[worst]["src"], links[worst]["dst"]) if e not in hosted_ids]
            bundle.slowest = f"{far[0] if far else b}: {links[worst]['bandwidth_GBps']:g} GB/s"
        out.append(bundle)
    return out, inside


def _host_lines(
    units: dict[str, Unit],
    bundles: list[Bundle],
    nodes: dict[str, dict],
    stale: set[str],
    aggregate: bool,
) -> None:
    """Each host box: its name, endpoints and rate to its switches (red when below the
    usual rate), or for a group box its hosts' count and rate range."""
    per: dict[str, list[Bundle]] = defaultdict(list)
    for b in bundles:
        if b.boxed:
            per[b.a].append(b)
    usual = sorted(min(bb.rate for bb in bs) for bs in per.values())
    common = usual[len(usual) // 2] if usual else 0.0
    ends: dict[str, int] = defaultdict(int)
    gpus: dict[str, int] = defaultdict(int)  # a CPU-only host is no "1 GPU"
    for n in nodes.values():
        if n.get("host") and n["kind"] in ("gpu", "cpu"):
            ends[n["host"]] += 1
            gpus[n["host"]] += n["kind"] == "gpu"
    for name, u in units.items():
        if u.lines:
            continue
        bs = per.get(name, [])
        rate = " + ".join(b.label.removesuffix(" GB/s") for b in bs) + " GB/s" if bs else ""
        slow = bool(bs) and min(b.rate for b in bs) < common
        members = u.title.split(",") if aggregate else [name]
        if aggregate:
            u.lines = [Line(f"{len(members)} hosts", 12, True)]
            rs = [r for b in bs for r in b.rates]
            if rs:
                u.lines.append(Line(f"{min(rs):g}-{max(rs):g} GB/s per link", 11))
            u.lines.append(Line(f"{sum(ends[m] for m in members)} endpoints", 11))
            n_stale = sum(m in stale for m in members)
            if n_stale:
                u.lines.append(Line(f"{n_stale} stale", 11, True, RED))
                u.stroke, u.dash = RED, True
            continue
        u.lines = [Line(name, 12, True)]
        if name in stale:
            u.lines.append(Line("STALE", 11, True, RED))
            u.fill, u.stroke, u.dash = "#fdecea", RED, True
        else:
            g = gpus[name]
            u.lines.append(Line(f"{g} GPU" if g else f"{ends[name]} CPU", 11))
            if rate:
                u.lines.append(Line(rate, 11, slow, RED if slow else "#333"))
            u.lines += [Line(f"slowest {b.slowest}", 11, True, RED) for b in bs if b.slowest]
        u.title = f"{name}: {ends[name]} endpoints" + (f", {rate}" if rate else "")


def _inside_lines(units: dict[str, Unit], inside: dict[str, list[int]], links: list) -> None:
    """Without switches a host's own GPU links are part of the rings: say them in its box
    (``nvlink 50 GB/s``), PCIe left out."""
    for name, idx in inside.items():
        kinds: dict[str, list[float]] = defaultdict(list)
        for i in idx:
            if links[i].get("kind") not in ("pcie", "inter_socket"):
                kinds[str(links[i].get("kind") or "link")].append(links[i]["bandwidth_GBps"])
        if name in units and 0 < len(kinds) <= 2:
            units[name].lines += [
                Line(f"{k} {rate_label(r)}", 11) for k, r in sorted(kinds.items())
            ]


def _switched(
    c: Canvas,
    doc: dict[str, Any],
    hosts: list[str],
    outside: list[str],
    leaf_sets: dict[str, set[str]],
    unit_of: dict[str, str],
    units: dict[str, Unit],
    aggregate: bool,
    gone: list[str],
    size: tuple[float, float],
) -> None:
    """Hosts in groups (by the switches they hang from) at the bottom, tiers above."""
    w, tall = size
    sets: dict[frozenset[str], list[str]] = defaultdict(list)
    for h in hosts:
        sets[frozenset(leaf_sets.get(h, ()))].append(h)
    if gone:
        sets[frozenset()].extend(gone)
    count: dict[str, int] = defaultdict(int)
    for s in sets:
        for sw in s:
            count[sw] += 1
    for s in sets:  # switches serving the very same hosts share one box
        if len(s) > 1 and all(count[sw] == 1 for sw in s):
            name = span_name(sorted(s, key=natural))
            for sw in s:
                unit_of[sw] = name
    for sw in outside:
        unit_of.setdefault(sw, sw)
    tier = _tiers(doc, outside, leaf_sets, unit_of)
    top = max(tier.values(), default=1)
    order = sorted(sets, key=lambda s: natural(min(s, key=natural)) if s else ((2, ""),))
    cols = PER_ROW if len(order) <= 2 else 4
    x, y0 = 20.0, 70 + top * TIER_DY
    below: dict[str, list[float]] = defaultdict(list)  # unit -> x of what hangs below
    group_of: dict[str, str] = {}
    for s in order:
        hs = sets[s]
        n = 1 if aggregate else min(cols, len(hs))
        boxes = [(hs, f"{hs[0]}..{hs[-1]}")] if aggregate else [([h], h) for h in hs]
        w = max(w, 150.0) if aggregate else w
        for i, (members, name) in enumerate(boxes):
            bx = x + (i % n) * (w + 12) + w / 2
            by = y0 + 30 + (i // n) * (tall + 14)
            units[name] = Unit(name, bx, by, [], w=w, title=",".join(members))
            group_of.update({m: name for m in members})
        mid = x + n * (w + 12) / 2
        for sw in s:
            below[unit_of[sw]].append(mid)
        if not s:
            c.text(
                mid,
                y0 - 22,
                "(no switch)" if not gone else "(stale or no switch)",
                11,
                "middle",
                RED,
            )
        x += n * (w + 12) + 40
    if aggregate:
        unit_of.update({k: group_of[v] for k, v in unit_of.items() if v in group_of})
    links = doc.get("links", [])
    up: dict[str, set[str]] = defaultdict(set)
    for lk in links:
        a, b = unit_of.get(lk["src"]), unit_of.get(lk["dst"])
        if a in tier and b in tier and tier[a] != tier[b]:
            lo, hi = (a, b) if tier[a] < tier[b] else (b, a)
            up[hi].add(lo)
    xs: dict[str, float] = {}
    for t in range(1, top + 1):
        row = sorted((u for u in tier if tier[u] == t), key=natural)
        want = {}
        for u in row:
            ref = below.get(u) or [xs[v] for v in up.get(u, ()) if v in xs]
            want[u] = sum(ref) / len(ref) if ref else x
        widths = {u: _switch_unit(u).size()[0] for u in row}
        for u, ux in spread(want, widths, 24).items():
            xs[u] = ux
            units[u] = _switch_unit(u)
            units[u].x, units[u].y = ux, 70 + (top - t) * TIER_DY


def _switch_unit(name: str) -> Unit:
    return Unit(name, 0.0, 0.0, [Line(name, 12, True)], w=90, fill="#eef1f5", stroke="#667")


def _tiers(
    doc: dict[str, Any], outside: list[str], leaf_sets: dict[str, set[str]], unit_of: dict
) -> dict[str, int]:
    """Switch box -> tier: 1 for those hosts hang from, +1 per hop further up."""
    leaves = {unit_of[sw] for s in leaf_sets.values() for sw in s}
    adj: dict[str, set[str]] = defaultdict(set)
    for lk in doc.get("links", []):
        a, b = unit_of.get(lk["src"]), unit_of.get(lk["dst"])
        if a and b and a != b:
            adj[a].add(b)
            adj[b].add(a)
    boxes = {unit_of[sw] for sw in outside}
    tier = {u: 1 for u in leaves}
    frontier = sorted(leaves)
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(adj[u]):
                if v in boxes and v not in tier:
                    tier[v] = tier[u] + 1
                    nxt.append(v)
        frontier = nxt
    for u in boxes - set(tier):
        tier[u] = max(tier.values(), default=0) + 1
    return tier


def spread(want: dict[str, float], widths: dict[str, float], gap: float) -> dict[str, float]:
    """Centres near ``want`` with boxes at least ``gap`` apart, in the order of ``want``."""
    order = sorted(want, key=lambda u: (want[u], natural(u)))
    xs: dict[str, float] = {}
    for u in order:
        x = want[u]
        if xs:
            prev = order[len(xs) - 1]
            x = max(x, xs[prev] + (widths[prev] + widths[u]) / 2 + gap)
        xs[u] = x
    if xs:
        shift = (sum(want.values()) - sum(xs.values())) / len(xs)
        low = min(xs[u] - widths[u] / 2 for u in xs)
        shift = max(shift, 20 - low)
        xs = {u: x + shift for u, x in xs.items()}
    return xs


def span_name(names: list[str]) -> str:
    """``rail0..rail7 (8 switches)`` for numbered names, or the names when short."""
    joined = ", ".join(names)
    if len(joined) <= 24:
        return joined
    parts = [re.match(r"^(.*?)(\d+)$", n) for n in names]
    stems = {m.group(1) for m in parts if m}
    first, last = names[0], names[-1]
    if len(stems) == 1 and all(parts):
        nums = sorted(int(m.group(2)) for m in parts if m)
        stem = stems.pop()
        first, last = f"{stem}{nums[0]}", f"{stem}{nums[-1]}"
    return f"{first}..{last} ({len(names)} switches)"


def _direct(
    hosts: list[str], units: dict[str, Unit], gone: list[str], w: float
) -> dict[str, tuple[int, int]]:
    """Hosts without switches: on their grid (names ``<p><row>x<col>``) or a circle."""
    cells = {h: GRID.match(h) for h in hosts}
    grid = all(cells.values()) and len({m.group(1) for m in cells.values() if m}) == 1
    where: dict[str, tuple[int, int]] = {}
    if grid:
        where = {h: (int(m.group(2)), int(m.group(3))) for h, m in cells.items() if m}
        grid = len(set(where.values())) == len(where)
    if grid:
        for h, (r, col) in where.items():
            units[h] = Unit(h, 110 + col * (w + 90), 140 + r * 150, [], w=w)
    else:
        n = len(hosts)
        radius = max(150.0, n * (w + 50) / (2 * math.pi))
        for i, h in enumerate(hosts):
            ang = 2 * math.pi * i / n - math.pi / 2
            units[h] = Unit(
                h,
                60 + w / 2 + radius * (1 + math.cos(ang)),
                120 + radius * (1 + math.sin(ang)),
                [],
                w=w,
            )
    bottom = max(u.y for u in units.values())
    for i, h in enumerate(gone):
        units[h] = Unit(h, 20 + w / 2 + i * (w + 12), bottom + 130, [], w=w)
    return where if grid else {}


def arcs(bundles: list[Bundle], where: dict[str, tuple[int, int]]) -> None:
    """Links between far cells of one row or column become arcs around the boxes between
    (above a row, or left of a column; below/right for the last row/column)."""
    if not where:
        return
    rows = max(r for r, _ in where.values()) + 1
    cols = max(c for _, c in where.values()) + 1
    for b in bundles:
        if b.a not in where or b.b not in where:
            continue
        (r1, c1), (r2, c2) = where[b.a], where[b.b]
        if r1 == r2 and abs(c1 - c2) > 1:
            up = r1 < rows - 1 or rows == 1
            # the arc's middle goes above the row: left of a -> b when a is on the right
            b.bulge = 75.0 * (1 if (c1 < c2) == up else -1)
        elif c1 == c2 and abs(r1 - r2) > 1:
            left = c1 < cols - 1 or cols == 1
            b.bulge = 85.0 * (1 if (r1 > r2) == left else -1)
