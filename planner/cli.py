"""``syncplan topo show``, ``syncplan plan`` and ``syncplan verify``."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from syncplan.core.atomic import AtomicFile
from syncplan.core.errors import RequestError


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
        help="auto (the fastest under the cost model) or one of: {algorithms} (default auto)",
    )
    plan.add_argument("--compare", action="store_true", help="show every algorithm side by side")
    plan.add_argument(
        "--collective",
        default="allreduce",
        choices=("allreduce", "reducescatter", "allgather"),
        help="the collective to plan (default allreduce)",
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
        "--progress",
        action="store_true",
        help="report progress on stderr (default: only when stderr is a terminal)",
    )
    plan.set_defaults(func=cmd_plan)

    verify = sub.add_parser("verify", help="check a plan document by simulating it")
    verify.add_argument("plan", help="plan document (JSON)")
    verify.add_argument("--topology", "-t", required=True, help="topology file")
    verify.set_defaults(func=cmd_verify)


def _load_json(path: str, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise RequestError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    except json.JSONDecodeError as exc:
        raise RequestError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def topology_summary(path: str) -> dict[str, Any]:
    from syncplan.planner.algorithms import PlanContext
    from syncplan.planner.bound import lower_bound
    from syncplan.planner.topology import load_topology

    topo = load_topology(path)
    ranks = topo.endpoints()
    by_kind: dict[str, list[float]] = defaultdict(list)
    for link in topo.links:
        by_kind[link.kind].append(link.bandwidth_GBps)
    hosts = topo.hosts(ranks)
    summary: dict[str, Any] = {
        "file": path,
        "nodes": len(topo.nodes),
        "ranks": len(ranks),
        "hosts": len(hosts),
        "ranks_per_host": {h: len(r) for h, r in hosts.items()},
        "links": {
            k: {"count": len(v), "min_GBps": min(v), "max_GBps": max(v)}
            for k, v in sorted(by_kind.items())
        },
    }
    if ranks:
        topo.check_ranks(ranks)
        ctx = PlanContext.create(topo, ranks, 1)
        g = topo.graph
        cuts = []
        for group in ctx.host_groups:
            host = topo.host_of(ranks[group[0]])
            side = {n for n, node in topo.nodes.items() if node.host == host} | {
                ranks[i] for i in group
            }
            out = sum(
                d["bw"] for u in side for _, v, d in g.out_edges(u, data=True) if v not in side
            )
            inn = sum(
                d["bw"] for u in side for v, _, d in g.in_edges(u, data=True) if v not in side
            )
            cuts.append({"host": host, "egress_GBps": out / 1e9, "ingress_GBps": inn / 1e9})
        cuts.sort(key=lambda c: min(c["egress_GBps"], c["ingress_GBps"]))
        bound = lower_bound(ctx)
        summary["narrowest_host_cuts"] = cuts[:5]
        summary["min_rank_cut_GBps"] = bound.cut_bandwidth_Bps / 1e9
        summary["min_rank_cut_method"] = bound.method
    return summary


def cmd_topo_show(args: argparse.Namespace) -> int:
    s = topology_summary(args.file)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{s['file']}: {s['nodes']} nodes, {s['ranks']} ranks on {s['hosts']} hosts")
    per_host = defaultdict(list)
    for h, n in s["ranks_per_host"].items():
        per_host[n].append(h)
    for n, hs in sorted(per_host.items()):
        print(
            f"  {len(hs)} host(s) with {n} rank(s): {', '.join(hs[:8])}"
            + (" ..." if len(hs) > 8 else "")
        )
    print("\nlinks per kind")
    print(
        _table(
            [
                [k, str(v["count"]), f"{v['min_GBps']:g}", f"{v['max_GBps']:g}"]
                for k, v in s["links"].items()
            ],
            ["kind", "count", "min GB/s", "max GB/s"],
        )
    )
    if "narrowest_host_cuts" in s:
        print("\nnarrowest host cuts")
        print(
            _table(
                [
                    [c["host"], f"{c['egress_GBps']:g}", f"{c['ingress_GBps']:g}"]
                    for c in s["narrowest_host_cuts"]
                ],
                ["host", "egress GB/s", "ingress GB/s"],
            )
        )
        print(
            f"\nminimum rank-separating cut: {s['min_rank_cut_GBps']:g} GB/s "
            f"({s['min_rank_cut_method']})"
        )
    return 0


class _Output:
    """The plan document's destination, opened before planning: a temporary file beside it
    proves the directory is writable; ``commit`` renames it into place, ``close`` removes
    whatever is left, so no temporary file outlives the command."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise RequestError(
                f"-o {path}: is a directory; name a file, for example {self.path / 'plan.json'}"
            )
        parent = self.path.parent
        if not parent.is_dir():
            raise RequestError(f"-o {path}: directory {parent} does not exist")
        try:
            self._file = AtomicFile(self.path)
        except OSError as exc:
            raise RequestError(
                f"-o {path}: cannot write in {parent} ({exc.strerror or exc})"
            ) from None

    def commit(self, text: str) -> None:
        try:
            self._file.write(text)
            self._file.commit()
        except OSError as exc:
            raise RequestError(f"-o {self.path}: cannot write ({exc.strerror or exc})") from None

    def close(self) -> None:
        self._file.discard()


