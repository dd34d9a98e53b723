"""A minimal vector canvas: shapes in pixels, written as SVG text or rendered to PNG with
matplotlib. The pictures (topology, plan) draw on it so both formats look the same.
``text_box`` bounds a text from the font's advance widths, so layouts can keep labels
apart without a renderer."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

# slow -> fast: red, orange, yellow-green, green, blue (colour-blind readable enough with
# the widths, which carry the same information)
RAMP = [
    (0.0, (0xD7, 0x30, 0x27)),
    (0.25, (0xFC, 0x8D, 0x59)),
    (0.5, (0xD9, 0xC2, 0x4A)),
    (0.75, (0x66, 0xBD, 0x63)),
    (1.0, (0x31, 0x68, 0xB4)),
]


def ramp(x: float) -> str:
    """The colour at ``x`` in [0, 1] on the slow-to-fast ramp."""
    x = min(1.0, max(0.0, x))
    for (a, ca), (b, cb) in itertools.pairwise(RAMP):
        if x <= b:
            t = (x - a) / (b - a)
            return "#" + "".join(
                f"{round(p + (q - p) * t):02x}" for p, q in zip(ca, cb, strict=True)
            )
    return "#3168b4"


# DejaVu Sans advance widths (1/100 em) of ASCII 32..126, regular and bold; others: 1 em
_ADVANCE = (
    "32 40 46 84 64 95 78 27 39 39 50 84 32 36 32 34 64 64 64 64 64 64 64 64 64 64 34 34 84 84 "
    "84 53 100 68 69 70 77 63 58 77 75 29 29 66 56 86 75 79 60 79 69 63 61 73 68 99 69 61 69 39 "
    "34 39 84 50 50 61 63 55 63 62 35 63 63 28 28 58 28 97 63 61 63 63 41 52 39 63 59 82 59 59 "
    "52 64 34 64 84",
    "35 46 52 84 70 100 87 31 46 46 52 84 38 42 38 37 70 70 70 70 70 70 70 70 70 70 40 40 84 84 "
    "84 58 100 77 76 73 83 68 68 82 84 37 37 77 64 100 84 85 73 85 77 72 68 81 77 110 77 72 73 "
    "46 37 46 84 50 50 67 72 59 72 68 44 72 71 34 34 67 34 104 71 69 72 72 49 60 48 71 65 92 65 "
    "65 58 71 37 71 84",
)
_WIDTHS = tuple([int(w) for w in a.split()] for a in _ADVANCE)


def text_width(s: str, size: float, bold: bool = False) -> float:
    """The width in pixels of ``s`` at ``size`` pixels (a little over the font's)."""
    table = _WIDTHS[bold]
    em = sum(table[ord(ch) - 32] if 32 <= ord(ch) < 127 else 100 for ch in s) / 100
    return em * size * 1.03 + 1


def text_box(a: dict[str, Any]) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) around a text shape's glyphs (baseline at ``y``)."""
    w = text_width(a["s"], a["size"], a["bold"])
    x0 = a["x"] - {"start": 0.0, "middle": w / 2, "end": w}[a["anchor"]]
    return (x0, a["y"] - 0.8 * a["size"], x0 + w, a["y"] + 0.25 * a["size"])


def overlaps(p: tuple[float, ...], q: tuple[float, ...]) -> bool:
    """Whether boxes (x0, y0, x1, y1) share area."""
    return p[0] < q[2] and q[0] < p[2] and p[1] < q[3] and q[1] < p[3]


