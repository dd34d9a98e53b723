"""The planner's commands: registers ``syncplan topo show``, ``plan`` and ``verify``; runs
``plan`` (cli_topo and cli_verify run the others)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from syncplan.core.errors import RequestError
from syncplan.core.options import PlanOptions
from syncplan.planner.cli_output import (
    Output,
    Progress,
    check_slice_option,
    plan_text,
    print_chosen_and_write,
    table,
)
from syncplan.planner.cli_topo import cmd_topo_show
from syncplan.planner.cli_verify import cmd_verify


class _PlanHelp(argparse.HelpFormatter):
    """Fills ``{algorithms}`` from planner.algorithms.ALGORITHMS when help is printed, so
    registering the command stays cheap and the list is never stale."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "{algorithms}" in text:
            from syncplan.planner.algorithms import ALGORITHMS

            text = text.replace("{algorithms}", ", ".join(ALGORITHMS))
        return text


def register(sub: argparse._SubParsersAction) -> None:
    topo = sub.add_parser("topo", help="inspect a topology file")
    topo_sub = topo.add_subparsers(dest="topo_command", metavar="ACTION", required=True)
    show = topo_sub.add_parser("show", help="hosts, ranks, links per kind, narrowest cuts")
    show.add_argument("file", help="topology file (.json, .yaml; docs/formats.md)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.set_defaults(func=cmd_topo_show)

    plan = sub.add_parser(
        "plan",
        help="plan an all-reduce on a topology",
        formatter_class=_PlanHelp,
        description="Plan an all-reduce on a topology file and print the predicted time "
        "against the lower bound; -o writes the plan document (docs/formats.md).",
    )
    plan.add_argument("--topology", "-t", required=True, help="topology file (.json, .yaml)")
    plan.add_argument(
        "--ranks", default="all", help="'all' or comma-separated endpoint ids (default all)"
    )
    plan.add_argument(
        "--size",
        default="256MiB",
        help="buffer size: bytes (1000000, 1e6) or with a unit: KiB, MiB, GiB, "
        "KB, MB, GB (default 256MiB)",
    )
    plan.add_argument(
        "--algorithm",
        "-a",
        default="auto",
        help="auto (the fastest under the cost model) or one of: {algorithms} (default "
        "auto); a broadcast or reduce takes chain, binary-tree, star or packing",
    )
    plan.add_argument("--compare", action="store_true", help="show every algorithm side by side")
    plan.add_argument(
        "--collective",
        default="allreduce",
        choices=("allreduce", "reducescatter", "allgather", "broadcast", "reduce"),
        help="the collective to plan (default allreduce)",
    )
    plan.add_argument(
        "--root",
        default=None,
        help="broadcast / reduce: the root rank, an endpoint id or a rank index (default 0)",
    )
    plan.add_argument(
        "--shards",
        default="equal",
        choices=("equal", "any"),
        help="reduce-scatter / all-gather: equal shards, or any (rate-sized)",
    )
    plan.add_argument(
        "--min-step-us",
        type=float,
        default=0.0,
        help="least time of a step: the transport's per-step cost, which it "
        "overlaps with moving data (default 0)",
    )
    plan.add_argument(
        "--message-overhead-us",
        type=float,
        default=0.0,
        help="all-reduce: time a rank spends per message it sends or receives "
        "in a step, added to the step (LogP's o; default 0)",
    )
    plan.add_argument(
        "--message-cores",
        type=int,
        default=0,
        help="all-reduce: the ranks share this many CPU cores for their message "
        "overhead (an emulated cluster on one machine): a step pays at least "
        "o x its message ends / cores (default 0: a CPU per rank)",
    )
    plan.add_argument(
        "--exchange-overhead-us",
        type=float,
        default=0.0,
        help="all-reduce: added time per message end of a step's exchanged "
        "transfers (a pair sending both ways in the step), counted like "
        "--message-overhead-us (default 0)",
    )
    plan.add_argument(
        "--switch-overhead",
        type=float,
        default=0.0,
        help="all-reduce: added fraction of the wire time of a step's slowest "
        "transfer whose sender left that connection idle in the previous "
        "step while sending to others (default 0)",
    )
    plan.add_argument(
        "--effort",
        default="fast",
        choices=("fast", "thorough"),
        help="all-reduce: how hard forest searches: fast (seconds, default) or "
        "thorough (its pieced LPs may take minutes: an offline plan for a "
        'long job; docs/planner.md, "Effort")',
    )
    plan.add_argument(
        "-o", "--output", help="write the plan document here (JSON); checked before planning"
    )
    plan.add_argument(
        "--slice",
        metavar="R",
        help="with -o: write only rank R's slice (an index or an endpoint id; "
        'docs/formats.md, "Plan slice")',
    )
    plan.add_argument(
        "--progress",
        action="store_true",
        help="report progress on stderr (default: only when stderr is a terminal)",
    )
    plan.set_defaults(func=cmd_plan)

    verify = sub.add_parser("verify", help="check a plan document by simulating it")
    verify.add_argument("plan", help="plan document (JSON)")
    verify.add_argument("--topology", "-t", required=True, help="topology file")
    verify.set_defaults(func=cmd_verify)


def _cells(size: int, seconds: float, nranks: int, bound: float) -> list[str]:
    """algbw, busbw and gap to the bound; '-' where they mean nothing (one rank, no time)."""
    from syncplan.planner.plan import algorithm_bandwidth

    if seconds <= 0 or nranks < 2:
        return ["-", "-", "-"]
    algbw, busbw = algorithm_bandwidth(size, seconds, nranks)
    gap = f"{(seconds / bound - 1) * 100:.1f}%" if bound > 0 else "-"
    return [f"{algbw:.2f}", f"{busbw:.2f}", gap]


def plan_options(args: argparse.Namespace) -> PlanOptions:
    """The plan options of ``syncplan plan``'s flags, each checked under its flag's name."""
    for flag, value in (
        ("--min-step-us", args.min_step_us),
        ("--message-overhead-us", args.message_overhead_us),
        ("--message-cores", args.message_cores),
        ("--exchange-overhead-us", args.exchange_overhead_us),
        ("--switch-overhead", args.switch_overhead),
    ):
        if not value >= 0:
            raise RequestError(f"{flag} must be >= 0")
    return PlanOptions(
        min_step_s=args.min_step_us * 1e-6,
        message_overhead_s=args.message_overhead_us * 1e-6,
        message_cores=args.message_cores or None,
        exchange_overhead_s=args.exchange_overhead_us * 1e-6,
        switch_overhead=args.switch_overhead,
        effort=args.effort,
    )


def cmd_plan(args: argparse.Namespace) -> int:
    from syncplan.planner.plan import compare, plan_and_compare
    from syncplan.planner.sizes import format_size, format_time, parse_size
    from syncplan.planner.topology import load_topology

    options = plan_options(args)
    size = parse_size(args.size)
    topo = load_topology(args.topology)
    ranks = topo.resolve_ranks(args.ranks)  # checked: the planner's check finds them so
    rooted = args.collective in ("broadcast", "reduce")
    if args.root is not None and not rooted:
        raise RequestError("--root applies to --collective broadcast and reduce only")
    check_slice_option(args, ranks)
    if args.collective != "allreduce":
        if options.priced:
            raise RequestError(
                "--message-overhead-us, --message-cores, --exchange-overhead-us "
                "and --switch-overhead are priced for all-reduce plans only"
            )
        if options.effort != "fast":
            raise RequestError("--effort applies to all-reduce plans only")
        if rooted:
            from syncplan.planner.cli_rooted import plan_rooted

            return plan_rooted(args, topo, ranks, size, options)
        return _plan_collective(args, topo, ranks, size, options)
    output = Output(args.output) if args.output else None
    show = args.progress or sys.stderr.isatty()
    label = f"{len(ranks)} ranks, {format_size(size)}"
    progress = (
        Progress(label, getattr(args, "verbose", False)) if show else contextlib.nullcontext()
    )
    try:
        rows = []
        infeasible: dict[str, str] = {}
        with progress:
            doc, comp = plan_and_compare(topo, ranks, size, args.algorithm, options=options)
            if args.compare:
                if args.algorithm != "auto":  # the others too; the named one is priced
                    from syncplan.planner.algorithms import ALGORITHMS

                    named = comp.candidates[args.algorithm]
                    comp = compare(
                        topo,
                        ranks,
                        size,
                        algorithms=[a for a in ALGORITHMS if a != args.algorithm],
                        options=options,
                    )
                    comp.candidates[args.algorithm] = named  # not solved twice (thorough)
                infeasible = comp.infeasible
                bound_any = comp.bound_any
                assert bound_any is not None  # compare() always prices it
                for name, cand in sorted(
                    comp.candidates.items(), key=lambda kv: kv[1].predicted_time_s
                ):
                    t = cand.predicted_time_s
                    own, family = comp.bound_for(name)[:2]
                    cells = _cells(size, t, len(ranks), own)
                    if family != comp.bound.family and cells[2] != "-":
                        cells[2] += " (any)"
                    rows.append(
                        [
                            name,
                            format_time(t),
                            *cells,
                            _cells(size, t, len(ranks), bound_any.time_s)[2],
                        ]
                    )
                for name in infeasible:
                    rows.append([name, "infeasible", "-", "-", "-", "-"])
        bound = doc["lower_bound_time_s"]
        if not args.compare:
            t = doc["predicted_time_s"]
            rows.append(
                [
                    doc["algorithm"],
                    format_time(t),
                    *_cells(size, t, len(ranks), bound),
                    _cells(size, t, len(ranks), doc["lower_bound_any_time_s"])[2],
                ]
            )
        print(
            f"all-reduce of {format_size(size)} over {len(ranks)} "
            f"rank{'s' if len(ranks) != 1 else ''} ({len(topo.hosts(ranks))} "
            f"host{'s' if len(topo.hosts(ranks)) != 1 else ''})"
        )
        if len(ranks) == 1:
            print("one rank: nothing to exchange, the plan has no steps")
        print(
            table(
                rows,
                ["algorithm", "predicted", "algbw GB/s", "busbw GB/s", "vs bound", "vs any-bound"],
            )
        )
        for name, why in infeasible.items():
            print(f"{name} is infeasible: {why}")
        print(
            f"lower bound: {format_time(bound)} ({doc['lower_bound_family']}; "
            f"{doc['lower_bound_method']})"
        )
        if doc["lower_bound_any_family"] != doc["lower_bound_family"]:
            print(
                f"lower bound on any program: {format_time(doc['lower_bound_any_time_s'])} "
                f"({doc['lower_bound_any_family']}; {doc['lower_bound_any_method']})"
            )
        if args.compare and comp.bound.family != doc["lower_bound_family"]:
            print(
                f"reduce-then-broadcast bound: {format_time(comp.bound.time_s)} "
                f"({comp.bound.family}; {comp.bound.method})"
            )
        fluid = doc["details"].get("fluid_time_s")
        if fluid and doc["lower_bound_bandwidth_s"] > 0:
            print(
                f"bandwidth: the bound's {format_time(doc['lower_bound_bandwidth_s'])}, "
                f"{doc['algorithm']}'s fluid optimum {format_time(fluid)} "
                f"({(fluid / doc['lower_bound_bandwidth_s'] - 1) * 100:.1f}% above it); "
                "the rest of the gap is latency and pipeline fill"
            )
        print_chosen_and_write(doc, output, args.slice)
    finally:
        if output is not None:
            output.close()
    return 0


def _plan_collective(
    args: argparse.Namespace, topo: Any, ranks: list[str], size: int, options: PlanOptions
) -> int:
    from syncplan.planner.plan import make_plan
    from syncplan.planner.sizes import format_size, format_time

    doc = make_plan(
        topo, ranks, size, args.algorithm, args.collective, options=options, shards=args.shards
    )
    bound = doc["lower_bound_time_s"]
    rows = [
        [name, format_time(t), f"{(t / bound - 1) * 100:.1f}%" if bound > 0 else "-"]
        for name, t in sorted(doc["candidates"].items(), key=lambda kv: kv[1])
    ]
    print(
        f"{args.collective} of {format_size(size)} over {len(ranks)} ranks "
        f"({len(topo.hosts(ranks))} hosts), shards {args.shards}"
    )
    print(table(rows, ["algorithm", "predicted", "vs bound"]))
    print(
        f"lower bound: {format_time(bound)} ({doc['lower_bound_family']}; "
        f"{doc['lower_bound_method']})"
    )
    owned = [b - a for a, b in doc["shards"]]
    steps = doc["program"]["steps"]
    print(
        f"chosen: {doc['algorithm']}, {len(steps)} steps, {sum(len(s) for s in steps)} "
        f"transfers, units owned per rank {min(owned)}..{max(owned)} of "
        f"{doc['program']['units']}, plan_id {doc['plan_id']}"
    )
    if args.output:
        output = Output(args.output)
        try:
            output.commit(plan_text(doc, args.slice))
        finally:
            output.close()
        print(f"wrote {output.path}")
    return 0
