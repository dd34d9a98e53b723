"""The fill bound (planner/bound_fill.py) against the bound without it, on every example.

For each example and size it records the reduce-then-broadcast bound with and without the
LP of aggregation fill and step latency, the LP's solve time, and (at --plan-size) auto's
predicted time over both bounds. Writes bench/results/planner_fill_bound.{json,png} and
prints a table.

    python3 bench/planner_quality/fill_bound.py [--examples a,b] [--plan-size 256MiB]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.planner import bound_fill  # noqa: E402
from syncplan.planner.algorithms.base import PlanContext  # noqa: E402
from syncplan.planner.bound import lower_bound  # noqa: E402
from syncplan.planner.plan import compare  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import load_topology  # noqa: E402

SIZES = [1 << k for k in range(12, 31, 3)]  # 4 KiB .. 1 GiB
OUT = ROOT / "bench" / "results"


def bounds(path: Path, size: int) -> dict:
    topo = load_topology(path)
    ranks = topo.endpoints()
    saved = bound_fill.MAX_CLASSES
    bound_fill.MAX_CLASSES = 0
    try:
        plain = lower_bound(PlanContext.create(topo, ranks, size)).time_s
    finally:
        bound_fill.MAX_CLASSES = saved
    ctx = PlanContext.create(topo, ranks, size)
    t0 = time.perf_counter()
    new = lower_bound(ctx)
    return {
        "size": size,
        "plain_s": plain,
        "bound_s": new.time_s,
        "method": new.method,
        "solve_s": round(time.perf_counter() - t0, 3),
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for name, rows in results["examples"].items():
        gain = [r["bound_s"] / r["plain_s"] for r in rows]
        if max(gain) > 1.001:
            ax.plot([r["size"] for r in rows], gain, marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("buffer size (bytes)")
    ax.set_ylabel("bound with fill / bound without")
    ax.set_title("Aggregation fill and step latency: how much the bound rises")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", default="", help="comma-separated example names")
    ap.add_argument("--plan-size", default="256MiB", help="size at which auto is planned")
    args = ap.parse_args()
    paths = sorted((ROOT / "examples").glob("*.json"))
    if args.examples:
        wanted = set(args.examples.split(","))
        paths = [p for p in paths if p.stem in wanted]
        missing = wanted - {p.stem for p in paths}
        if missing:
            sys.exit(f"fill_bound: no example named {', '.join(sorted(missing))}")
    plan_size = parse_size(args.plan_size)
    results: dict = {"sizes": SIZES, "plan_size": plan_size, "examples": {}, "auto": {}}
    print(f"{'example':32s} {'auto/plain':>10s} {'auto/new':>9s} {'max gain':>9s} {'bound s':>7s}")
    for path in paths:
        rows = []
        for k, size in enumerate(SIZES):
            print(f"  {path.stem} {size} B ({k + 1}/{len(SIZES)})", file=sys.stderr, flush=True)
            rows.append(bounds(path, size))
        results["examples"][path.stem] = rows
        topo = load_topology(path)
        comp = compare(topo, topo.endpoints(), plan_size)
        auto = comp.best.predicted_time_s
        ref = bounds(path, plan_size)
        results["auto"][path.stem] = {"auto_s": auto, "algorithm": comp.best.algorithm, **ref}
        gain = max(r["bound_s"] / r["plain_s"] for r in rows)
        worst = max(r["solve_s"] for r in rows)
        print(
            f"{path.stem:32s} {auto / ref['plain_s']:10.4f} {auto / ref['bound_s']:9.4f} "
            f"{gain:9.3f} {worst:7.2f}",
            flush=True,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "planner_fill_bound.json").write_text(json.dumps(results, indent=1))
    plot(results, OUT / "planner_fill_bound.png")
    print(f"wrote {OUT / 'planner_fill_bound.json'} and .png")


if __name__ == "__main__":
    main()
