"""A minimal vector canvas: shapes in pixels, written as SVG text or rendered to PNG with
matplotlib. The pictures (topology, plan) draw on it so both formats look the same."""

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
    ) -> None:
        """A colour bar from ``lo`` to ``hi`` with its label."""
        self.text(x, y - 6, label, 11)
        for i in range(20):
            self.rect(x + i * 8, y, 8, 10, fill=ramp(i / 19), stroke="none", width=0)
        self.text(x, y + 24, f"{lo:g}", 10)
        self.text(x + 160, y + 24, f"{hi:g} {unit}", 10, "end")

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