@dataclass
class Canvas:
    width: int
    height: int
    shapes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        color: str = "#444",
        width: float = 1.0,
        dash: bool = False,
        title: str = "",
    ) -> None:
        self.shapes.append(
            (
                "line",
                dict(x1=x1, y1=y1, x2=x2, y2=y2, color=color, width=width, dash=dash, title=title),
            )
        )

    def arrow(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        color: str = "#444",
        width: float = 1.0,
        head: float = 7.0,
        title: str = "",
    ) -> None:
        """A line ending in a filled head at (x2, y2)."""
        ang = math.atan2(y2 - y1, x2 - x1)
        h = head + width
        bx, by = x2 - h * math.cos(ang), y2 - h * math.sin(ang)
        self.line(x1, y1, bx, by, color, width, title=title)
        left = (bx + h * 0.45 * math.sin(ang), by - h * 0.45 * math.cos(ang))
        right = (bx - h * 0.45 * math.sin(ang), by + h * 0.45 * math.cos(ang))
        self.polygon([(x2, y2), left, right], color)

    def polyline(
        self,
        points: list[tuple[float, float]],
        color: str = "#444",
        width: float = 1.0,
        dash: bool = False,
        title: str = "",
    ) -> None:
        """Connected segments through ``points`` (curves are drawn as many short ones)."""
        self.shapes.append(
            ("polyline", dict(points=points, color=color, width=width, dash=dash, title=title))
        )

    def polygon(self, points: list[tuple[float, float]], fill: str) -> None:
        self.shapes.append(("polygon", dict(points=points, fill=fill)))

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        fill: str = "none",
        stroke: str = "#444",
        width: float = 1.0,
        dash: bool = False,
        title: str = "",
    ) -> None:
        self.shapes.append(
            (
                "rect",
                dict(
                    x=x,
                    y=y,
                    w=w,
                    h=h,
                    fill=fill,
                    stroke=stroke,
                    width=width,
                    dash=dash,
                    title=title,
                ),
            )
        )

    def circle(
        self,
        x: float,
        y: float,
        r: float,
        fill: str = "#fff",
        stroke: str = "#444",
        width: float = 1.0,
        title: str = "",
    ) -> None:
        self.shapes.append(
            ("circle", dict(x=x, y=y, r=r, fill=fill, stroke=stroke, width=width, title=title))
        )

    def text(
        self,
        x: float,
        y: float,
        s: str,
        size: float = 12,
        anchor: str = "start",
        color: str = "#222",
        bold: bool = False,
    ) -> None:
        self.shapes.append(
            ("text", dict(x=x, y=y, s=s, size=size, anchor=anchor, color=color, bold=bold))
        )

    def legend(
        self,
        x: float,
        y: float,
        lo: float,
        hi: float,
        unit: str = "GB/s",
        label: str = "measured rate",
    ) -> float:
        """A colour bar from ``lo`` (left) to ``hi`` (right), ``label`` above, ``unit`` after
        the bar; returns the right edge."""
        self.text(x, y - 6, label, 11)
        for i in range(20):
            self.rect(x + i * 8, y, 8, 10, fill=ramp(i / 19), stroke="none", width=0)
        if lo != hi:
            self.text(x, y + 24, f"{lo:g}", 10)
        self.text(x + 160, y + 24, f"{hi:g}", 10, "end")
        self.text(x + 168, y + 10, unit, 10)
        return x + 168 + text_width(unit, 10)

    def texts(self) -> list[dict[str, Any]]:
        """The text shapes, in drawing order."""
        return [a for kind, a in self.shapes if kind == "text"]

    def extent(self) -> tuple[float, float]:
        """The right and bottom edges of what is drawn."""
        right = bottom = 0.0
        for kind, a in self.shapes:
            if kind == "text":
                box = text_box(a)
                right, bottom = max(right, box[2]), max(bottom, box[3])
            elif kind == "rect":
                right, bottom = max(right, a["x"] + a["w"]), max(bottom, a["y"] + a["h"])
            elif kind == "line":
                right = max(right, a["x1"], a["x2"])
                bottom = max(bottom, a["y1"], a["y2"])
            elif kind in ("polyline", "polygon"):
                right = max([right, *(p[0] for p in a["points"])])
                bottom = max([bottom, *(p[1] for p in a["points"])])
            elif kind == "circle":
                right, bottom = max(right, a["x"] + a["r"]), max(bottom, a["y"] + a["r"])
        return right, bottom

    def to_svg(self) -> str:
        out = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
            f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" '
            'font-family="DejaVu Sans, Arial, sans-serif">',
            f'<rect width="{self.width}" height="{self.height}" fill="#ffffff"/>',
        ]
        for kind, a in self.shapes:
            tip = f"<title>{escape(a['title'])}</title>" if a.get("title") else ""
            dash = ' stroke-dasharray="5,3"' if a.get("dash") else ""
            if kind == "line":
                out.append(
                    f'<line x1="{a["x1"]:.1f}" y1="{a["y1"]:.1f}" x2="{a["x2"]:.1f}" '
                    f'y2="{a["y2"]:.1f}" stroke="{a["color"]}" '
                    f'stroke-width="{a["width"]:.2f}"{dash}>{tip}</line>'
                )
            elif kind == "polyline":
                pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in a["points"])
                out.append(
                    f'<polyline points="{pts}" fill="none" stroke="{a["color"]}" '
                    f'stroke-width="{a["width"]:.2f}"{dash}>{tip}</polyline>'
                )
            elif kind == "polygon":
                pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in a["points"])
                out.append(f'<polygon points="{pts}" fill="{a["fill"]}"/>')
            elif kind == "rect":
                out.append(
                    f'<rect x="{a["x"]:.1f}" y="{a["y"]:.1f}" width="{a["w"]:.1f}" '
                    f'height="{a["h"]:.1f}" fill="{a["fill"]}" stroke="{a["stroke"]}" '
                    f'stroke-width="{a["width"]}" rx="3"{dash}>{tip}</rect>'
                )
            elif kind == "circle":
                out.append(
                    f'<circle cx="{a["x"]:.1f}" cy="{a["y"]:.1f}" r="{a["r"]:.1f}" '
                    f'fill="{a["fill"]}" stroke="{a["stroke"]}" '
                    f'stroke-width="{a["width"]}">{tip}</circle>'
                )
            else:
                weight = ' font-weight="bold"' if a["bold"] else ""
                out.append(
                    f'<text x="{a["x"]:.1f}" y="{a["y"]:.1f}" font-size="{a["size"]}" '
                    f'text-anchor="{a["anchor"]}" fill="{a["color"]}"{weight}>'
                    f"{escape(a['s'])}</text>"
                )
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def to_png(self, path: str | Path, dpi: int = 100) -> None:
        """Render with matplotlib's Agg backend (pixels are 1/dpi inch)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import patches

        fig = plt.figure(figsize=(self.width / dpi, self.height / dpi), dpi=dpi)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(0, self.width)
        ax.set_ylim(self.height, 0)
        ax.axis("off")
        pt = 72 / dpi  # points per pixel
        anchors = {"start": "left", "middle": "center", "end": "right"}
        for z, (kind, a) in enumerate(self.shapes):  # later shapes on top, as in SVG
            ls = (0, (5, 3)) if a.get("dash") else "-"
            if kind == "line":
                ax.plot(
                    [a["x1"], a["x2"]],
                    [a["y1"], a["y2"]],
                    color=a["color"],
                    linewidth=a["width"] * pt,
                    linestyle=ls,
                    solid_capstyle="butt",
                    zorder=z,
                )
            elif kind == "polyline":
                ax.plot(
                    [p[0] for p in a["points"]],
                    [p[1] for p in a["points"]],
                    color=a["color"],
                    linewidth=a["width"] * pt,
                    linestyle=ls,
                    solid_capstyle="butt",
                    zorder=z,
                )
            elif kind == "polygon":
                ax.add_patch(
                    patches.Polygon(a["points"], closed=True, color=a["fill"], lw=0, zorder=z)
                )
            elif kind == "rect":
                ax.add_patch(
                    patches.Rectangle(
                        (a["x"], a["y"]),
                        a["w"],
                        a["h"],
                        facecolor="none" if a["fill"] == "none" else a["fill"],
                        edgecolor="none" if a["stroke"] == "none" else a["stroke"],
                        linewidth=a["width"] * pt,
                        linestyle=ls,
                        zorder=z,
                    )
                )
            elif kind == "circle":
                ax.add_patch(
                    patches.Circle(
                        (a["x"], a["y"]),
                        a["r"],
                        facecolor=a["fill"],
                        edgecolor=a["stroke"],
                        linewidth=a["width"] * pt,
                        zorder=z,
                    )
                )
            else:
                ax.text(
                    a["x"],
                    a["y"],
                    a["s"],
                    fontsize=a["size"] * pt,
                    color=a["color"],
                    ha=anchors[a["anchor"]],
                    va="baseline",
                    zorder=z,
                    fontweight="bold" if a["bold"] else "normal",
                )
        fig.savefig(path, dpi=dpi)
        plt.close(fig)

    def save(self, path: str | Path) -> None:
        """Write ``path`` as SVG or PNG by its suffix."""
        p = Path(path)
        if p.suffix.lower() == ".png":
            self.to_png(p)
        elif p.suffix.lower() == ".svg":
            p.write_text(self.to_svg())
        else:
            raise ValueError(f"{path}: the picture must end in .svg or .png")
