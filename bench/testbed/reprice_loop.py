"""Re-plan a testbed loop's programs from its recorded graph and settings, and split each
one's predicted time into the cost model's terms, next to what it measured.

    python3 bench/testbed/reprice_loop.py bench/results/testbed-small-one-slow.json \
        [--algorithms forest,ring,halving-doubling] [--sizes 65536,1048576]

Per (algorithm, size): the measured median (the run's, else the calibration's), the plan's
prediction, and its parts: wire and message overhead (``syncplan.planner.cost.overlapped`` over the
steps), the exchange term (``x`` x exchanged ends) and the switch term (``s`` x switched
wire). Plans are rebuilt with ``make_plan`` under the loop's fitted settings, so they are
the service's plans (the rebuilt prediction is printed beside the recorded one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from syncplan.core.options import PlanOptions
from syncplan.planner.cost import overlapped
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import step_exchange_ends, step_features, step_switch_wires


def measured(result: dict, alg: str, size: int) -> tuple[float | None, float | None]:
    """(measured median, recorded prediction) of ``alg`` at ``size``: the run's, else the
    calibration's (no prediction recorded there)."""
    for r in result.get("results", []):
        if r["algorithm"] == alg and r["size_bytes"] == size and r.get("times_s"):
            return statistics.median(r["times_s"]), r.get("predicted_time_s")
    for p in result["loop"]["calibration"]["programs"]:
        if p["label"] == alg and p["size_bytes"] == size:
            return statistics.median(p["times_s"]), None
    return None, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--algorithms", default="forest,ring,halving-doubling,star")
    ap.add_argument("--sizes", default="4096,65536,1048576")
    args = ap.parse_args(argv)
    print("| run | algorithm | size | measured | predicted | wire + o | x term | s term |")
    print("|---|---|---|---|---|---|---|---|")
    for path in args.results:
        res = json.loads(path.read_text())
        loop = res["loop"]
        topo = Topology.from_dict(loop["graph"])
        ranks = sorted(topo.endpoints())
        m, o = loop["min_step_us"] * 1e-6, loop["message_overhead_us"] * 1e-6
        x, s = loop.get("exchange_overhead_us", 0.0) * 1e-6, loop.get("switch_overhead", 0.0)
        cores = loop.get("message_cores") or None
        for alg in args.algorithms.split(","):
            for size in (int(v) for v in args.sizes.split(",")):
                got, recorded = measured(res, alg, size)
                if got is None:
                    continue
                plan = make_plan(
                    topo,
                    ranks,
                    size,
                    alg,
                    options=PlanOptions(
                        min_step_s=m,
                        message_overhead_s=o,
                        message_cores=cores,
                        exchange_overhead_s=x,
                        switch_overhead=s,
                    ),
                )
                feats = step_features(plan, topo, message_cores=cores)
                base = sum(overlapped(max(w, m), e, o) for w, e in feats)
                xt = x * sum(step_exchange_ends(plan, topo, message_cores=cores))
                st = s * sum(step_switch_wires(plan, topo))
                pred = plan["predicted_time_s"]
                note = "" if recorded is None or abs(recorded - pred) <= 1e-9 * pred else " *"
                print(
                    f"| {path.stem} | {alg} | {size} | {got * 1e3:.1f} ms | "
                    f"{pred * 1e3:.1f} ms{note} | {base * 1e3:.1f} | {xt * 1e3:.1f} | "
                    f"{st * 1e3:.1f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
