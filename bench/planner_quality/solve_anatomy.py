"""Where `forest` spends a plan's time on random family members (issue 12's solve time).

For --count seeded random_family members of up to --max-ranks ranks per family it times
``make_plan(..., algorithm="forest")`` at --size and, inside ``forest_any``, its stages: the
one-piece step-priced LPs (``price_windows``), the pieced step-priced LPs
(``price_pieced``) and the per-piece mixes (``mixed_program``, which run beside the pieced LPs),
and records which program won. A study, not a planner path: it wraps the stage functions to
time them and changes nothing they compute. Writes bench/results/<out>.{json,png} (per
family: seconds in each stage, the pieced LPs split by whether a pieced program won) and
prints a table; progress goes to stderr.

    flock /tmp/syncplan-bench.lock python3 bench/planner_quality/solve_anatomy.py \\
        [--families torus,mesh2d] [--count 16] [--max-ranks 16] [--size 256MiB]
        [--out planner_solve_anatomy]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atomic import save_figure, write_json  # noqa: E402
from syncplan.planner import families as fam  # noqa: E402
from syncplan.planner.algorithms.forest import general as forest_any  # noqa: E402
from syncplan.planner.plan import make_plan  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import Topology  # noqa: E402

OUT = ROOT / "bench" / "results"
STAGES = {"windows": "price_windows", "pieced": "price_pieced", "mixed": "mixed_program"}


def instrument(spent: dict[str, float]) -> Callable[[], None]:
    """Wrap forest_any's stage functions so each adds its seconds to ``spent``; returns the
    function that puts the originals back."""
    originals = {attr: getattr(forest_any, attr) for attr in STAGES.values()}
    for name, attr in STAGES.items():
        inner = originals[attr]

        @functools.wraps(inner)
        def timed(*args, _inner=inner, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - start

        setattr(forest_any, attr, timed)

    def restore() -> None:
        for attr, inner in originals.items():
            setattr(forest_any, attr, inner)

    return restore


def measure(data: dict, size: int, spent: dict[str, float]) -> dict:
    """One member: total seconds, seconds per stage, the winner and its ratio to the bound."""
    topo = Topology.from_dict(data)
    spent.clear()
    start = time.perf_counter()
    doc = make_plan(topo, topo.endpoints(), size, algorithm="forest")
    label = doc["details"].get("packing") or doc["details"].get("path") or "hosts"
    return {
        "ranks": len(topo.endpoints()),
        "total_s": round(time.perf_counter() - start, 3),
        **{f"{k}_s": round(spent.get(k, 0.0), 3) for k in STAGES},
        "winner": label,
        "pieced_won": "pieces" in label,
        "ratio": doc["predicted_time_s"] / doc["lower_bound_time_s"],
    }


def summary(rows: list[dict]) -> dict:
    """A family's totals: plan seconds, and seconds per stage."""
    won = sum(r["pieced_s"] for r in rows if r["pieced_won"])
    lost = sum(r["pieced_s"] for r in rows if not r["pieced_won"])
    return {
        "members": len(rows),
        "total_s": round(sum(r["total_s"] for r in rows), 2),
        "median_s": round(statistics.median(r["total_s"] for r in rows), 2),
        "max_s": round(max(r["total_s"] for r in rows), 2),
        "over_5s": sum(r["total_s"] > 5 for r in rows),
        "windows_s": round(sum(r["windows_s"] for r in rows), 2),
        "pieced_won_s": round(won, 2),
        "pieced_lost_s": round(lost, 2),
        "mixed_s": round(sum(r["mixed_s"] for r in rows), 2),
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["families"])
    parts = [
        ("windows_s", "one-piece step-priced LPs"),
        ("pieced_won_s", "pieced LPs (a pieced program won)"),
        ("pieced_lost_s", "pieced LPs (another program won)"),
    ]
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.5))
    left = [0.0] * len(names)
    for key, label in parts:
        vals = [result["families"][n]["summary"][key] for n in names]
        ax.barh(names, vals, left=left, label=label)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    totals = [result["families"][n]["summary"]["total_s"] for n in names]
    ax.scatter(totals, names, marker="|", s=200, color="black", label="whole plans")
    ax.set_xlabel(
        f"seconds over {result['count']} members of <= {result['max_ranks']} ranks "
        "(mixes run beside the pieced LPs: not stacked)"
    )
    ax.set_title(f"where forest's plan time goes at {result['size_bytes'] >> 20} MiB")
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(fam.FAMILIES))
    ap.add_argument("--count", type=int, default=16, help="random members per family")
    ap.add_argument("--max-ranks", type=int, default=16)
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--out", default="planner_solve_anatomy", help="results file stem")
    args = ap.parse_args()
    size = parse_size(args.size)
    names = [f for f in args.families.split(",") if f]
    unknown = [f for f in names if f not in fam.FAMILIES]
    if unknown:
        ap.error(f"unknown families {', '.join(unknown)}; choose from {', '.join(fam.FAMILIES)}")
    if args.count < 1 or args.max_ranks < 6:
        ap.error("--count must be >= 1 and --max-ranks >= 6")
    spent: dict[str, float] = {}
    instrument(spent)
    result = {"size_bytes": size, "count": args.count, "max_ranks": args.max_ranks, "families": {}}
    for family in names:
        rows = []
        for seed in range(args.count):
            row = {
                "seed": seed,
                **measure(fam.random_family(family, seed, args.max_ranks), size, spent),
            }
            rows.append(row)
            print(
                f"  {family:18s} seed {seed:3d} {row['ranks']:3d} ranks: {row['total_s']:6.2f} s"
                f" (windows {row['windows_s']:.2f}, pieced {row['pieced_s']:.2f}, mixed "
                f"{row['mixed_s']:.2f}) {row['ratio']:.4f} {row['winner']}",
                file=sys.stderr,
                flush=True,
            )
        result["families"][family] = {"summary": summary(rows), "rows": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    dst = OUT / f"{args.out}.json"
    write_json(dst, result)
    plot(result, OUT / f"{args.out}.png")
    head = (
        "family",
        "total s",
        "median",
        "max",
        ">5 s",
        "windows",
        "pieced won",
        "pieced lost",
        "mixed",
    )
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for family, block in result["families"].items():
        s = block["summary"]
        print(
            f"| {family} | {s['total_s']} | {s['median_s']} | {s['max_s']} | {s['over_5s']} | "
            f"{s['windows_s']} | {s['pieced_won_s']} | {s['pieced_lost_s']} | {s['mixed_s']} |"
        )
    print(f"wrote {OUT / (args.out + '.json')} and {OUT / (args.out + '.png')}")


if __name__ == "__main__":
    main()
