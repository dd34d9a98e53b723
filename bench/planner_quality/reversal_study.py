"""The pieced step-priced LP reduced by time reversal, doubled to 64 pieces without a budget.

A study of ``syncplan.planner.algorithms.packing.reversal.ReversedLP`` (which effort "thorough" runs
within its budget; docs/status.md, sessions 21-23): each piece count's LP starts from the
trees of the one before (each in the two pieces its piece splits into) and runs --rounds
rounds of column generation. The program is built, priced by the cost model and
checked by the verifier. Writes bench/results/planner_reversal_study.{json,png} (--out,
--out-dir).

    python3 bench/planner_quality/reversal_study.py [--topology examples/mesh-4x4-degraded.json]
        [--size 256MiB] [--pieces 2,4,8,16,32,64] [--rounds 30] [--out-dir DIR]
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
from syncplan.core.program import program_to_doc  # noqa: E402
from syncplan.planner.algorithms.base import PlanContext  # noqa: E402
from syncplan.planner.algorithms.packing.pieced import window_program  # noqa: E402
from syncplan.planner.algorithms.packing.reversal import ReversedLP, reverse_arcs  # noqa: E402
from syncplan.planner.algorithms.packing.sets import packings  # noqa: E402
from syncplan.planner.bound import lower_bound  # noqa: E402
from syncplan.planner.plan import with_routes  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import load_topology  # noqa: E402
from syncplan.planner.verify import verify_plan  # noqa: E402

OUT = ROOT / "bench" / "results"


def study(path: Path, size: int, counts: list[int], rounds: int) -> dict:
    topo = load_topology(path)
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, size)
    if reverse_arcs(ctx) is None:
        raise SystemExit(f"{path.stem}: time reversal needs every link at one bandwidth both ways")
    bound = lower_bound(ctx).time_s
    table = packings(ctx)
    key = min(table, key=lambda k: (table[k].theta, str(k)))
    slack = len(ranks) if key[1] is None else key[1]
    routes = ctx.memo["packing_routes"][key[0]]
    start, split = table[key].pool, None
    levels = []
    t0 = time.perf_counter()
    for pieces in counts:
        t1 = time.perf_counter()
        lp = ReversedLP(ctx, routes, slack, start, pieces, split)
        found = lp.solve(rounds=rounds)
        if found is None:
            raise SystemExit(f"{path.stem}: the LP of {pieces} pieces failed")
        trees, offsets = lp.program_trees(found)
        program = window_program(trees, offsets, lp.height, min(1 << 20, size))
        t = ctx.cost.program_time(ranks, program, float(size))
        levels.append(
            {
                "pieces": pieces,
                "lp_over_bound": found.theta * size / bound,
                "program_over_bound": t / bound,
                "rounds": len(lp.values),
                "columns": len(lp.trees),
                "seconds": time.perf_counter() - t1,
            }
        )
        print(
            f"  {path.stem}: {pieces} pieces: LP {found.theta * size / bound:.4f}x, program "
            f"{t / bound:.4f}x the bound, {len(lp.values)} rounds, {len(lp.trees)} columns, "
            f"{time.perf_counter() - t1:.1f} s",
            flush=True,
        )
        start, split = found.trees, [[2 * p, 2 * p + 1] for p in lp.live_offsets.tolist()]
    doc = {
        "ranks": ranks,
        "size_bytes": size,
        "program": program_to_doc(with_routes(program, ranks, ctx.router)),
    }
    rep = verify_plan(doc, topo)
    if not rep.ok:
        raise SystemExit(f"{path.stem}: verifier: {rep.error}")
    return {
        "topology": path.stem,
        "size_bytes": size,
        "bound_s": bound,
        "rounds": rounds,
        "levels": levels,
        "program_s": t,
        "simulated_s": rep.simulated_time_s,
        "seconds": time.perf_counter() - t0,
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_xscale("log")
    for r in rows:
        xs = [lv["pieces"] for lv in r["levels"]]
        ax.plot(
            xs,
            [lv["program_over_bound"] for lv in r["levels"]],
            marker="o",
            label=f"{r['topology']} ({r['seconds']:.0f} s)",
        )
        ax.set_xticks(xs, [str(x) for x in xs])
    ax.axhline(1.03, color="grey", lw=0.8, ls="--")
    ax.set(
        xlabel="pieces",
        ylabel="program / lower bound",
        title="pieced LP by time reversal, no budget",
    )
    ax.minorticks_off()
    ax.legend()
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--topology",
        action="append",
        type=Path,
        help="topology file (repeatable; default examples/mesh-4x4-degraded.json)",
    )
    ap.add_argument("--size", type=parse_size, default=256 << 20)
    ap.add_argument("--pieces", default="2,4,8,16,32,64", help="piece counts, in order")
    ap.add_argument("--rounds", type=int, default=30, help="column-generation rounds a count")
    ap.add_argument("--out", default="planner_reversal_study")
    ap.add_argument("--out-dir", type=Path, default=OUT)
    args = ap.parse_args()
    try:
        counts = [int(c) for c in args.pieces.split(",")]
    except ValueError:
        ap.error(f"--pieces: not a comma-separated list of integers: {args.pieces!r}")
    if not counts or min(counts) < 1 or args.rounds < 0:
        ap.error("--pieces must be counts >= 1 and --rounds >= 0")
    paths = args.topology or [ROOT / "examples" / "mesh-4x4-degraded.json"]
    for p in paths:
        if not p.is_file():
            ap.error(f"--topology: no such file: {p}")
    rows = [study(p, args.size, counts, args.rounds) for p in paths]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.out_dir / f"{args.out}.json", rows)
    plot(rows, args.out_dir / f"{args.out}.png")


if __name__ == "__main__":
    main()