class _Progress(logging.Handler):
    """Progress of a long plan on stderr: elapsed time (redrawn each second on a terminal,
    a line every 10 s otherwise) and each algorithm as the planner finishes pricing it."""

    def __init__(self, label: str, verbose: bool) -> None:
        super().__init__(logging.DEBUG)
        self.label, self.verbose, self.done = label, verbose, []
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._log = logging.getLogger("syncplan.planner.plan")
        self._stages = logging.getLogger("syncplan.planner.algorithms.forest.effort")
        self.stage = ""

    def __enter__(self) -> _Progress:
        self._saved = (
            self._log.level,
            self._log.propagate,
            self._stages.level,
            self._stages.propagate,
        )
        self._log.setLevel(logging.DEBUG)
        self._log.propagate = False  # forwarded by emit, below, at the level asked for
        self._log.addHandler(self)
        self._stages.setLevel(logging.INFO)
        self._stages.propagate = False  # shown in the progress line only
        self._stages.addHandler(self)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._log.removeHandler(self)
        self._log.setLevel(self._saved[0])
        self._log.propagate = self._saved[1]
        self._stages.removeHandler(self)
        self._stages.setLevel(self._saved[2])
        self._stages.propagate = self._saved[3]
        if self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == self._stages.name:  # a stage of forest's thorough search
            self.stage = record.getMessage()
            self._line()
            return
        if record.levelno >= logging.INFO or self.verbose:
            logging.getLogger().handle(record)
        if record.msg == "%s priced in %.3f s" and len(record.args or ()) == 2:
            name, secs = record.args  # type: ignore[misc]
            self.done.append(f"{name} {secs:.1f} s")
            self._line()

    def _line(self) -> None:
        text = (
            f"planning {self.label}: {time.monotonic() - self.t0:.0f} s"
            + (f" (priced: {', '.join(self.done)})" if self.done else "")
            + (f"; {self.stage}" if self.stage else "")
        )
        sys.stderr.write(f"\r\x1b[K{text}" if self.tty else text + "\n")
        sys.stderr.flush()

    def _tick(self) -> None:
        every = 1.0 if self.tty else 10.0
        while not self._stop.wait(every):
            self._line()


def _cells(size: int, seconds: float, nranks: int, bound: float) -> list[str]:
    """algbw, busbw and gap to the bound; '-' where they mean nothing (one rank, no time)."""
    from syncplan.planner.plan import algorithm_bandwidth

    if seconds <= 0 or nranks < 2:
        return ["-", "-", "-"]
    algbw, busbw = algorithm_bandwidth(size, seconds, nranks)
    gap = f"{(seconds / bound - 1) * 100:.1f}%" if bound > 0 else "-"
    return [f"{algbw:.2f}", f"{busbw:.2f}", gap]


