"""``syncplan verify``: check a plan document by simulating it on a topology."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from syncplan.core.errors import RequestError
from syncplan.core.options import PlanOptions
from syncplan.planner.cli_output import load_json


def topology_note(plan: Any, topo: Any, path: str) -> str | None:
    """Why ``plan`` was not made for the topology at ``path``, or None when it was (or the
    document cannot tell)."""
    if not isinstance(plan, dict):
        return None
    made_for = plan.get("topology_fingerprint")
    if isinstance(made_for, str):
        here = topo.fingerprint()
        if made_for != here:
            return (
                f"plan {plan.get('plan_id', '?')} was made for another topology "
                f"(fingerprint {made_for}; {path}: {here})"
            )
        return None
    from syncplan.planner.plan import plan_id

    try:
        same = plan_id(topo, plan) == plan.get("plan_id")
    except (KeyError, TypeError, ValueError):
        return None
    if "plan_id" in plan and not same:
        return (
            f"plan_id {plan['plan_id']} does not match {path} and the plan's request: "
            "it was made for another topology, or edited"
        )
    return None


def cmd_verify(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import format_time
    from syncplan.planner.topology import load_topology
    from syncplan.planner.verify import verify_plan

    plan = load_json(args.plan, "plan")
    if isinstance(plan, dict) and "slice" in plan:
        raise RequestError(
            f"{args.plan} is a plan slice: a slice cannot be verified alone; verify the full plan"
        )
    topo = load_topology(args.topology)
    note = topology_note(plan, topo, args.topology)
    if note:
        print(f"warning: {note}", file=sys.stderr)
    # the simulated time under the cost-model settings the plan was priced with
    report = verify_plan(plan, topo, options=PlanOptions.recorded_in(plan))
    if not report.ok:
        print(f"INCORRECT: {report.error}", file=sys.stderr)
        return 1
    assert report.simulated_time_s is not None  # a correct plan is simulated
    what = {
        "reducescatter": "every rank's shard holds every input exactly once",
        "allgather": "every rank ends with every owner's shard",
    }.get(plan.get("collective"), "every rank ends with every input exactly once")
    print(
        f"correct: {what} ({report.steps} steps, "
        f"{report.transfers} transfers); simulated time {format_time(report.simulated_time_s)}"
        + (" (on a different topology than the plan's)" if note else "")
    )
    return 0
