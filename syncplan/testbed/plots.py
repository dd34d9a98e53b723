"""Plots of testbed results (matplotlib, Agg): time per size, speed-up over gloo, prediction."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from syncplan.core.atomic import AtomicFile

MIB = 1024 * 1024


def _curve(ax: Any, points: list[tuple[int, float]], label: str, color: Any) -> None:
    """Plot (size in bytes, value) points against MiB, one marked line."""
    sizes, values = zip(*points, strict=True) if points else ((), ())
    ax.plot([b / MIB for b in sizes], values, marker="o", label=label, color=color)


def _series(result: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for e in result["results"]:
        out[e["algorithm"]].append((e["size_bytes"], e["median_s"]))
    return {k: sorted(v) for k, v in out.items()}


def plot_results(results: list[dict[str, Any]], out: Path) -> Path:
    """One column per scenario: median time vs size (with the ring bound), and, when plans
    were timed, speed-up over gloo; a last panel of predicted vs measured time if any plan
    carries a prediction. Writes ``out`` (PNG) and returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    has_plans = any(len(_series(r)) > 1 for r in results)
    predicted = [
        (e["predicted_time_s"], e["median_s"], e["algorithm"])
        for r in results
        for e in r["results"]
        if e.get("predicted_time_s")
    ]
    algos = sorted({e["algorithm"] for r in results for e in r["results"]} - {"gloo"})
    color = {"gloo": "C0", **{a: f"C{i + 1}" for i, a in enumerate(algos)}}
    rows = 2 if has_plans else 1
    cols = len(results) + (1 if predicted else 0)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.6 * rows), squeeze=False)
    for c, r in enumerate(results):
        name = r["scenario"]["name"]
        series = _series(r)
        ax = axes[0][c]
        for algo, pts in series.items():
            _curve(ax, pts, algo, color[algo])
        sizes = sorted({e["size_bytes"] for e in r["results"]})
        bounds = {e["size_bytes"]: e.get("ring_bound_s") for e in r["results"]}
        if all(bounds[s] for s in sizes):
            ax.plot(
                [s / MIB for s in sizes],
                [bounds[s] for s in sizes],
                "k--",
                marker="x",
                lw=0.8,
                label="ring bound",
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("buffer (MiB)")
        ax.set_ylabel("median time (s)")
        ax.grid(True, which="both", lw=0.3)
        ax.legend(fontsize=7)
        if has_plans:
            ax2 = axes[1][c]
            gloo = dict(series.get("gloo", []))
            for algo, pts in series.items():
                if algo == "gloo":
                    continue
                xs = [(s, gloo[s] / t) for s, t in pts if s in gloo and t > 0]
                _curve(ax2, xs, algo, color[algo])
            ax2.axhline(1.0, color="k", lw=0.8)
            ax2.set_xscale("log", base=2)
            ax2.set_xlabel("buffer (MiB)")
            ax2.set_ylabel("speed-up over gloo")
            ax2.grid(True, lw=0.3)
            ax2.legend(fontsize=7)
    if predicted:
        ax = axes[0][-1]
        for algo in algos:
            pts = [(p, m) for p, m, a in predicted if a == algo]
            if pts:
                ax.scatter(
                    [p for p, _ in pts], [m for _, m in pts], s=14, label=algo, color=color[algo]
                )
        ax.legend(fontsize=7)
        hi = max(max(p, m) for p, m, _ in predicted)
        ax.plot([0, hi], [0, hi], "k--", lw=0.8)
        ax.set_xlabel("predicted (s)")
        ax.set_ylabel("measured (s)")
        ax.set_title("prediction")
        if rows > 1:
            axes[1][-1].axis("off")
    return _save(fig, out)


def plot_speedups(results: list[dict[str, Any]], out: Path) -> Path:
    """Speed-up over gloo against size, one panel per scenario (one line per algorithm),
    beside predicted vs measured time of every plan; about 1100 x 800 pixels whatever the
    number of scenarios up to six, so it stays readable at README width."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []  # (scenario, {algo: [(size, speed-up)]})
    points = []  # (predicted, measured, algo)
    for r in results:
        gloo = {e["size_bytes"]: e["median_s"] for e in r["results"] if e["algorithm"] == "gloo"}
        lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for e in r["results"]:
            if e["algorithm"] != "gloo" and gloo.get(e["size_bytes"]) and e["median_s"] > 0:
                lines[e["algorithm"]].append(
                    (e["size_bytes"], gloo[e["size_bytes"]] / e["median_s"])
                )
            if e.get("predicted_time_s"):
                points.append((e["predicted_time_s"], e["median_s"], e["algorithm"]))
        panels.append((r["scenario"]["name"], {a: sorted(v) for a, v in lines.items()}))
    algos = sorted({a for _, lines in panels for a in lines})
    color = {a: f"C{i + 1}" for i, a in enumerate(algos)}
    cols = 2 if len(panels) > 1 else 1
    rows = max(1, -(-len(panels) // cols))
    fig = plt.figure(figsize=(10, 2.6 + 2.2 * min(rows, 3)))
    grid = fig.add_gridspec(rows, cols + 1, width_ratios=[1] * cols + [1.15])
    top = max((v for _, lines in panels for pts in lines.values() for _, v in pts), default=1.0)
    for i, (name, lines) in enumerate(panels):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        for a in algos:
            pts = lines.get(a, [])
            if pts:
                ax.plot(
                    [s / MIB for s, _ in pts],
                    [v for _, v in pts],
                    "o-",
                    ms=3,
                    lw=1.2,
                    label=a,
                    color=color[a],
                )
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        sizes = sorted({s / MIB for pts in lines.values() for s, _ in pts})
        ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
        ax.minorticks_off()
        ax.set_ylim(0, top * 1.1)
        ax.set_title(name, fontsize=10)
        ax.grid(True, lw=0.3)
        ax.tick_params(labelsize=8)
        if i % cols == 0:
            ax.set_ylabel("speed-up over gloo", fontsize=9)
        if i // cols == rows - 1:
            ax.set_xlabel("size (MiB)", fontsize=9)
        if i == 0:
            ax.legend(fontsize=7)
    ax2 = fig.add_subplot(grid[:, cols])
    for a in algos:
        pts = [(p, m) for p, m, al in points if al == a]
        if pts:
            ax2.scatter([p for p, _ in pts], [m for _, m in pts], s=14, label=a, color=color[a])
    if points:
        lo = min(min(p, m) for p, m, _ in points) * 0.8
        hi = max(max(p, m) for p, m, _ in points) * 1.25
        ax2.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax2.plot([lo, hi], [1.2 * lo, 1.2 * hi], "k:", lw=0.6)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
    ax2.set_xlabel("predicted (s)", fontsize=9)
    ax2.set_ylabel("measured median (s)", fontsize=9)
    ax2.set_title("plans: measured vs predicted (dotted: +20%)", fontsize=9)
    ax2.tick_params(labelsize=8)
    ax2.legend(fontsize=7)
    return _save(fig, out)


def _save(fig: Any, out: Path) -> Path:
    """Write ``fig`` to ``out`` atomically (a temporary file, then a rename) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    with AtomicFile(out) as f:
        fig.savefig(f.tmp, dpi=110)
    plt.close(fig)
    return out
