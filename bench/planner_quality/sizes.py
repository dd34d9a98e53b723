"""Size sweep: which algorithm wins at which buffer size (issue 18).

For each example topology and random members of every family of planner/families.py
(``random_family(family, seed, --family-max-ranks)``, --per-family of each), and each size
(1 B, 1 KiB, 64 KiB, 1 MiB, 16 MiB, 256 MiB, 1 GiB) it prices every algorithm, records the
best candidate, auto's pick, the flat star's and the direct exchanges' times, the
reduce-then-broadcast bound (planner/bound.py) and the bound on every all-reduce program
(planner/bound_any.py), and verifies auto's program (and every candidate's, up to
--verify-max-ranks ranks) with the independent verifier. Every candidate leaves identical
bits on all ranks (the executor adds a step's reduces in rank order), so auto chooses among
all of them. Writes bench/results/planner_sizes.json and a plot of time / any-program bound
against size per algorithm per case (the crossovers), prints the table; progress on stderr.

    python3 bench/planner_quality/sizes.py [--examples a,b] [--per-family N]
        [--family-max-ranks N] [--verify-max-ranks N] [--sizes a,b]
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
from syncplan.planner.algorithms import ALGORITHMS, Candidate  # noqa: E402
from syncplan.planner.families import FAMILIES, random_family  # noqa: E402
from syncplan.planner.plan import TIE_TOLERANCE, compare, with_routes  # noqa: E402
from syncplan.planner.routing import Router  # noqa: E402
from syncplan.planner.sizes import format_size, format_time  # noqa: E402
from syncplan.planner.topology import Topology, load_topology  # noqa: E402
from syncplan.planner.verify import verify_plan  # noqa: E402

SIZES = [1, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]
OUT = ROOT / "bench" / "results"
RIVALS = ("star", "direct", "direct-2level")  # auto must never be worse than these


def _verify(topo: Topology, ranks: list[str], size: int, cand: Candidate, router: Router) -> float:
    prog = with_routes(cand.build(), ranks, router)
    rep = verify_plan({"ranks": ranks, "size_bytes": size, "program": program_to_doc(prog)}, topo)
    if not rep.ok:
        raise SystemExit(f"{cand.algorithm} at {size} B: verifier: {rep.error}")
    return rep.simulated_time_s


Case = tuple[str, Topology, str]  # name, topology, where it came from


def cases(examples: list[Path], per_family: int, max_ranks: int) -> list[Case]:
    """The example topologies, then ``per_family`` random members of every family."""
    out: list[Case] = [(p.stem, load_topology(p), "example") for p in examples]
    for fam in FAMILIES:
        for seed in range(per_family):
            out.append(
                (
                    f"{fam}#{seed}",
                    Topology.from_dict(random_family(fam, seed, max_ranks)),
                    f"random_family({fam!r}, {seed}, {max_ranks})",
                )
            )
    return out


def run(todo: list[Case], sizes: list[int], verify_max: int) -> dict:
    results: dict = {
        "sizes": sizes,
        "algorithms": list(ALGORITHMS),
        "tie_tolerance": TIE_TOLERANCE,
        "examples": {},
    }
    t_start = time.perf_counter()
    for k, (name, topo, origin) in enumerate(todo):
        ranks = topo.endpoints()
        rows = []
        for size in sizes:
            t0 = time.perf_counter()
            comp = compare(topo, ranks, size)
            assert comp.bound_any is not None
            algos = {}
            for algo, cand in comp.candidates.items():
                sim = (
                    _verify(topo, ranks, size, cand, comp.router)
                    if len(ranks) <= verify_max
                    else None
                )
                algos[algo] = {
                    "predicted_s": cand.predicted_time_s,
                    "simulated_s": sim,
                    "identical_bits": cand.details.get("identical_bits", True),
                }
            chosen = comp.best
            if algos[chosen.algorithm]["simulated_s"] is None:
                algos[chosen.algorithm]["simulated_s"] = _verify(
                    topo, ranks, size, chosen, comp.router
                )
            best = min(comp.candidates.values(), key=lambda c: c.predicted_time_s)
            same_bits = min(
                (c for c in comp.candidates.values() if c.details.get("identical_bits", True)),
                key=lambda c: c.predicted_time_s,
            )
            row = {
                "size": size,
                "algorithms": algos,
                "infeasible": comp.infeasible,
                "best": best.algorithm,
                "best_s": best.predicted_time_s,
                "auto": chosen.algorithm,
                "auto_s": chosen.predicted_time_s,
                "auto_simulated_s": algos[chosen.algorithm]["simulated_s"],
                **{f"{r}_s": algos[r]["predicted_s"] if r in algos else None for r in RIVALS},
                "bound_rb_s": comp.bound.time_s,
                "bound_rb_family": comp.bound.family,
                "bound_any_s": comp.bound_any.time_s,
                "bound_any_method": comp.bound_any.method,
                "auto_bound_s": comp.bound_for(chosen.algorithm)[0],
                "best_identical_bits": same_bits.algorithm,
                "best_identical_bits_s": same_bits.predicted_time_s,
                "auto_over_best": chosen.predicted_time_s / best.predicted_time_s,
                "auto_over_best_identical_bits": (
                    chosen.predicted_time_s / same_bits.predicted_time_s
                ),
                "auto_over_rivals": {
                    r: chosen.predicted_time_s / algos[r]["predicted_s"]
                    for r in RIVALS
                    if r in algos
                },
                "auto_over_bound_any": chosen.predicted_time_s / comp.bound_any.time_s,
                "seconds": time.perf_counter() - t0,
            }
            rows.append(row)
            print(
                f"  [{k + 1}/{len(todo)} {time.perf_counter() - t_start:5.0f} s] "
                f"{name:26s} {format_size(size):>9s}  auto {chosen.algorithm:18s} "
                f"best {best.algorithm:18s} {row['seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        results["examples"][name] = {"ranks": len(ranks), "origin": origin, "rows": rows}
    results["seconds"] = time.perf_counter() - t_start
    return results


def table(results: dict) -> str:
    head = (
        f"{'example':24s} {'size':>8s} {'best':>14s} {'auto':>14s} {'auto':>9s} "
        f"{'/best':>6s} {'/star':>6s} {'/direct':>7s} {'rb bound':>9s} "
        f"{'any bound':>9s}"
    )
    lines = [head]
    for ex, data in results["examples"].items():
        for r in data["rows"]:
            riv = r["auto_over_rivals"]
            direct = max((riv[k] for k in ("direct", "direct-2level") if k in riv), default=None)
            lines.append(
                f"{ex:24s} {format_size(r['size']):>8s} {r['best']:>14s} {r['auto']:>14s} "
                f"{format_time(r['auto_s']):>9s} {r['auto_over_best']:6.3f} "
                f"{riv.get('star', float('nan')):6.3f} "
                f"{direct if direct is not None else float('nan'):7.3f} "
                f"{format_time(r['bound_rb_s']):>9s} {format_time(r['bound_any_s']):>9s}"
            )
    return "\n".join(lines)


def plot(results: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exs = list(results["examples"])
    names = results["algorithms"]
    cmap = plt.get_cmap("tab20")
    cols = 4
    rows_n = (len(exs) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.4 * cols, 3.4 * rows_n), squeeze=False)
    for ax, ex in zip(axes.flat, exs, strict=False):
        data = results["examples"][ex]["rows"]
        sizes = [r["size"] for r in data]
        any_b = [r["bound_any_s"] for r in data]
        ax.plot(
            sizes,
            [r["bound_rb_s"] / b for r, b in zip(data, any_b, strict=True)],
            "k--",
            lw=1,
            label="reduce-then-broadcast bound",
        )
        for k, n in enumerate(names):
            pts = [
                (s, r["algorithms"][n]["predicted_s"] / b)
                for s, r, b in zip(sizes, data, any_b, strict=True)
                if n in r["algorithms"]
            ]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker=".", lw=1, color=cmap(k), label=n)
        ax.plot(
            sizes,
            [r["auto_s"] / b for r, b in zip(data, any_b, strict=True)],
            "o",
            mfc="none",
            mec="k",
            ms=9,
            label="auto's pick",
        )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(0.5, 30)
        ax.set_title(f"{ex} ({results['examples'][ex]['ranks']} ranks)", fontsize=9)
        ax.set_xlabel("buffer size (bytes)", fontsize=8)
        ax.set_ylabel("time / any-program bound", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(exs) :]:
        ax.axis("off")
    save_figure(fig, out, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", help="comma-separated example names (default: all)")
    ap.add_argument("--sizes", help="comma-separated sizes in bytes (default: the sweep)")
    ap.add_argument("--verify-max-ranks", type=int, default=32)
    ap.add_argument(
        "--per-family",
        type=int,
        default=3,
        help="random members of every family of planner/families.py (0: none)",
    )
    ap.add_argument("--family-max-ranks", type=int, default=12)
    ap.add_argument("--out", default=str(OUT / "planner_sizes.json"))
    args = ap.parse_args()
    files = sorted((ROOT / "examples").glob("*.json"))
    if args.examples:
        files = [p for p in files if p.stem in args.examples.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    todo = cases(files, args.per_family, args.family_max_ranks)
    results = run(todo, sizes, args.verify_max_ranks)
    dst = Path(args.out)
    dst.parent.mkdir(parents=True, exist_ok=True)
    write_json(dst, results)
    plot(results, dst.with_suffix(".png"))
    print(
        "auto against the best candidate, the flat star and the slower of the two direct "
        f"exchanges (ratios; ties within {TIE_TOLERANCE:.0%} go to the fewest transfers)"
    )
    print(table(results))
    rows = [(ex, r) for ex, d in results["examples"].items() for r in d["rows"]]
    for key, label in (
        ("auto_over_best", "auto / best"),
        ("auto_over_best_identical_bits", "auto / best with identical bits"),
    ):
        ex, r = max(rows, key=lambda x: x[1][key])
        print(
            f"worst {label}: {r[key]:.4f} ({ex}, {format_size(r['size'])}: auto "
            f"{r['auto']}, best {r['best']})"
        )
    for rival in RIVALS:
        have = [(ex, r) for ex, r in rows if rival in r["auto_over_rivals"]]
        ex, r = max(have, key=lambda x: x[1]["auto_over_rivals"][rival])
        above = sum(x["auto_over_rivals"][rival] > 1 for _, x in have)
        print(
            f"worst auto / {rival}: {r['auto_over_rivals'][rival]:.4f} ({ex}, "
            f"{format_size(r['size'])}); above it in {above} of {len(have)} cases"
        )
    over = [(ex, r) for ex, r in rows if r["auto_over_best"] > 1 + TIE_TOLERANCE]
    print(
        f"cases where auto is more than {TIE_TOLERANCE:.0%} above the best: {len(over)} "
        f"of {len(rows)}; {len(results['examples'])} topologies, "
        f"{results['seconds']:.0f} s"
    )
    print(f"wrote {dst} and {dst.with_suffix('.png')}")


if __name__ == "__main__":
    main()
