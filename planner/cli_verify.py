"""``syncplan verify``: check a plan document by simulating it on a topology."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from syncplan.core.compact import COMPACT_KEY
from syncplan.core.errors import CLIError
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


def not_a_plan(doc: Any, path: str) -> str | None:
    """Why the document at ``path`` is no plan document at all (a usage error, not an
    incorrect plan), or None."""
    if isinstance(doc, dict) and "nodes" in doc and "links" in doc and "program" not in doc:
        return (
            f"{path} is a topology file, not a plan document "
            "(usage: syncplan verify PLAN --topology TOPOLOGY)"
        )
    if not isinstance(doc, dict) or not ({"program", COMPACT_KEY, "ranks"} & doc.keys()):
        return (
            f"{path} is not a plan document: it has no 'program' and no 'ranks' "
            "(docs/formats.md, Plan document)"
        )
    return None


def cmd_verify(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import format_time
    from syncplan.planner.topology import load_topology
    from syncplan.planner.verify import verify_plan

    plan = load_json(args.plan, "plan")
    if isinstance(plan, dict) and "slice" in plan:
        raise CLIError(
            f"{args.plan} is a plan slice: a slice cannot be verified alone; verify the full plan"
        )
    usage = not_a_plan(plan, args.plan)
    if usage:
        raise CLIError(usage)
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
        "broadcast": f"every rank ends with the root's buffer (rank {plan.get('root')})",
        "reduce": f"the root (rank {plan.get('root')}) holds every input exactly once",
    }.get(plan.get("collective"), "every rank ends with every input exactly once")
    print(
        f"correct: {what} ({report.steps} steps, "
        f"{report.transfers} transfers); simulated time {format_time(report.simulated_time_s)}"
        + (" (on a different topology than the plan's)" if note else "")
    )
    return 0
