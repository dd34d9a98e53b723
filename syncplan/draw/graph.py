"""The drawing step shared by the topology pictures: boxes (``Unit``) at given places and
the file's links between them, bundled per pair of boxes, as straight lines or arcs,
coloured and widened by rate. Labels never overlap: the common rate of a kind of link is
said once below the picture, the others sit beside their line or, where no room is left,
in a numbered note. What was drawn comes back as data (``Picture``) for the tests."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from syncplan.draw.canvas import Canvas, overlaps, ramp, text_box, text_width

Box = tuple[float, float, float, float]
RED = "#c62828"


@dataclass
class Line:
    """A text line of a box: text, size, bold, colour."""

    text: str
    size: float = 11
    bold: bool = False
    color: str = "#333"


@dataclass
class Unit:
    """A box: centre ``x, y``; its size fits its lines unless ``w``, ``h`` are larger."""

    name: str
    x: float
    y: float
    lines: list[Line]
    w: float = 0.0
    h: float = 0.0  # at least this tall
    fill: str = "#f7f7f7"
    stroke: str = "#555"
    dash: bool = False
    title: str = ""

    def size(self) -> tuple[float, float]:
        w = max([self.w, *(text_width(ln.text, ln.size, ln.bold) + 12 for ln in self.lines)])
        return w, max(self.h, 10 + 16 * len(self.lines))

    def box(self) -> Box:
        w, h = self.size()
        return (self.x - w / 2, self.y - h / 2, self.x + w / 2, self.y + h / 2)


@dataclass
class Bundle:
    """The links (indices into the file's ``links``) between two boxes. ``bulge``: an arc
    whose middle sits that many pixels left of the way from ``a`` to ``b`` (0: straight);
    ``boxed``: the rate is printed in box ``a`` rather than beside the line."""

    a: str
    b: str
    links: list[int]
    rates: list[float]
    kind: str
    directed: bool = False
    bulge: float = 0.0
    boxed: bool = False
    slowest: str = ""  # where the slowest of mixed rates goes, for a box's rate

    @property
    def rate(self) -> float:
        return min(self.rates)

    @property
    def label(self) -> str:
        return rate_label(self.rates)


@dataclass
class DrawnEdge:
    """One drawn element that stands for ``links``: a line (``how="line"``), a box's rate
    (``"box"``) or a box's inside (``"inside"``, the links within one box)."""

    a: str
    b: str
    links: list[int]
    label: str
    how: str


@dataclass
class Picture:
    canvas: Canvas
    edges: list[DrawnEdge] = field(default_factory=list)
    units: dict[str, Box] = field(default_factory=dict)

    def labels(self) -> list[tuple[str, Box]]:
        """Every text drawn, with its bounding box."""
        return [(t["s"], text_box(t)) for t in self.canvas.texts()]


def rate_label(rates: list[float]) -> str:
    """``25 GB/s``, ``8x25 GB/s`` or ``25 + 6.25 GB/s``."""
    if len(rates) == 1:
        return f"{rates[0]:g} GB/s"
    if len(set(rates)) == 1:
        return f"{len(rates)}x{rates[0]:g} GB/s"
    counts = Counter(rates)
    parts = [f"{n}x{r:g}" if n > 1 else f"{r:g}" for r, n in sorted(counts.items(), reverse=True)]
    return " + ".join(parts) + " GB/s"


def _path(a: Box, b: Box, bulge: float, offset: float) -> list[tuple[float, float]]:
    """Centre to centre (straight or a quadratic arc), shifted ``offset`` to the left,
    clipped to the two boxes' edges."""
    (ax, ay), (bx, by) = _centre(a), _centre(b)
    dx, dy = bx - ax, by - ay
    n = math.hypot(dx, dy) or 1.0
    px, py = dy / n, -dx / n  # left of the direction a -> b (y grows downwards)
    ax, ay, bx, by = ax + px * offset, ay + py * offset, bx + px * offset, by + py * offset
    if bulge:
        cx, cy = (ax + bx) / 2 + px * bulge * 2, (ay + by) / 2 + py * bulge * 2
        pts = [
            (
                (1 - t) ** 2 * ax + 2 * (1 - t) * t * cx + t * t * bx,
                (1 - t) ** 2 * ay + 2 * (1 - t) * t * cy + t * t * by,
            )
            for t in (i / 40 for i in range(41))
        ]
    else:
        pts = [(ax, ay), (bx, by)]
    return _clip(_clip(pts, a)[::-1], b)[::-1]


def clear_bulge(a: Box, b: Box, others: list[Box], start: float) -> float:
    """The smallest bulge from ``start`` on (same sign, 15 px steps) whose arc from ``a``
    to ``b`` passes no box of ``others`` (with 6 px to spare)."""
    bulge = start
    for _ in range(40):
        pts = _path(a, b, bulge, 0.0)
        if len(pts) == 2:
            (x1, y1), (x2, y2) = pts
            pts = [(x1 + (x2 - x1) * i / 40, y1 + (y2 - y1) * i / 40) for i in range(41)]
        if not any(
            o[0] - 6 <= x <= o[2] + 6 and o[1] - 6 <= y <= o[3] + 6
            for x, y in pts[1:-1]
            for o in others
        ):
            break
        bulge += 15 if bulge >= 0 else -15
    return bulge


def avoid_boxes(bundles: list[Bundle], units: dict[str, Unit]) -> None:
    """Bend each straight line that would run behind a third box around it."""
    boxes = {name: u.box() for name, u in units.items()}
    for b in bundles:
        if b.bulge or b.directed:
            continue
        others = [box for name, box in boxes.items() if name not in (b.a, b.b)]
        if clear_bulge(boxes[b.a], boxes[b.b], others, 0.0) == 0.0:
            continue
        ways = [clear_bulge(boxes[b.a], boxes[b.b], others, d) for d in (20.0, -20.0)]
        b.bulge = min(ways, key=abs)


def _centre(b: Box) -> tuple[float, float]:
    return (b[0] + b[2]) / 2, (b[1] + b[3]) / 2


def _inside(p: tuple[float, float], b: Box) -> bool:
    return b[0] <= p[0] <= b[2] and b[1] <= p[1] <= b[3]


def _clip(pts: list[tuple[float, float]], box: Box) -> list[tuple[float, float]]:
    """Drop the leading points inside ``box``; start on its edge instead."""
    i = 0
    while i < len(pts) - 1 and _inside(pts[i + 1], box):
        i += 1
    (x1, y1), (x2, y2) = pts[i], pts[i + 1]
    lo, hi = 0.0, 1.0
    for _ in range(30):  # bisect to the edge
        mid = (lo + hi) / 2
        if _inside((x1 + (x2 - x1) * mid, y1 + (y2 - y1) * mid), box):
            lo = mid
        else:
            hi = mid
    return [(x1 + (x2 - x1) * hi, y1 + (y2 - y1) * hi), *pts[i + 1 :]]


def _along(pts: list[tuple[float, float]], t: float) -> tuple[float, float, float, float]:
    """The point at fraction ``t`` of the path's length, and the unit normal there."""
    seg = [math.dist(p, q) for p, q in itertools.pairwise(pts)]
    goal = t * sum(seg)
    for (p, q), s in zip(itertools.pairwise(pts), seg, strict=True):
        if goal <= s or s == seg[-1]:
            f = goal / s if s else 0.0
            n = s or 1.0
            return (
                p[0] + (q[0] - p[0]) * f,
                p[1] + (q[1] - p[1]) * f,
                (q[1] - p[1]) / n,
                -(q[0] - p[0]) / n,
            )
        goal -= s
    return pts[-1][0], pts[-1][1], 0.0, 0.0


class Placer:
    """Puts texts where they overlap nothing placed before."""

    def __init__(self, c: Canvas, taken: list[Box]) -> None:
        self.c, self.taken = c, taken

    def fits(self, box: Box) -> bool:
        return box[0] >= 4 and box[1] >= 36 and not any(overlaps(box, t) for t in self.taken)

    def put(
        self,
        spots: list[tuple[float, float]],
        s: str,
        size: float = 10,
        color: str = "#333",
        bold: bool = False,
        backing: bool = True,
    ) -> bool:
        """Centre ``s`` on the first free spot; False if none is free."""
        for x, y in spots:
            shape = dict(x=x, y=y + 0.3 * size, s=s, size=size, anchor="middle", bold=bold)
            x0, y0, x1, y1 = text_box(shape)
            box = (x0 - 2, y0 - 1, x1 + 2, y1 + 1)
            if self.fits(box):
                if backing:
                    self.c.rect(x0 - 2, y0 - 1, x1 - x0 + 4, y1 - y0 + 2, "#ffffff", "none", 0)
                self.c.text(x, y + 0.3 * size, s, size, "middle", color, bold)
                self.taken.append(box)
                return True
        return False


def draw_graph(
    c: Canvas,
    units: dict[str, Unit],
    bundles: list[Bundle],
    inside: dict[str, list[int]],
    rate_source: str,
    notes: list[str] | None = None,
) -> Picture:
    """Draw ``bundles`` under ``units``, then the labels, captions and legend below."""
    pic = Picture(c)
    boxes = {name: u.box() for name, u in units.items()}
    pic.units = boxes
    rates = [r for b in bundles for r in b.rates]
    hi, lo = max(rates, default=1.0), min(rates, default=0.0)
    pairs = {(b.a, b.b) for b in bundles if b.directed}
    paths: list[tuple[Bundle, list[tuple[float, float]]]] = []
    for b in bundles:
        offset = 5.0 if b.directed and (b.b, b.a) in pairs else 0.0
        pts = _path(boxes[b.a], boxes[b.b], b.bulge, -offset)
        paths.append((b, pts))
        color, width = ramp(b.rate / hi), 1.2 + 3.8 * b.rate / hi
        title = f"{b.a} - {b.b}: {b.label} ({b.kind})"
        if b.directed:
            (x1, y1), (x2, y2) = pts[-2], pts[-1]
            c.polyline(pts[:-1], color, width, title=title)
            c.arrow(x1, y1, x2, y2, color, width, title=title)
        else:
            c.polyline(pts, color, width, title=title)
        pic.edges.append(DrawnEdge(b.a, b.b, b.links, b.label, "box" if b.boxed else "line"))
    for name, u in units.items():
        x0, y0, x1, y1 = boxes[name]
        c.rect(x0, y0, x1 - x0, y1 - y0, u.fill, u.stroke, 2 if u.dash else 1, u.dash, u.title)
        for i, ln in enumerate(u.lines):
            c.text(x0 + 6, y0 + 18 + 16 * i, ln.text, ln.size, color=ln.color, bold=ln.bold)
        if inside.get(name):
            pic.edges.append(DrawnEdge(name, name, inside[name], "inside", "inside"))
    placer = Placer(c, [*boxes.values(), *(text_box(t) for t in c.texts())])
    captions, notes = _label_lines(placer, paths, notes or [])
    _, bottom = c.extent()
    y = bottom + 30
    for line, color in captions + [(f"[{i + 1}] {n}", "#333") for i, n in enumerate(notes)]:
        c.text(20, y, line, 11, color=color)
        y += 17
    src = "measured rate" if rate_source == "measured" else f"link rate (from the {rate_source})"
    right = c.legend(20, y + 20, round(lo, 3), round(hi, 3), label=src)
    c.text(right + 20, y + 34, "width and colour: rate; red label: slower than most", 11)
    w, h = c.extent()
    c.width, c.height = int(max(w, 400) + 20), int(h + 16)
    return pic


def _label_lines(
    placer: Placer, paths: list[tuple[Bundle, list[tuple[float, float]]]], notes: list[str]
) -> tuple[list[tuple[str, str]], list[str]]:
    """Label the lines; the most common rate of each kind is said once (a caption)."""
    by_kind: dict[str, Counter[str]] = {}
    for b, _ in paths:
        if not b.boxed:
            by_kind.setdefault(b.kind, Counter())[b.label] += 1
    common: dict[str, str] = {}  # kind -> the label said once in a caption
    usual: dict[str, float] = {}  # kind -> its most common rate (slower ones are red)
    captions: list[tuple[str, str]] = []
    for kind, counts in sorted(by_kind.items()):
        (label, n), *rest = counts.most_common(2)
        if n > 1 and (not rest or rest[0][1] < n):
            usual[kind] = next(b.rate for b, _ in paths if b.kind == kind and b.label == label)
        if (n >= 3 and sum(counts.values()) > 8) or (len(counts) == 1 and n >= 2):
            common[kind] = label
            left = sum(counts.values()) - n
            more = f"; the other {left} labelled" if left else ""
            captions.append((f"{n} {kind} connections: {label} each (not labelled){more}", "#333"))
    for b, pts in sorted(paths, key=lambda bp: bp[0].rate):
        if b.boxed or common.get(b.kind) == b.label:
            continue
        slow = b.rate < usual.get(b.kind, 0.0)
        side = -1.0 if b.directed else 1.0
        spots = []
        for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78):
            x, y, nx, ny = _along(pts, t)
            for d in (0, 11, -11, 20, -20) if not b.directed else (11, 20, 30):
                spots.append((x + nx * d * side, y + ny * d * side))
        if not placer.put(spots, b.label, 10, RED if slow else "#333", bold=slow):
            notes.append(f"{b.a} - {b.b}: {b.label}")
            x, y, _, _ = _along(pts, 0.5)
            mark = f"[{len(notes)}]"
            near = [(x + dx, y + dy) for dy in (0, 12, -12, 36, -36) for dx in (0, 14, -14, 28)]
            if not placer.put(near, mark, 9, RED if slow else "#333", bold=True):
                notes[-1] += " (unmarked)"
    return captions, notes


def natural(s: str) -> tuple[Any, ...]:
    """Sort key: ``h2`` before ``h10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", s))
