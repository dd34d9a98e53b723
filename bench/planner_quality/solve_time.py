"""Solve time of the planner on 64-rank members of every topology family (issue 12).

For each member (explicit builders at 64 ranks, plus --random seeded random_family members of
up to 64 ranks per family) it times ``make_plan(..., algorithm="auto")`` and ``forest``
alone at --size, and records predicted time over the lower bound. Writes
bench/results/planner_solve_time.{json,png} (a table per family; the plot's bars are auto's
time per member, with --before's run of other code beside them, the 5 s target dotted) and
prints the table; progress goes to stderr. --replot redraws the plot from the JSON.

    flock /tmp/syncplan-bench.lock python3 bench/planner_quality/solve_time.py \\
        [--families torus,fat_tree3] [--random 2] [--size 256MiB] [--repeat 1] [--out STEM]
        [--before FILE.json] [--replot]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atomic import save_figure, write_json  # noqa: E402
from syncplan.planner import families as fam  # noqa: E402
from syncplan.planner.plan import make_plan  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import Topology  # noqa: E402

OUT = ROOT / "bench" / "results"

# 64-rank members built with explicit sizes (name -> builder)
MEMBERS = {
    "hybrid_cube_mesh": {"cube-mesh-8x8": lambda: fam.hybrid_cube_mesh(8, nics=2)},
    "full_mesh": {
        "xgmi-full-mesh-32": lambda: fam.full_mesh(32, slow_pair=(2, 5)),
        "xgmi-full-mesh-64": lambda: fam.full_mesh(64, slow_pair=(2, 5)),
    },
    "mesh2d": {
        "mesh-8x8": lambda: fam.mesh2d(8, 8),
        "mesh-4x4x4gpu": lambda: fam.mesh2d(4, 4, gpus_per_host=4, ports=True),
    },
    "torus": {
        "torus-8x8": lambda: fam.torus(8, 8),
        "torus-4x8x2gpu-degraded": lambda: fam.torus(4, 8, gpus_per_host=2, degraded=3),
    },
    "host_ring": {
        "host-ring-32x2": lambda: fam.host_ring(32),
        "host-ring-16x4-slow": lambda: fam.host_ring(16, 4, slow=3),
    },
    "fat_tree3": {
        "fat-tree3-64": lambda: fam.fat_tree3(2, 4, 4, 2),
        "fat-tree3-64-slow": lambda: fam.fat_tree3(2, 2, 4, 4, nics_per_host=2, slow_host=5),
    },
    "random_two_switch": {"two-switch-61": lambda: fam.random_two_switch(14, 24, 4)},
    "directed_cluster": {
        "directed-32x2": lambda: fam.directed_cluster(32, 2),
        "directed-16x4-slow": lambda: fam.directed_cluster(16, 4, slow=2),
    },
}


def measure(data: dict, size: int, repeat: int) -> dict:
    """Best-of-``repeat`` solve time of auto and of forest alone, and their ratio to bound."""
    topo = Topology.from_dict(data)
    ranks = topo.endpoints()
    row: dict = {"ranks": len(ranks)}
    for algo in ("auto", "forest"):
        best = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            doc = make_plan(topo, ranks, size, algorithm=algo)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        row[f"{algo}_s"] = round(best, 3)
        row[f"{algo}_ratio"] = doc["predicted_time_s"] / doc["lower_bound_time_s"]
        if algo == "auto":
            row["chosen"] = doc["algorithm"]
        else:
            row["forest_path"] = doc["details"].get("path", "hosts")
    return row


def table(res: dict) -> str:
    lines = [
        f"{'family':18s} {'member':28s} {'ranks':>5s} {'auto s':>7s} {'ratio':>6s} "
        f"{'chosen':>12s} {'forest s':>8s} {'ratio':>6s}"
    ]
    for family, rows in res["families"].items():
        for name, r in rows.items():
            lines.append(
                f"{family:18s} {name:28s} {r['ranks']:>5d} {r['auto_s']:>7.2f} "
                f"{r['auto_ratio']:>6.3f} {r['chosen']:>12s} {r['forest_s']:>8.2f} "
                f"{r['forest_ratio']:>6.3f}"
            )
    return "\n".join(lines)


TARGET_S = 5.0  # issue 12: any 64-rank member of these families


def plot(res: dict, before: dict | None, path: Path) -> None:
    """Horizontal bars: auto's solve time per member (and ``before``'s, where given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        (
            f"{family}: {name} ({r['ranks']})",
            r["auto_s"],
            ((before or {}).get("families", {}).get(family, {}).get(name) or {}).get("auto_s"),
        )
        for family, members in res["families"].items()
        for name, r in members.items()
    ]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    ys = range(len(rows))
    if before is not None:
        ax.barh(
            [y + 0.2 for y in ys],
            [b or 0 for _, _, b in rows],
            0.4,
            color="#bbbbbb",
            label=before.get("label", "before"),
        )
    ax.barh(
        [y - (0.2 if before is not None else 0) for y in ys],
        [a for _, a, _ in rows],
        0.4 if before is not None else 0.7,
        color="#3b75af",
        label=res.get("label", "auto"),
    )
    ax.axvline(TARGET_S, color="gray", ls=":", lw=1)
    ax.set_yticks(list(ys), [name for name, _, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("auto solve time (s, best of --repeat; this machine)")
    ax.set_title(
        f"planner solve time at {res['size_bytes'] >> 20} MiB (dotted: {TARGET_S:g} s)", fontsize=10
    )
    ax.legend(fontsize=8, loc="lower right")
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(fam.FAMILIES))
    ap.add_argument("--random", type=int, default=1, help="random members of <= 64 ranks")
    ap.add_argument("--size", default="256MiB")
    ap.add_argument("--repeat", type=int, default=1, help="timings per member (min kept)")
    ap.add_argument("--no-builders", action="store_true", help="random members only")
    ap.add_argument("--out", default="planner_solve_time", help="results file stem")
    ap.add_argument("--before", type=Path, help="another run's JSON, drawn beside this one")
    ap.add_argument("--label", default="this code", help="this run's name in the plot")
    ap.add_argument("--replot", action="store_true", help="only redraw the plot from --out")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    dst = OUT / f"{args.out}.json"
    before = None
    if args.before is not None:
        try:
            before = json.loads(args.before.read_text())
        except (OSError, ValueError) as exc:
            sys.exit(f"solve_time: cannot read --before {args.before}: {exc}")
    if args.replot:
        try:
            res = json.loads(dst.read_text())
        except (OSError, ValueError) as exc:
            sys.exit(f"solve_time: cannot read {dst}: {exc}")
        plot(res, before, dst.with_suffix(".png"))
        print(f"wrote {dst.with_suffix('.png')}")
        return
    size = parse_size(args.size)
    fams = [f.strip() for f in args.families.split(",") if f.strip()]
    res: dict = {"size_bytes": size, "repeat": args.repeat, "label": args.label, "families": {}}
    for family in fams:
        members = {} if args.no_builders else dict(MEMBERS.get(family, {}))
        for seed in range(args.random):
            members[f"random-{seed}"] = lambda s=seed, f=family: fam.random_family(
                f, s, max_ranks=64
            )
        rows = res["families"].setdefault(family, {})
        for name, make in members.items():
            row = measure(make(), size, args.repeat)
            rows[name] = row
            print(
                f"  {family:18s} {name:26s} {row['ranks']:3d} ranks: auto "
                f"{row['auto_s']:6.2f} s ({row['auto_ratio']:.3f}), forest "
                f"{row['forest_s']:6.2f} s ({row['forest_ratio']:.3f})",
                file=sys.stderr,
                flush=True,
            )
            write_json(dst, res)
    plot(res, before, dst.with_suffix(".png"))
    print(f"solve time (s) and predicted / lower bound at {args.size}")
    print(table(res))
    print(f"wrote {dst} and {dst.with_suffix('.png')}")


if __name__ == "__main__":
    main()
