"""``syncplan plan --collective broadcast|reduce``: every algorithm's time against the bound."""

from __future__ import annotations

import argparse
from typing import Any

from syncplan.core.options import PlanOptions
from syncplan.planner.cli_output import Output, print_chosen_and_write, table


def plan_rooted(
    args: argparse.Namespace, topo: Any, ranks: list[str], size: int, options: PlanOptions
) -> int:
    """Plan a broadcast or reduce from ``args.root``; print the table and write ``-o``."""
    from syncplan.planner.plan import make_plan
    from syncplan.planner.sizes import format_size, format_time

    output = Output(args.output) if args.output else None  # checked before planning
    try:
        doc = make_plan(
            topo, ranks, size, args.algorithm, args.collective, options=options, root=args.root
        )
        bound = doc["lower_bound_time_s"]
        rows = [
            [name, format_time(t), f"{(t / bound - 1) * 100:.1f}%" if bound > 0 else "-"]
            for name, t in sorted(doc["candidates"].items(), key=lambda kv: kv[1])
        ]
        if not args.compare:
            rows = [r for r in rows if r[0] == doc["algorithm"]]
        rows += [[name, "infeasible", "-"] for name in doc["infeasible"]]
        root = doc["root"]
        print(
            f"{args.collective} of {format_size(size)} over {len(ranks)} ranks "
            f"({len(topo.hosts(ranks))} hosts) from root {root} ({ranks[root]})"
        )
        print(table(rows, ["algorithm", "predicted", "vs bound"]))
        for name, why in doc["infeasible"].items():
            print(f"{name} is infeasible: {why}")
        print(
            f"lower bound: {format_time(bound)} ({doc['lower_bound_family']}; "
            f"{doc['lower_bound_method']})"
        )
        fluid = doc["details"].get("fluid_time_s")
        if fluid and doc["lower_bound_bandwidth_s"] > 0:
            print(
                f"bandwidth: the bound's {format_time(doc['lower_bound_bandwidth_s'])}, the "
                f"packing's fluid optimum {format_time(fluid)}; the rest is latency and fill"
            )
        print_chosen_and_write(doc, output, args.slice)
    finally:
        if output is not None:
            output.close()
    return 0
