"""What the transfer limit costs forest on the scale cluster.

A plan document lists every transfer (docs/formats.md, Plan document), so forest keeps its programs
under ``PACKING.max_transfers`` (800,000: ~60 MB of JSON). Trees per lane times pieces is what that
limit caps. This study prices forest's tree sets on the planner_scale cluster under larger
limits, exactly as forest prices them (per-arc lockstep model, every stagger, intra-host
grouping, piece count and ramp, then LP piece sizes for the best), without building the
programs, and reports the best time per limit against the lower bound with the document
size such a plan would have.

    python3 bench/planner_scale/cap_study.py [--ranks 1024,4096] [--limits 0.8e6,1.6e6,...]

Writes bench/results/cap_study.json and prints a table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.planner.algorithms.base import PlanContext  # noqa: E402
from syncplan.planner.algorithms.forest import FOREST  # noqa: E402
from syncplan.planner.bound import lower_bound  # noqa: E402
from syncplan.planner.topology import Topology  # noqa: E402

from bench.planner_scale.run import topology  # noqa: E402

forest = importlib.import_module("syncplan.planner.algorithms.forest.host")
pricing = importlib.import_module("syncplan.planner.algorithms.forest.pricing")

SIZE = 256 * 2**20
LIMITS = (800_000, 1_600_000, 3_200_000, 6_400_000, 12_800_000)
EXTRA_TREE_COUNTS = (8, 10, 12)
DOC_BYTES_PER_TRANSFER = 77  # 1,024-rank plan of planner_scale: 59.7 MB / 774,288 transfers


def study(ranks: int, limits: list[int]) -> list[dict]:
    """Per limit, forest's best configuration under it (None where nothing fits)."""
    topo = Topology.from_dict(topology(ranks))
    ctx = PlanContext.create(topo, topo.endpoints(), SIZE)
    bound = lower_bound(ctx).time_s
    lanes = forest.build_lanes(ctx)
    arcs = forest.Arcs(ctx)
    m = len(ctx.host_groups)
    counts = sorted({t for t in (*forest.tree_counts(m), *EXTRA_TREE_COUNTS) if t < m})
    best: dict[int, dict] = {}
    for t in counts:
        t0 = time.perf_counter()
        plan = forest.HostPlan(ctx, lanes, forest.build_trees(lanes, t), arcs)
        fluid = plan.solve_shares()
        for limit in limits:
            if plan.transfers_per_piece(all_trees=True) * FOREST.min_pieces > limit:
                continue
            configs: dict = {}
            pricing.price_configs(plan, fluid, float(SIZE), FOREST.max_units, configs, limit)
            if not configs:
                continue
            first = min(configs.values(), key=lambda c: c[0])
            est, _, width, group, fracs, _ = pricing.refine_config(first, float(SIZE))
            transfers = plan.transfer_counter()(len(fracs), group)
            row = {
                "trees_per_lane": t,
                "host_tree_height": plan.hmax,
                "pieces": len(fracs),
                "stagger": width,
                "intra_group": group,
                "time_s": est,
                "ratio": est / bound,
                "transfers": transfers,
                "est_doc_MB": transfers * DOC_BYTES_PER_TRANSFER / 1e6,
            }
            if est < best.get(limit, {"time_s": float("inf")})["time_s"]:
                best[limit] = row
        print(
            f"  {ranks} ranks, {t} trees per lane priced in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )
    rows, carried = [], None
    for limit in sorted(limits):  # a plan that fits a limit fits every larger one
        here = best.get(limit)
        if carried is not None and (here is None or carried["time_s"] < here["time_s"]):
            here = carried
        carried = here
        rows.append({"ranks": ranks, "limit": limit, "bound_s": bound, "best": here})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1024,4096", help="comma-separated rank counts")
    ap.add_argument(
        "--limits", default=",".join(str(x) for x in LIMITS), help="comma-separated transfer limits"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cap_study.json")
    args = ap.parse_args(argv)
    try:
        rank_counts = [int(x) for x in args.ranks.split(",")]
        limits = [int(float(x)) for x in args.limits.split(",")]
    except ValueError as e:
        ap.error(f"--ranks / --limits: {e}")
    if any(r < 8 or r % 8 for r in rank_counts) or any(x < 1 for x in limits):
        ap.error("--ranks must be multiples of 8 (8-GPU hosts), --limits positive")
    rows = []
    for ranks in rank_counts:
        rows += study(ranks, limits)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"size_bytes": SIZE, "rows": rows}, indent=1) + "\n")
    print(
        f"\n{'ranks':>6} {'limit':>11} {'trees':>5} {'height':>6} {'pieces':>6} "
        f"{'x bound':>8} {'doc MB':>7}"
    )
    for r in rows:
        b = r["best"]
        if b is None:
            print(f"{r['ranks']:>6} {r['limit']:>11,} {'nothing fits':>36}")
            continue
        print(
            f"{r['ranks']:>6} {r['limit']:>11,} {b['trees_per_lane']:>5} "
            f"{b['host_tree_height']:>6} {b['pieces']:>6} {b['ratio']:>8.3f} "
            f"{b['est_doc_MB']:>7.0f}"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
