"""Draw docs/img/architecture.png: syncplan's six import layers and which may import which.

Run from the repository root: ``python docs/img/architecture.py``. The layers are those that
tests/test_layering.py enforces (its ``LAYERS``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

OUT = Path(__file__).with_name("architecture.png")

# Layers bottom to top: (number, sides); layer n sits at y = ROW_Y + n * ROW_STEP.
LAYERS = [
    (0, "core"),
    (1, "planner,\nagents"),
    (2, "executor,\nexport"),
    (3, "draw"),
    (4, "api"),
    (5, "shell"),
]
ROW_Y = 2.0
ROW_STEP = 14.0
ROW_H = 9.0

# key: (name, what it holds, layer, x, width, colour); the canvas is 100 units wide.
BOXES = {
    "shell": (
        "shell: syncplan.cli, syncplan.testbed, syncplan.demo",
        "the syncplan command, the emulated cluster, the demo; imports anything, "
        "imported by nothing",
        5,
        13,
        85,
        "#e8e0f4",
    ),
    "api": (
        "syncplan.api",
        "the service: cluster graph, plans, jobs,\nschedules, exports and /ui pictures",
        4,
        60,
        38,
        "#f4dede",
    ),
    "draw": (
        "syncplan.draw",
        "pictures of clusters and plans",
        3,
        60,
        38,
        "#d8eeee",
    ),
    "executor": (
        "syncplan.executor",
        "runs plans with\ntorch.distributed",
        2,
        37,
        20,
        "#dcefdc",
    ),
    "export": (
        "syncplan.export",
        "MSCCL XML, NCCL topology files",
        2,
        60,
        38,
        "#dcefdc",
    ),
    "agents": (
        "syncplan.agents",
        "node agent: discovery,\nprobes, reports",
        1,
        13,
        21,
        "#dde8f6",
    ),
    "planner": (
        "syncplan.planner",
        "topology, routing, algorithms, cost model, bounds, verifier",
        1,
        37,
        61,
        "#dde8f6",
    ),
    "core": (
        "syncplan.core",
        "shared formats: plan document codec, agent report model and its limits (core/report.py),"
        "\nerror types incl. CLIError (core/errors.py), PlanOptions, atomic writes, HTTP client",
        0,
        13,
        85,
        "#f6ecd6",
    ),
}

# (importer, imported, x of the arrow): each arrow points straight down to a package the
# importer uses; it may also import whatever lies further down that arrow's chain.
ARROWS = [
    ("shell", "agents", 23.5),
    ("shell", "executor", 47.0),
    ("shell", "api", 79.0),
    ("api", "draw", 79.0),
    ("draw", "export", 79.0),
    ("export", "planner", 79.0),
    ("executor", "planner", 47.0),
    ("agents", "core", 23.5),
    ("planner", "core", 67.5),
]


def row_y(layer: int) -> float:
    return ROW_Y + layer * ROW_STEP


def main() -> None:
    fig, ax = plt.subplots(figsize=(11, 9.6))
    ax.set_xlim(0, 100)
    ax.set_ylim(-7, row_y(5) + ROW_H + 2)
    ax.axis("off")
    for number, names in LAYERS:
        y = row_y(number)
        ax.add_patch(
            Rectangle(
                (0.5, y - 1.8),
                99,
                ROW_H + 3.6,
                facecolor="#f3f3f3" if number % 2 == 0 else "#fafafa",
                edgecolor="none",
                zorder=0,
            )
        )
        ax.text(
            6,
            y + ROW_H / 2 + 1.4,
            f"layer {number}",
            ha="center",
            va="center",
            fontsize=10,
            weight="bold",
            color="#555555",
        )
        ax.text(
            6, y + ROW_H / 2 - 2.0, names, ha="center", va="center", fontsize=8, color="#555555"
        )
    for name, what, layer, x, w, colour in BOXES.values():
        y = row_y(layer)
        ax.add_patch(
            FancyBboxPatch(
                (x, y),
                w,
                ROW_H,
                boxstyle="round,pad=0.2,rounding_size=1",
                facecolor=colour,
                edgecolor="#444444",
                linewidth=1.2,
                zorder=2,
            )
        )
        ax.text(
            x + w / 2,
            y + ROW_H - 2.3,
            name,
            ha="center",
            va="center",
            fontsize=11,
            weight="bold",
            zorder=3,
        )
        ax.text(
            x + w / 2, y + (ROW_H - 3.5) / 2, what, ha="center", va="center", fontsize=8.5, zorder=3
        )
    for src, dst, x in ARROWS:
        ax.add_patch(
            FancyArrowPatch(
                (x, row_y(BOXES[src][2]) - 0.3),
                (x, row_y(BOXES[dst][2]) + ROW_H + 0.3),
                arrowstyle="-|>",
                mutation_scale=14,
                color="#333333",
                linewidth=1.3,
                zorder=1,
            )
        )
    ax.text(
        50,
        -4.2,
        "Imports point downward only: a package imports its own side and lower layers, never a "
        "higher one, and there are no import circles.\nAn arrow points to a package it imports; "
        "it may also import what lies further down that arrow's chain (api: draw, export, "
        "planner, core).\nagents import only core; api never imports agents; nothing imports "
        "the shell, which may import anything.",
        ha="center",
        va="center",
        fontsize=9,
        color="#333333",
    )
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
