"""Plan quality: every algorithm against the lower bound, on every example, over sizes.

For each example topology (examples/*.json) and each size from 1 KiB to 1 GiB (powers of 4)
it prices every algorithm, builds and verifies its program (up to --verify-max-ranks ranks)
and records predicted time, verifier-simulated time and the bound. Writes
bench/results/planner_quality.json, a plot (time vs size per example, and time/bound per
algorithm at 256 MiB) and prints the 256 MiB table.

    python3 bench/planner_quality/run.py [--quick] [--examples a,b] [--verify-max-ranks N]
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
from syncplan.planner.algorithms import ALGORITHMS  # noqa: E402
from syncplan.planner.plan import compare, with_routes  # noqa: E402
from syncplan.planner.topology import load_topology  # noqa: E402
from syncplan.planner.verify import verify_plan  # noqa: E402

SIZES = [1 << k for k in range(10, 31, 2)]  # 1 KiB .. 1 GiB
REF_SIZE = 256 << 20
OUT = ROOT / "bench" / "results"


def run(examples: list[Path], sizes: list[int], verify_max: int) -> dict:
    results: dict = {"sizes": sizes, "algorithms": [*ALGORITHMS, "auto"], "examples": {}}
    for path in examples:
        topo = load_topology(path)
        ranks = topo.endpoints()
        rows = []
        for size in sizes:
            t0 = time.perf_counter()
            comp = compare(topo, ranks, size)
            row = {
                "size": size,
                "bound_s": comp.bound.time_s,
                "bound_method": comp.bound.method,
                "algorithms": {},
            }
            for name, cand in comp.candidates.items():
                entry = {"predicted_s": cand.predicted_time_s, "simulated_s": None}
                if len(ranks) <= verify_max:
                    prog = with_routes(cand.build(), ranks, comp.router)
                    doc = {"ranks": ranks, "size_bytes": size, "program": program_to_doc(prog)}
                    rep = verify_plan(doc, topo)
                    if not rep.ok:
                        raise SystemExit(f"{path.stem} {size} {name}: verifier: {rep.error}")
                    entry["simulated_s"] = rep.simulated_time_s
                row["algorithms"][name] = entry
            for name in comp.infeasible:
                row["algorithms"][name] = None
            best = comp.best
            row["algorithms"]["auto"] = {
                "predicted_s": best.predicted_time_s,
                "simulated_s": row["algorithms"][best.algorithm]["simulated_s"],
                "chosen": best.algorithm,
            }
            row["seconds"] = time.perf_counter() - t0
            rows.append(row)
            print(
                f"  {path.stem:26s} {size:>11d} B  done in {row['seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        results["examples"][path.stem] = {"ranks": len(ranks), "rows": rows}
    return results


def table(results: dict) -> str:
    names = results["algorithms"]
    lines = [
        f"{'example':26s} {'ranks':>5s} {'bound':>10s} " + " ".join(f"{n:>12s}" for n in names)
    ]
    for ex, data in results["examples"].items():
        row = next((r for r in data["rows"] if r["size"] == REF_SIZE), None)
        if row is None:
            continue
        cells = []
        for n in names:
            e = row["algorithms"].get(n)
            cells.append(f"{e['predicted_s'] / row['bound_s']:>11.3f}x" if e else f"{'-':>12s}")
        lines.append(
            f"{ex:26s} {data['ranks']:>5d} {row['bound_s'] * 1e3:>8.3f}ms " + " ".join(cells)
        )
    return "\n".join(lines)


def plot(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exs = list(results["examples"])
    names = [n for n in results["algorithms"] if n != "auto"]
    cols = 4
    rows_n = (len(exs) + cols - 1) // cols + 1
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.3 * rows_n), squeeze=False)
    for ax, ex in zip(axes.flat, exs, strict=False):
        data = results["examples"][ex]["rows"]
        sizes = [r["size"] for r in data]
        ax.plot(sizes, [r["bound_s"] for r in data], "k--", label="lower bound")
        for n in names:
            ys = [
                r["algorithms"][n]["predicted_s"] if r["algorithms"].get(n) else None for r in data
            ]
            pts = [(s, y) for s, y in zip(sizes, ys, strict=True) if y]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=".", label=n)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{ex} ({results['examples'][ex]['ranks']} ranks)", fontsize=9)
        ax.set_xlabel("size (bytes)", fontsize=8)
        ax.set_ylabel("time (s)", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=7)
    for ax in list(axes.flat)[len(exs) :]:
        ax.axis("off")
    ax = fig.add_subplot(rows_n, 1, rows_n)
    width = 0.8 / (len(names) + 1)
    for i, n in enumerate([*names, "auto"]):
        vals = []
        for ex in exs:
            row = next((r for r in results["examples"][ex]["rows"] if r["size"] == REF_SIZE), None)
            e = row["algorithms"].get(n) if row else None
            vals.append(e["predicted_s"] / row["bound_s"] if e else 0)
        ax.bar([k + i * width for k in range(len(exs))], vals, width, label=n)
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.axhline(1.03, color="gray", ls=":", lw=1)
    ax.set_xticks([k + 0.4 for k in range(len(exs))], exs, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("time / lower bound at 256 MiB")
    ax.set_ylim(0.9, None)
    ax.legend(fontsize=7, ncol=4)
    save_figure(fig, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sizes 4 KiB, 256 MiB only")
    ap.add_argument("--examples", help="comma-separated example names (default: all)")
    ap.add_argument("--verify-max-ranks", type=int, default=128)
    args = ap.parse_args()
    files = sorted(p for p in (ROOT / "examples").glob("*.json") if p.stem != "demo")
    if args.examples:
        files = [p for p in files if p.stem in args.examples.split(",")]
    sizes = [4096, REF_SIZE] if args.quick else SIZES
    results = run(files, sizes, args.verify_max_ranks)
    OUT.mkdir(parents=True, exist_ok=True)
    dst = OUT / "planner_quality.json"
    write_json(dst, results)
    plot(results, OUT / "planner_quality.png")
    print("time / lower bound at 256 MiB (predicted; simulated equals it, checked)")
    print(table(results))
    print(f"wrote {dst} and {OUT / 'planner_quality.png'}")


if __name__ == "__main__":
    main()