def cmd_plan(args: argparse.Namespace) -> int:
    from syncplan.planner.plan import compare, plan_and_compare
    from syncplan.planner.sizes import format_size, format_time, parse_size
    from syncplan.planner.topology import load_topology

    if args.min_step_us < 0:
        raise RequestError("--min-step-us must be >= 0")
    if args.message_overhead_us < 0:
        raise RequestError("--message-overhead-us must be >= 0")
    overhead = args.message_overhead_us * 1e-6
    if args.message_cores < 0:
        raise RequestError("--message-cores must be >= 0")
    cores = args.message_cores or None
    if args.exchange_overhead_us < 0:
        raise RequestError("--exchange-overhead-us must be >= 0")
    exchange = args.exchange_overhead_us * 1e-6
    if not args.switch_overhead >= 0:
        raise RequestError("--switch-overhead must be >= 0")
    switch = args.switch_overhead
    size = parse_size(args.size)
    topo = load_topology(args.topology)
    ranks = topo.resolve_ranks(args.ranks)
    topo.check_ranks(ranks)
    min_step = args.min_step_us * 1e-6
    if args.collective != "allreduce":
        if overhead or cores or exchange or switch:
            raise RequestError(
                "--message-overhead-us, --message-cores, --exchange-overhead-us "
                "and --switch-overhead are priced for all-reduce plans only"
            )
        if args.effort != "fast":
            raise RequestError("--effort applies to all-reduce plans only")
        return _plan_collective(args, topo, ranks, size, min_step)
    output = _Output(args.output) if args.output else None
    show = args.progress or sys.stderr.isatty()
    label = f"{len(ranks)} ranks, {format_size(size)}"
    progress = (
        _Progress(label, getattr(args, "verbose", False)) if show else contextlib.nullcontext()
    )
    try:
        rows = []
        infeasible: dict[str, str] = {}
        with progress:
            doc, comp = plan_and_compare(
                topo,
                ranks,
                size,
                args.algorithm,
                min_step_s=min_step,
                message_overhead_s=overhead,
                message_cores=cores,
                exchange_overhead_s=exchange,
                switch_overhead=switch,
                effort=args.effort,
            )
            if args.compare:
                if args.algorithm != "auto":  # the others too; the named one is priced
                    from syncplan.planner.algorithms import ALGORITHMS

                    named = comp.candidates[args.algorithm]
                    comp = compare(
                        topo,
                        ranks,
                        size,
                        min_step_s=min_step,
                        algorithms=[a for a in ALGORITHMS if a != args.algorithm],
                        message_overhead_s=overhead,
                        message_cores=cores,
                        exchange_overhead_s=exchange,
                        switch_overhead=switch,
                        effort=args.effort,
                    )
                    comp.candidates[args.algorithm] = named  # not solved twice (thorough)
                infeasible = comp.infeasible
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
                            _cells(size, t, len(ranks), comp.bound_any.time_s)[2],
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
            _table(
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
        steps = doc["program"]["steps"]
        print(
            f"chosen: {doc['algorithm']}, {len(steps)} steps, "
            f"{sum(len(s) for s in steps)} transfers, plan_id {doc['plan_id']}"
        )
        if output is not None:
            output.commit(json.dumps(doc, separators=(",", ":")))
            print(f"wrote {output.path}")
    finally:
        if output is not None:
            output.close()
    return 0


def _topology_note(plan: Any, topo: Any, path: str) -> str | None:
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


def _plan_collective(
    args: argparse.Namespace, topo: Any, ranks: list[str], size: int, min_step: float
) -> int:
    from syncplan.planner.plan import make_plan
    from syncplan.planner.sizes import format_size, format_time

    doc = make_plan(
        topo, ranks, size, args.algorithm, args.collective, min_step_s=min_step, shards=args.shards
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
    print(_table(rows, ["algorithm", "predicted", "vs bound"]))
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
        output = _Output(args.output)
        try:
            output.commit(json.dumps(doc, separators=(",", ":")))
        finally:
            output.close()
        print(f"wrote {output.path}")
    return 0


def _setting(plan: Any, key: str) -> float:
    v = plan.get(key, 0.0) if isinstance(plan, dict) else 0.0
    return float(v) if isinstance(v, int | float) and 0 <= v < float("inf") else 0.0


def cmd_verify(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import format_time
    from syncplan.planner.topology import load_topology
    from syncplan.planner.verify import verify_plan

    plan = _load_json(args.plan, "plan")
    topo = load_topology(args.topology)
    note = _topology_note(plan, topo, args.topology)
    if note:
        print(f"warning: {note}", file=sys.stderr)
    # the simulated time under the cost-model settings the plan was priced with
    report = verify_plan(
        plan,
        topo,
        min_step_s=_setting(plan, "min_step_s"),
        message_overhead_s=_setting(plan, "message_overhead_s"),
        message_cores=int(_setting(plan, "message_cores")) or None,
        exchange_overhead_s=_setting(plan, "exchange_overhead_s"),
        switch_overhead=_setting(plan, "switch_overhead"),
    )
    if not report.ok:
        print(f"INCORRECT: {report.error}", file=sys.stderr)
        return 1
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
