"""Fit the cost model's per-step floor ``m`` (min_step_s) and per-message overhead ``o``
(message_overhead_s, shared by ``--cores`` CPU cores) to measured testbed runs.

Each timed plan of a loop result (``python3 -m syncplan testbed loop``) is rebuilt on the
graph the service planned from (the result's ``loop.graph``; same algorithm, size and step
floor), and its steps are priced as ``sum(max(wire_s, m) + o * ends_s)``: ``wire_s`` the
pure alpha-beta time of step s, ``ends_s = max(busiest rank's sends + receives, all the
step's message ends / cores)``. ``m`` and ``o`` minimise the squared log error of prediction
against the measured median over every plan at or below ``--max-size``.

    PYTHONPATH=. python3 bench/testbed/fit_message_overhead.py \\
        bench/results/testbed-small-*.json --cores 2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from syncplan.core.options import PlanOptions
from syncplan.planner.algorithms import ALGORITHMS
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.cost import CostModel
from syncplan.planner.plan import with_routes
from syncplan.planner.topology import Topology

from syncplan.testbed.calibrate import Point, fit_settings


def step_features(
    graph: dict, size: int, algorithm: str, min_step_s: float, cores: int
) -> list[tuple[float, float]]:
    """(wire time, charged message ends) of every step of ``algorithm``'s program."""
    topo = Topology.from_dict(graph)
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, size, options=PlanOptions(min_step_s=min_step_s))
    prog = with_routes(ALGORITHMS[algorithm](ctx).build(), ranks, ctx.router)
    wire = CostModel(ctx.router)
    ends = CostModel(ctx.router, options=PlanOptions(message_overhead_s=1.0, message_cores=cores))
    bpu = size / prog.units
    return [(wire.step_time(ranks, s, bpu), ends.step_overhead(s)) for s in prog.steps if s]


def predict(feats: list[tuple[float, float]], m: float, o: float) -> float:
    return sum(max(w, m) + o * e for w, e in feats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--max-size", type=int, default=1 << 20)
    ap.add_argument("--out", type=Path, help="write the fit and its points here (JSON)")
    args = ap.parse_args()
    points = []
    for path in args.results:
        doc = json.loads(path.read_text())
        loop = doc.get("loop") or {}
        if "graph" not in loop:
            continue
        min_step_s = loop.get("min_step_us", 0.0) * 1e-6
        seen = set()
        for r in doc["results"]:
            alg, size = r.get("plan_algorithm"), r["size_bytes"]
            if alg is None or size > args.max_size or (alg, size) in seen:
                continue
            seen.add((alg, size))
            feats = step_features(loop["graph"], size, alg, min_step_s, args.cores)
            points.append(
                {
                    "file": path.name,
                    "scenario": doc.get("scenario", {}).get("name"),
                    "algorithm": alg,
                    "size_bytes": size,
                    "measured_s": r["median_s"],
                    "times_s": r.get("times_s") or [r["median_s"]],
                    "steps": len(feats),
                    "feats": feats,
                }
            )
    fit = fit_settings(
        [
            Point(p["file"], p["algorithm"], p["size_bytes"], p["times_s"], p["feats"])
            for p in points
        ]
    )
    if not fit["usable"]:
        raise SystemExit(f"no fit: {fit['reason']}")
    m, o = fit["min_step_us"] * 1e-6, fit["message_overhead_us"] * 1e-6
    print(
        f"{len(points)} plans; fit: min_step {m * 1e6:.0f} us, message overhead "
        f"{o * 1e6:.0f} us over {args.cores} cores (bootstrap 5-50-95 %: "
        f"{fit['bootstrap']['message_overhead_us_5_50_95']} us)"
    )
    for p in points:
        pred = predict(p["feats"], m, o)
        p["predicted_s"] = pred
        print(
            f"  {p['file']:32s} {p['algorithm']:14s} {p['size_bytes']:>8d} B  measured "
            f"{p['measured_s'] * 1e3:7.2f} ms  fitted {pred * 1e3:7.2f} ms  "
            f"({pred / p['measured_s']:.2f})"
        )
    if args.out:
        for p in points:
            del p["feats"]
        args.out.write_text(
            json.dumps(
                {
                    "min_step_us": m * 1e6,
                    "message_overhead_us": o * 1e6,
                    "cores": args.cores,
                    "fit": fit,
                    "points": points,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
