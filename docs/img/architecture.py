"""Draw docs/img/architecture.png: syncplan's layers and which may import which.

Run from the repository root: ``python docs/img/architecture.py``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

OUT = Path(__file__).with_name("architecture.png")

# (name, what it holds, x, y, width, height, colour); the canvas is 100 x 64 units.
BOXES = {
    "shell": (
        "shell: syncplan.cli, syncplan.testbed, syncplan.demo",
        "the syncplan command, the emulated cluster, the demo; imports anything, "
        "imported by nothing",
        2,
        52,
        96,
        9,
        "#e8e0f4",
    ),
    "agents": (
        "syncplan.agents",
        "node agent:\ndiscovery, probes,\nreports",
        2,
        31,
        17,
        14,
        "#dcefdc",
    ),
    "api": (
        "syncplan.api",
        "service: graph,\nplans, jobs,\nschedules",
        21,
        31,
        17,
        14,
        "#dcefdc",
    ),
    "executor": (
        "syncplan.executor",
        "runs plans with\ntorch.distributed",
        40,
        31,
        18,
        14,
        "#dcefdc",
    ),
    "export": (
        "syncplan.export",
        "MSCCL XML,\nNCCL topology",
        60,
        31,
        18,
        14,
        "#dcefdc",
    ),
    "draw": (
        "syncplan.draw",
        "pictures of\nclusters and plans",
        80,
        31,
        18,
        14,
        "#dcefdc",
    ),
    "planner": (
        "syncplan.planner",
        "topology, routing, algorithms, cost model, bounds, verifier",
        21,
        16,
        77,
        9,
        "#dde8f6",
    ),
    "core": (
        "syncplan.core",
        "shared formats: plan document codec and validator, agent report model and limits,\n"
        "error types, PlanOptions, atomic writes, HTTP client",
        2,
        2,
        96,
        9,
        "#f6ecd6",
    ),
}

# (importer, imported): one arrow each; the rest of the rule is in the caption.
ARROWS = [
    ("shell", "agents"),
    ("shell", "api"),
    ("shell", "executor"),
    ("shell", "export"),
    ("shell", "draw"),
    ("agents", "core"),
    ("api", "planner"),
    ("executor", "planner"),
    ("export", "planner"),
    ("draw", "planner"),
    ("planner", "core"),
]


def centre_x(key: str) -> float:
    _, _, x, _, w, _, _ = BOXES[key]
    return x + w / 2


def main() -> None:
    fig, ax = plt.subplots(figsize=(11, 7.4))
    ax.set_xlim(0, 100)
    ax.set_ylim(-4.5, 63)
    ax.axis("off")
    for _, (name, what, x, y, w, h, colour) in BOXES.items():
        ax.add_patch(
            FancyBboxPatch(
                (x, y),
                w,
                h,
                boxstyle="round,pad=0.2,rounding_size=1",
                facecolor=colour,
                edgecolor="#444444",
                linewidth=1.2,
            )
        )
        ax.text(x + w / 2, y + h - 2.3, name, ha="center", va="center", fontsize=11, weight="bold")
        ax.text(x + w / 2, y + (h - 3.5) / 2, what, ha="center", va="center", fontsize=8.5)
    for src, dst in ARROWS:
        sy = BOXES[src][3]
        dy, dh = BOXES[dst][3], BOXES[dst][5]
        # straight down: below the shell's wide box, under the narrower of the two
        x = centre_x(dst) if src == "shell" else centre_x(src)
        ax.add_patch(
            FancyArrowPatch(
                (x, sy - 0.3),
                (x, dy + dh + 0.3),
                arrowstyle="-|>",
                mutation_scale=14,
                color="#333333",
                linewidth=1.3,
            )
        )
    ax.text(
        50,
        -1.5,
        "An arrow points from a package to one it may import (and through it, everything below).\n"
        "A layer imports only layers below it: agents import only core; executor, export and draw "
        "import planner and core;\napi imports planner and core, never agents; nothing imports "
        "the shell.",
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
