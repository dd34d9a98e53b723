"""Effort fast against effort thorough: ``auto`` at 256 MiB on every example, side by side.

For each example topology it plans ``auto`` with effort fast and then thorough (docs/planner.md,
"Effort"), verifies both programs, and records each plan's time over its lower bound and its
solve time. Writes bench/results/planner_effort.{json,png} (--out, --out-dir) and prints the
table.

    python3 bench/planner_quality/effort.py [--examples a,b] [--size 256MiB] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atomic import save_figure, write_json  # noqa: E402
from syncplan.core.options import PlanOptions  # noqa: E402
from syncplan.planner.plan import make_plan  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import load_topology  # noqa: E402
from syncplan.planner.verify import verify_plan  # noqa: E402

OUT = ROOT / "bench" / "results"
EFFORTS = ("fast", "thorough")


def measure(path: Path, size: int) -> dict:
    topo = load_topology(path)
    ranks = topo.endpoints()
    row: dict = {"example": path.stem, "ranks": len(ranks)}
    for effort in EFFORTS:
        t0 = time.perf_counter()
        doc = make_plan(topo, ranks, size, options=PlanOptions(effort=effort))
        secs = time.perf_counter() - t0
        rep = verify_plan(doc, topo)
        if not rep.ok:
            raise SystemExit(f"{path.stem} ({effort}): verifier: {rep.error}")
        row[effort] = {
            "algorithm": doc["algorithm"],
            "ratio": doc["predicted_time_s"] / doc["lower_bound_time_s"],
            "predicted_s": doc["predicted_time_s"],
            "seconds": secs,
            "packing": doc["details"].get("packing"),
        }
    print(
        f"{path.stem:30s} {row['fast']['ratio']:8.4f} {row['fast']['seconds']:7.1f} s"
        f" {row['thorough']['ratio']:8.4f} {row['thorough']['seconds']:7.1f} s",
        flush=True,
    )
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(rows))
    for k, effort in enumerate(EFFORTS):
        ax.bar(
            [x + 0.4 * k - 0.2 for x in xs], [r[effort]["ratio"] for r in rows], 0.4, label=effort
        )
    ax.axhline(1.03, color="grey", lw=0.8, ls="--", label="3 % above the bound")
    ax.set_xticks(list(xs), [r["example"] for r in rows], rotation=60, ha="right", fontsize=7)
    top = max(max(r[e]["ratio"] for e in EFFORTS) for r in rows)
    ax.set_ylim(0.99, min(top, 1.15) + 0.01)
    ax.set(ylabel="auto / lower bound", title="auto at 256 MiB: effort fast vs thorough")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", help="comma-separated example names (default: all)")
    ap.add_argument("--size", type=parse_size, default=256 << 20)
    ap.add_argument("--out", default="planner_effort")
    ap.add_argument("--out-dir", type=Path, default=OUT)
    args = ap.parse_args()
    every = sorted((ROOT / "examples").glob("*.json"))
    if args.examples:
        names = args.examples.split(",")
        unknown = sorted(set(names) - {p.stem for p in every})
        if unknown:
            ap.error(f"--examples: no such example: {', '.join(unknown)}")
        every = [p for p in every if p.stem in names]
    print(f"{'example':30s} {'fast':>8s} {'solve':>9s} {'thorough':>8s} {'solve':>9s}")
    rows = [measure(p, args.size) for p in every]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.out_dir / f"{args.out}.json", {"size_bytes": args.size, "rows": rows})
    plot(rows, args.out_dir / f"{args.out}.png")


if __name__ == "__main__":
    main()
