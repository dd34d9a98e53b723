"""One host's inside: what it links to outside on top, then CPU sockets, PCIe switches,
GPUs and NICs, NVSwitches below; GPUs linked to each other directly (NVLink cube mesh,
xGMI full mesh) sit on a circle so that every link between them is its own chord."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from syncplan.draw.canvas import Canvas
from syncplan.draw.graph import (
    Bundle,
    Line,
    Picture,
    Unit,
    avoid_boxes,
    clear_bulge,
    draw_graph,
    natural,
)

ROW_OF = {"cpu_socket": 1, "pcie_switch": 2, "nic": 3, "cpu": 3, "gpu": 3, "nvswitch": 4}
ROW_DY = 90


def host_layout(
    doc: dict[str, Any], host: str, rates: str = "measured", title: str | None = None
) -> Picture:
    """The picture of ``host``'s nodes and every link touching them (for a one-host file:
    every link of the file)."""
    nodes = {n["id"]: n for n in doc.get("nodes", [])}
    ids = {i for i, n in nodes.items() if n.get("host") == host}
    if not ids:
        raise ValueError(f"no host {host!r} in the topology")
    links = doc.get("links", [])
    mine = [i for i, lk in enumerate(links) if lk["src"] in ids or lk["dst"] in ids]
    outer = {i for i, n in nodes.items() if i not in ids and not n.get("host")}
    if len({n.get("host") for n in nodes.values() if n.get("host")}) == 1:
        mine = list(range(len(links)))  # the whole file: links between switches too

    def unit(nid: str) -> str:
        other = nodes.get(nid, {}).get("host")
        return nid if nid in ids or nid in outer or not other else f"host {other}"

    rows: dict[int, list[str]] = defaultdict(list)
    for nid in sorted(ids, key=natural):
        rows[ROW_OF.get(nodes[nid]["kind"], 2)].append(nid)
    for i in mine:
        for end in (links[i]["src"], links[i]["dst"]):
            if end not in ids and unit(end) not in rows[0]:
                rows[0].append(unit(end))
    rows[0].sort(key=natural)
    gpus = rows.get(3, [])
    gpu_set = set(gpus)
    peer = sum(1 for i in mine if links[i]["src"] in gpu_set and links[i]["dst"] in gpu_set)
    circle = [g for g in gpus if nodes[g]["kind"] == "gpu"] if peer >= len(gpus) > 2 else []
    if circle:
        rows[3] = [g for g in gpus if g not in circle]
    units: dict[str, Unit] = {}
    for r in rows:
        for nid in rows[r] + (circle if r == 3 else []):
            units[nid] = _unit(nid, nodes.get(nid, {}).get("kind", "host"), nid in ids)
    widest = max(u.size()[0] for u in units.values()) + 28
    pairs = [(unit(links[i]["src"]), unit(links[i]["dst"])) for i in mine]
    if circle:
        ring = _radial(
            circle, [n for r in sorted(rows) if r for n in rows[r]], units, pairs, widest
        )
        top = min(u.y for u in units.values() if u.name not in rows[0]) - ROW_DY
        step = widest + 10
        mid = sum(units[g].x for g in circle) / len(circle)
        for k, nid in enumerate(rows[0]):
            units[nid].x, units[nid].y = mid + step * (k - (len(rows[0]) - 1) / 2), top
        _shift(units, widest)
    else:
        y = 80.0
        width = max(len(v) * widest for v in rows.values())
        for r in sorted(rows):
            if not rows[r]:
                continue
            step = width / len(rows[r])
            for k, nid in enumerate(rows[r]):
                units[nid].x, units[nid].y = 40 + step * (k + 0.5), y
            y += ROW_DY
        _untangle(rows, units, pairs)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in mine:
        a, b = unit(links[i]["src"]), unit(links[i]["dst"])
        groups[(a, b) if natural(a) <= natural(b) else (b, a)].append(i)
    bundles = []
    for (a, b), idx in groups.items():
        kinds = "/".join(sorted({str(links[i].get("kind") or "link") for i in idx}))
        rs = sorted((float(links[i]["bandwidth_GBps"]) for i in idx), reverse=True)
        directed = all(links[i].get("directed") for i in idx)
        if directed and len({links[i]["src"] for i in idx}) > 1:
            one = [i for i in idx if links[i]["src"] == links[idx[0]]["src"]]
            two = [i for i in idx if i not in one]
            for part in (one, two):
                s, d = unit(links[part[0]]["src"]), unit(links[part[0]]["dst"])
                prs = [float(links[i]["bandwidth_GBps"]) for i in part]
                bundles.append(Bundle(s, d, part, prs, kinds, True))
            continue
        if directed:
            a, b = unit(links[idx[0]]["src"]), unit(links[idx[0]]["dst"])
        bundles.append(Bundle(a, b, idx, rs, kinds, directed))
    if circle:
        _around(bundles, units, ring, circle)
    for bd in bundles if not circle else []:  # along a row: it would run behind boxes
        ra = next((r for r in rows if bd.a in rows[r]), -1)
        rb = next((r for r in rows if bd.b in rows[r]), -2)
        if ra == rb:
            ka, kb = rows[ra].index(bd.a), rows[ra].index(bd.b)
            if abs(ka - kb) > 1:
                bd.bulge = 30.0 + 12 * abs(ka - kb)
                bd.bulge *= 1 if (ka > kb) == (ra != 0) else -1
    avoid_boxes(bundles, units)
    c = Canvas(800, 600)
    c.text(20, 26, f"{title}: host {host}" if title else f"host {host}", 16, bold=True)
    return draw_graph(c, units, bundles, {}, rates)


def _unit(nid: str, kind: str, own: bool) -> Unit:
    label = nid.split("/", 1)[-1] if own else nid
    fill = "#e8f5e9" if kind == "gpu" else "#eef1f5"
    return Unit(nid, 0.0, 0.0, [Line(label, 11, not own)], w=70, fill=fill, stroke="#555")


def _untangle(
    rows: dict[int, list[str]], units: dict[str, Unit], pairs: list[tuple[str, str]]
) -> None:
    """Reorder each row by where its neighbours in the rows above sit, then the top row
    by those below, so that links cross less; the places themselves stay."""
    near: dict[str, list[str]] = defaultdict(list)
    for a, b in pairs:
        near[a].append(b)
        near[b].append(a)
    row_of = {nid: r for r, nids in rows.items() for nid in nids}
    groups = [(r, rows[r]) for r in sorted(rows) if r > 1 and rows[r]]
    groups += [(0, rows[0])] if rows.get(0) else []
    for r, nids in groups:

        def want(nid: str, r: int = r) -> float:
            xs = [units[m].x for m in near[nid] if m in row_of and (row_of[m] < r) != (r == 0)]
            return sum(xs) / len(xs) if xs else units[nid].x

        slots = sorted((units[nid].x, units[nid].y) for nid in nids)
        nids.sort(key=lambda nid: (want(nid), natural(nid)))
        for (x, y), nid in zip(slots, nids, strict=True):
            units[nid].x, units[nid].y = x, y


def _radial(
    circle: list[str],
    rest: list[str],
    units: dict[str, Unit],
    pairs: list[tuple[str, str]],
    widest: float,
) -> dict[str, float]:
    """GPUs on a circle; each other node on a wider ring (one per hop from the GPUs), at
    the mean angle of its neighbours already placed, pushed apart to fit. Returns each
    node's ring radius."""
    near: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        near[a].add(b)
        near[b].add(a)
    r0 = max(110.0, len(circle) * (widest + 12) / (2 * math.pi))
    angle: dict[str, float] = {}
    for k, g in enumerate(circle):
        angle[g] = 2 * math.pi * (k + 0.5) / len(circle) - math.pi / 2
        units[g].x, units[g].y = r0 * math.cos(angle[g]), r0 * math.sin(angle[g])
    left, ring, radius = set(rest), set(circle), r0
    radii = {g: r0 for g in circle}
    while left:
        nxt = {n for n in left if near[n] & ring} or {min(left, key=natural)}
        radius += ROW_DY
        want = {}
        for n in nxt:
            xs = [math.cos(angle[m]) for m in near[n] if m in angle]
            ys = [math.sin(angle[m]) for m in near[n] if m in angle]
            want[n] = math.atan2(sum(ys), sum(xs)) if xs else -math.pi / 2
        gap = (widest + 10) / radius
        order = sorted(nxt, key=lambda n: (want[n], natural(n)))
        placed = [want[n] for n in order]
        for k in range(1, len(placed)):  # push apart, then centre the run again
            placed[k] = max(placed[k], placed[k - 1] + gap)
        shift = (sum(want[n] for n in order) - sum(placed)) / len(placed)
        for n, at in zip(order, placed, strict=True):
            angle[n] = at + shift
            units[n].x, units[n].y = radius * math.cos(angle[n]), radius * math.sin(angle[n])
            radii[n] = radius
        left -= nxt
        ring |= nxt
    return radii


