"""Whether a planner change moved any plan: `auto`'s pick, predicted time, bound and plan_id
at one size (256 MiB unless --size) on fixed member sets, written as JSON by one checkout
and compared with another's.

    python3 bench/planner_quality/plan_diff.py run OUT.json [--sets ex,big,rand64,rand]
        [--checkout DIR] [--size 1KiB]
    python3 bench/planner_quality/plan_diff.py diff BEFORE.json AFTER.json

``--checkout`` plans with another checkout's planner (e.g. a `git worktree` of the commit
before the change); the member sets are built by that checkout too.

Sets: ex (every example up to 64 ranks), big (members of 32-64 ranks), rand64 / rand (two or
three seeded random members per family of up to 64 / 32 ranks). A speed-only change must
leave every row equal; `diff` prints the rows that differ and the summed solve times, and
exits 1 where any plan, predicted time or bound moved.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETS = ("ex", "big", "rand64", "rand")


def member_sets(root: Path) -> dict[str, dict[str, Callable[[], dict]]]:
    """Builders of every member, by set (planner modules from ``root``'s checkout)."""
    from syncplan.planner import families as fam
    from syncplan.planner.builders import dgx_cluster

    examples = {
        p.stem: (lambda p=p: json.loads(p.read_text()))
        for p in sorted((root / "examples").glob("*.json"))
    }
    big = {
        "fat-tree3-64-slow": lambda: fam.fat_tree3(2, 2, 4, 4, nics_per_host=2, slow_host=5),
        "torus-4x8x2gpu-degraded": lambda: fam.torus(4, 8, gpus_per_host=2, degraded=3),
        "random-torus-64": lambda: fam.random_family("torus", 0, 64),
        "two-switch-61": lambda: fam.random_two_switch(14, 24, 4),
        "directed-32x2": lambda: fam.directed_cluster(32, 2),
        "xgmi-full-mesh-32": lambda: fam.full_mesh(32, slow_pair=(2, 5)),
        "xgmi-full-mesh-64": lambda: fam.full_mesh(64, slow_pair=(2, 5)),
        "rail-64": lambda: dgx_cluster(8, nics_per_host=8, nic_GBps=25.0, slow={3: 12.5}),
    }
    rand64 = {
        f"{f}-{s}": (lambda f=f, s=s: fam.random_family(f, s, 64))
        for f in fam.FAMILIES
        for s in range(2)
    }
    rand = {
        f"{f}-{s}": (lambda f=f, s=s: fam.random_family(f, s, 32))
        for f in fam.FAMILIES
        for s in range(3)
    }
    return {"ex": examples, "big": big, "rand64": rand64, "rand": rand}


def run(out_path: str, sets: list[str], root: Path, size: int) -> None:
    """Plan every member of ``sets`` (``root``'s planner, first on sys.path) to OUT.json."""
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import Topology

    table = member_sets(root)
    out: dict[str, dict] = {}
    for name in sets:
        for member, make in table[name].items():
            topo = Topology.from_dict(make())
            ranks = topo.endpoints()
            if len(ranks) > 64:
                continue
            t0 = time.perf_counter()
            doc = make_plan(topo, ranks, size)
            row = {
                "algorithm": doc["algorithm"],
                "plan_id": doc["plan_id"],
                "predicted_time_s": float(doc["predicted_time_s"]),
                "lower_bound_time_s": float(doc["lower_bound_time_s"]),
                "solve_s": round(time.perf_counter() - t0, 2),
            }
            out[f"{name}/{member}"] = row
            print(f"{name}/{member}: {row}", file=sys.stderr, flush=True)
    Path(out_path).write_text(json.dumps(out, indent=1))


def diff(before_path: str, after_path: str) -> int:
    before, after = (json.loads(Path(p).read_text()) for p in (before_path, after_path))
    moved = 0
    for key in sorted(before.keys() & after.keys()):
        a, b = before[key], after[key]
        same = all(
            a[k] == b[k] for k in ("algorithm", "plan_id", "predicted_time_s", "lower_bound_time_s")
        )
        if not same:
            moved += 1
            ra = a["predicted_time_s"] / a["lower_bound_time_s"]
            rb = b["predicted_time_s"] / b["lower_bound_time_s"]
            print(
                f"{key}: {a['algorithm']} {ra:.5f} -> {b['algorithm']} {rb:.5f} "
                f"(bound x{b['lower_bound_time_s'] / a['lower_bound_time_s']:.5f})"
            )
    solve_a = sum(before[k]["solve_s"] for k in before.keys() & after.keys())
    solve_b = sum(after[k]["solve_s"] for k in before.keys() & after.keys())
    only = sorted(before.keys() ^ after.keys())
    print(
        f"{len(before.keys() & after.keys())} members, {moved} moved"
        + (f", {len(only)} in one file only" if only else "")
        + f"; solve {solve_a:.1f} s -> {solve_b:.1f} s"
    )
    return 1 if moved else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="plan every member and write OUT.json")
    r.add_argument("out")
    r.add_argument("--sets", default=",".join(SETS))
    r.add_argument("--checkout", default=str(ROOT), help="the checkout whose planner runs")
    r.add_argument("--size", default="256MiB", help="buffer size (default 256MiB)")
    d = sub.add_parser("diff", help="compare two files written by run")
    d.add_argument("before")
    d.add_argument("after")
    args = ap.parse_args()
    if args.cmd == "run":
        sets = [s.strip() for s in args.sets.split(",") if s.strip()]
        unknown = sorted(set(sets) - set(SETS))
        if unknown:
            ap.error(f"unknown set(s) {', '.join(unknown)}; choose from {', '.join(SETS)}")
        root = Path(args.checkout).resolve()
        if not (root / "planner" / "plan.py").is_file():
            ap.error(f"--checkout {root}: no planner/plan.py there")
        sys.path.insert(0, str(root))
        from syncplan.core.errors import RequestError
        from syncplan.planner.sizes import parse_size

        try:
            size = parse_size(args.size)
        except (RequestError, ValueError) as exc:
            ap.error(f"--size: {exc}")
        run(args.out, sets, root, size)
        return 0
    try:
        return diff(args.before, args.after)
    except (OSError, ValueError, KeyError) as exc:  # missing, not JSON, or not run's rows
        print(f"plan_diff: cannot compare {args.before} and {args.after}: {exc!r}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
