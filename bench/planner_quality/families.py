"""Plan quality on the topology families of issue 12: auto and forest over the lower bound.

For every family (planner.families.FAMILIES) it builds --count seeded random members
(random_family(family, seed, --max-ranks)), prices every algorithm at --size on all ranks and
records predicted time / lower bound for ``auto`` (the best candidate) and ``forest``; then
the same for every family example (planner.families.FAMILY_EXAMPLES). The chosen program is
built and checked by the verifier up to --verify-max-ranks ranks. Writes
bench/results/planner_families.json and .png and prints median / worst per family.

    flock /tmp/syncplan-bench.lock python3 bench/planner_quality/families.py \\
        [--families torus,mesh2d] [--count 64] [--size 256MiB] [--max-ranks 16] [--merge]

With --merge one family per run (each under its own lock) builds up one results file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atomic import save_figure, write_json  # noqa: E402
from syncplan.core.program import program_to_doc  # noqa: E402
from syncplan.planner.families import FAMILIES, FAMILY_EXAMPLES, random_family  # noqa: E402
from syncplan.planner.plan import compare, with_routes  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import Topology  # noqa: E402
from syncplan.planner.verify import verify_plan  # noqa: E402

OUT = ROOT / "bench" / "results"


def measure(data: dict, size: int, verify_max: int) -> dict:
    """auto and forest over the bound for one topology, all endpoints as ranks."""
    topo = Topology.from_dict(data)
    ranks = topo.endpoints()
    t0 = time.perf_counter()
    comp = compare(topo, ranks, size)
    solve = time.perf_counter() - t0
    best, bound = comp.best, comp.bound.time_s
    forest = comp.candidates.get("forest")
    row = {
        "ranks": len(ranks),
        "bound_s": bound,
        "bound_method": comp.bound.method,
        "auto_s": best.predicted_time_s,
        "chosen": best.algorithm,
        "auto_ratio": best.predicted_time_s / bound,
        "forest_s": forest.predicted_time_s if forest else None,
        "forest_ratio": forest.predicted_time_s / bound if forest else None,
        "candidates": {k: c.predicted_time_s / bound for k, c in comp.candidates.items()},
        "infeasible": comp.infeasible,
        "solve_s": solve,
        "verified": False,
    }
    if len(ranks) <= verify_max:
        program = with_routes(best.build(), ranks, comp.router)
        rep = verify_plan(
            {"ranks": ranks, "size_bytes": size, "program": program_to_doc(program)}, topo
        )
        if not rep.ok:
            raise SystemExit(f"verifier rejected {best.algorithm}: {rep.error}")
        row["verified"] = True
    return row


def summary(rows: list[dict]) -> dict:
    out = {"count": len(rows)}
    for key in ("auto_ratio", "forest_ratio"):
        vals = [r[key] for r in rows if r[key] is not None]
        if vals:
            out[key] = {
                "median": statistics.median(vals),
                "worst": max(vals),
                "within_3pct": sum(v <= 1.03 for v in vals) / len(vals),
            }
    return out


def save(res: dict, stem: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    dst = OUT / f"{stem}.json"
    write_json(dst, res)
    return dst


def previous(stem: str, size: int, max_ranks: int) -> dict | None:
    """The results file of an earlier run with the same size and rank limit, if any."""
    try:
        old = json.loads((OUT / f"{stem}.json").read_text())
    except (OSError, ValueError):
        return None
    same = old.get("size_bytes") == size and old.get("max_ranks") == max_ranks
    return old if same else None


def run(
    families: list[str],
    count: int,
    size: int,
    max_ranks: int,
    verify_max: int,
    examples: bool,
    stem: str,
    merge: bool = False,
) -> dict:
    """Measure; the JSON is rewritten after every family so a cut run keeps its part. With
    ``merge`` the families and examples of an earlier run (same size and rank limit) stay."""
    res: dict = (merge and previous(stem, size, max_ranks)) or {
        "size_bytes": size,
        "max_ranks": max_ranks,
        "families": {},
        "examples": {},
    }
    res["count"] = count
    for fam in families:
        rows = []
        t0 = time.perf_counter()
        for seed in range(count):
            row = measure(random_family(fam, seed, max_ranks), size, verify_max)
            rows.append({"seed": seed, **row})
        res["families"][fam] = {"summary": summary(rows), "rows": rows}
        s = res["families"][fam]["summary"]
        print(
            f"  {fam:18s} {count} topologies in {time.perf_counter() - t0:.0f} s: "
            f"auto median {s['auto_ratio']['median']:.3f} worst {s['auto_ratio']['worst']:.3f}",
            file=sys.stderr,
            flush=True,
        )
        save(res, stem)
    if examples:
        for name, make in FAMILY_EXAMPLES.items():
            res["examples"][name] = measure(make(), size, verify_max)
    return res


def table(res: dict) -> str:
    lines = [
        f"{'family':18s} {'n':>3s} {'auto med':>9s} {'auto worst':>10s} {'<=3%':>5s} "
        f"{'forest med':>10s} {'forest worst':>12s}"
    ]
    for fam, data in res["families"].items():
        s = data["summary"]
        a, f = s["auto_ratio"], s.get("forest_ratio")
        lines.append(
            f"{fam:18s} {s['count']:>3d} {a['median']:>9.3f} {a['worst']:>10.3f} "
            f"{a['within_3pct']:>5.0%} "
            + (f"{f['median']:>10.3f} {f['worst']:>12.3f}" if f else "")
        )
    if res["examples"]:
        lines.append("")
        lines.append(f"{'example':28s} {'ranks':>5s} {'auto':>7s} {'chosen':>13s} {'forest':>7s}")
        for name, r in res["examples"].items():
            forest = f"{r['forest_ratio']:.3f}" if r["forest_ratio"] else "-"
            lines.append(
                f"{name:28s} {r['ranks']:>5d} {r['auto_ratio']:>7.3f} "
                f"{r['chosen']:>13s} {forest:>7s}"
            )
    return "\n".join(lines)


def plot(res: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = list(res["families"])
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(12, 8.5))
    for i, fam in enumerate(fams):
        rows = res["families"][fam]["rows"]
        for k, (key, color) in enumerate((("auto_ratio", "C0"), ("forest_ratio", "C1"))):
            vals = [r[key] for r in rows if r[key] is not None]
            xs = [i + (k - 0.5) * 0.35 + 0.1 * ((j * 7919) % 11 - 5) / 5 for j in range(len(vals))]
            ax.scatter(
                xs,
                vals,
                s=8,
                color=color,
                alpha=0.5,
                label=("auto" if k == 0 else "forest") if i == 0 else None,
            )
            if vals:
                ax.plot(
                    [i + (k - 0.5) * 0.35 - 0.15, i + (k - 0.5) * 0.35 + 0.15],
                    [statistics.median(vals)] * 2,
                    color="k",
                    lw=2,
                )
    ax.axhline(1.03, color="gray", ls=":", lw=1)
    ax.set_xticks(range(len(fams)), fams, rotation=15, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("predicted / lower bound")
    counts = "/".join(
        str(c) for c in sorted({d["summary"]["count"] for d in res["families"].values()})
    )
    ax.set_title(
        f"{counts} random members per family at {res['size_bytes'] >> 20} MiB "
        "(bars: median; dotted: 1.03)",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    names = list(res["examples"])
    if names:
        vals = [res["examples"][n]["auto_ratio"] for n in names]
        fvals = [res["examples"][n]["forest_ratio"] or 0 for n in names]
        bx.bar([k - 0.2 for k in range(len(names))], vals, 0.4, label="auto")
        bx.bar([k + 0.2 for k in range(len(names))], fvals, 0.4, label="forest")
        bx.axhline(1.03, color="gray", ls=":", lw=1)
        bx.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
        bx.set_ylabel("predicted / lower bound")
        bx.set_title("family examples (examples/)", fontsize=10)
        bx.legend(fontsize=8)
    else:
        bx.axis("off")
    save_figure(fig, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--families", default=",".join(FAMILIES), help="comma-separated families (default: all)"
    )
    ap.add_argument("--count", type=int, default=64, help="random members per family")
    ap.add_argument("--size", default="256MiB", help="buffer size (e.g. 256MiB, 1048576)")
    ap.add_argument("--max-ranks", type=int, default=16)
    ap.add_argument("--verify-max-ranks", type=int, default=64)
    ap.add_argument("--no-examples", action="store_true", help="skip FAMILY_EXAMPLES")
    ap.add_argument("--out", default="planner_families", help="results file stem")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="keep the other families and examples of the results file",
    )
    args = ap.parse_args()
    fams = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in fams if f not in FAMILIES]
    if unknown or args.count < 1 or args.max_ranks < 8:
        raise SystemExit(
            f"error: unknown families {unknown} (choose from {', '.join(FAMILIES)})"
            if unknown
            else "error: --count must be >= 1 and --max-ranks >= 8"
        )
    try:
        size = parse_size(args.size)
    except ValueError as exc:
        raise SystemExit(f"error: --size: {exc}") from None
    res = run(
        fams,
        args.count,
        size,
        args.max_ranks,
        args.verify_max_ranks,
        not args.no_examples,
        args.out,
        args.merge,
    )
    dst = save(res, args.out)
    plot(res, OUT / f"{args.out}.png")
    print(f"predicted / lower bound at {args.size} (auto = best candidate)")
    print(table(res))
    print(f"wrote {dst} and {OUT / f'{args.out}.png'}")


if __name__ == "__main__":
    main()