def _around(
    bundles: list[Bundle], units: dict[str, Unit], radii: dict[str, float], circle: list[str]
) -> None:
    """A link between two nodes of one outer ring goes around the outside, not across."""
    cx = sum(units[g].x for g in circle) / len(circle)
    cy = sum(units[g].y for g in circle) / len(circle)
    for b in bundles:
        ra, rb = radii.get(b.a), radii.get(b.b)
        if ra is None or ra != rb or b.a in circle:
            continue
        (ax, ay), (bx, by) = (units[b.a].x, units[b.a].y), (units[b.b].x, units[b.b].y)
        mx, my = (ax + bx) / 2 - cx, (ay + by) / 2 - cy
        d = math.hypot(mx, my)
        if d > ra * 0.7:
            continue  # a short chord near the rim: straight is fine
        ox, oy = (mx / d, my / d) if d > 1 else (0.0, 1.0)  # outwards (down if across)
        n = math.hypot(bx - ax, by - ay) or 1.0
        left = ((by - ay) / n, -(bx - ax) / n)
        sign = 1.0 if left[0] * ox + left[1] * oy > 0 else -1.0
        others = [u.box() for name, u in units.items() if name not in (b.a, b.b)]
        start = radii[circle[0]] + 50 - (mx * ox + my * oy)  # outside the GPUs
        b.bulge = clear_bulge(units[b.a].box(), units[b.b].box(), others, sign * start)


def _shift(units: dict[str, Unit], widest: float) -> None:
    """Move everything right and down to leave the title and a margin free."""
    dx = 30 + widest / 2 - min(u.x for u in units.values())
    dy = 80 - min(u.y for u in units.values())
    for u in units.values():
        u.x, u.y = u.x + dx, u.y + dy
