"""``syncplan topo show``, ``syncplan plan`` and ``syncplan verify``."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from planner.errors import RequestError


def register(sub: argparse._SubParsersAction) -> None:
    topo = sub.add_parser("topo", help="inspect a topology file")
    topo_sub = topo.add_subparsers(dest="topo_command", metavar="ACTION", required=True)
    show = topo_sub.add_parser("show", help="hosts, ranks, links per kind, narrowest cuts")
    show.add_argument("file", help="topology file (.json, .yaml)")
    show.add_argument("--json", action="store_true", help="print the summary as JSON")
    show.set_defaults(func=cmd_topo_show)

    plan = sub.add_parser("plan", help="plan an all-reduce on a topology")
    plan.add_argument("--topology", "-t", required=True, help="topology file")
    plan.add_argument("--ranks", default="all", help="'all' or comma-separated endpoint ids")
    plan.add_argument("--size", default="256MiB", help="buffer size: bytes or KiB/MiB/GiB")
    plan.add_argument("--algorithm", "-a", default="auto", help="auto or an algorithm name")
    plan.add_argument("--compare", action="store_true", help="show every algorithm side by side")
    plan.add_argument("--collective", default="allreduce",
                      choices=("allreduce", "reducescatter", "allgather"),
                      help="the collective to plan (default allreduce)")
    plan.add_argument("--shards", default="equal", choices=("equal", "any"),
                      help="reduce-scatter / all-gather: equal shards, or any (rate-sized)")
    plan.add_argument("--min-step-us", type=float, default=0.0,
                      help="least time of a step: the transport's per-step cost, which it "
                           "overlaps with moving data (default 0)")
    plan.add_argument("-o", "--output", help="write the plan document here (JSON)")
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
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def topology_summary(path: str) -> dict[str, Any]:
    from planner.algorithms import PlanContext
    from planner.bound import lower_bound
    from planner.topology import load_topology

    topo = load_topology(path)
    ranks = topo.endpoints()
    by_kind: dict[str, list[float]] = defaultdict(list)
    for link in topo.links:
        by_kind[link.kind].append(link.bandwidth_GBps)
    hosts = topo.hosts(ranks)
    summary: dict[str, Any] = {
        "file": path, "nodes": len(topo.nodes), "ranks": len(ranks), "hosts": len(hosts),
        "ranks_per_host": {h: len(r) for h, r in hosts.items()},
        "links": {k: {"count": len(v), "min_GBps": min(v), "max_GBps": max(v)}
                  for k, v in sorted(by_kind.items())},
    }
    if ranks:
        topo.check_ranks(ranks)
        ctx = PlanContext.create(topo, ranks, 1)
        g = topo.graph
        cuts = []
        for group in ctx.host_groups:
            host = topo.host_of(ranks[group[0]])
            side = {n for n, node in topo.nodes.items() if node.host == host} | {
                ranks[i] for i in group}
            out = sum(d["bw"] for u in side for _, v, d in g.out_edges(u, data=True)
                      if v not in side)
            inn = sum(d["bw"] for u in side for v, _, d in g.in_edges(u, data=True)
                      if v not in side)
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
        print(f"  {len(hs)} host(s) with {n} rank(s): {', '.join(hs[:8])}"
              + (" ..." if len(hs) > 8 else ""))
    print("\nlinks per kind")
    print(_table([[k, str(v["count"]), f"{v['min_GBps']:g}", f"{v['max_GBps']:g}"]
                  for k, v in s["links"].items()], ["kind", "count", "min GB/s", "max GB/s"]))
    if "narrowest_host_cuts" in s:
        print("\nnarrowest host cuts")
        print(_table([[c["host"], f"{c['egress_GBps']:g}", f"{c['ingress_GBps']:g}"]
                      for c in s["narrowest_host_cuts"]], ["host", "egress GB/s", "ingress GB/s"]))
        print(f"\nminimum rank-separating cut: {s['min_rank_cut_GBps']:g} GB/s "
              f"({s['min_rank_cut_method']})")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from planner.plan import algorithm_bandwidth, compare, make_plan
    from planner.sizes import format_size, format_time, parse_size
    from planner.topology import load_topology

    topo = load_topology(args.topology)
    ranks = topo.resolve_ranks(args.ranks)
    size = parse_size(args.size)
    min_step = args.min_step_us * 1e-6
    if args.min_step_us < 0:
        raise RequestError("--min-step-us must be >= 0")
    rows = []
    if args.collective != "allreduce":
        return _plan_collective(args, topo, ranks, size, min_step)
    if args.compare:
        comp = compare(topo, ranks, size, min_step_s=min_step)
        bound = comp.bound.time_s
        for name, cand in sorted(comp.candidates.items(), key=lambda kv: kv[1].predicted_time_s):
            algbw, busbw = algorithm_bandwidth(size, cand.predicted_time_s, len(ranks))
            gap = (cand.predicted_time_s / bound - 1) * 100 if bound > 0 else 0.0
            rows.append([name, format_time(cand.predicted_time_s), f"{algbw:.2f}", f"{busbw:.2f}",
                         f"{gap:.1f}%"])
        for name, why in comp.infeasible.items():
            rows.append([name, "infeasible", "-", "-", why])
    doc = make_plan(topo, ranks, size, args.algorithm, min_step_s=min_step)
    bound = doc["lower_bound_time_s"]
    if not args.compare:
        algbw, busbw = algorithm_bandwidth(size, doc["predicted_time_s"], len(ranks))
        gap = (doc["predicted_time_s"] / bound - 1) * 100 if bound > 0 else 0.0
        rows.append([doc["algorithm"], format_time(doc["predicted_time_s"]), f"{algbw:.2f}",
                     f"{busbw:.2f}", f"{gap:.1f}%"])
    print(f"all-reduce of {format_size(size)} over {len(ranks)} ranks "
          f"({len(topo.hosts(ranks))} hosts)")
    print(_table(rows, ["algorithm", "predicted", "algbw GB/s", "busbw GB/s", "vs bound"]))
    print(f"lower bound: {format_time(bound)} ({doc['lower_bound_family']}; "
          f"{doc['lower_bound_method']})")
    fluid = doc["details"].get("fluid_time_s")
    if fluid and doc["lower_bound_bandwidth_s"] > 0:
        print(f"bandwidth: the bound's {format_time(doc['lower_bound_bandwidth_s'])}, "
              f"{doc['algorithm']}'s fluid optimum {format_time(fluid)} "
              f"({(fluid / doc['lower_bound_bandwidth_s'] - 1) * 100:.1f}% above it); the rest "
              f"of the gap is latency and pipeline fill")
    steps = doc["program"]["steps"]
    print(f"chosen: {doc['algorithm']}, {len(steps)} steps, "
          f"{sum(len(s) for s in steps)} transfers, plan_id {doc['plan_id']}")
    if args.output:
        out = Path(args.output)
        tmp = out.with_suffix(out.suffix + ".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        tmp.replace(out)
        print(f"wrote {out}")
    return 0


def _plan_collective(args: argparse.Namespace, topo: Any, ranks: list[str], size: int,
                     min_step: float) -> int:
    from planner.plan import make_plan
    from planner.sizes import format_size, format_time

    doc = make_plan(topo, ranks, size, args.algorithm, args.collective, min_step_s=min_step,
                    shards=args.shards)
    bound = doc["lower_bound_time_s"]
    rows = [[name, format_time(t), f"{(t / bound - 1) * 100:.1f}%" if bound > 0 else "-"]
            for name, t in sorted(doc["candidates"].items(), key=lambda kv: kv[1])]
    print(f"{args.collective} of {format_size(size)} over {len(ranks)} ranks "
          f"({len(topo.hosts(ranks))} hosts), shards {args.shards}")
    print(_table(rows, ["algorithm", "predicted", "vs bound"]))
    print(f"lower bound: {format_time(bound)} ({doc['lower_bound_family']}; "
          f"{doc['lower_bound_method']})")
    owned = [b - a for a, b in doc["shards"]]
    steps = doc["program"]["steps"]
    print(f"chosen: {doc['algorithm']}, {len(steps)} steps, {sum(len(s) for s in steps)} "
          f"transfers, units owned per rank {min(owned)}..{max(owned)} of "
          f"{doc['program']['units']}, plan_id {doc['plan_id']}")
    if args.output:
        Path(args.output).write_text(json.dumps(doc, separators=(",", ":")))
        print(f"wrote {args.output}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from planner.sizes import format_time
    from planner.topology import load_topology
    from planner.verify import verify_plan

    topo = load_topology(args.topology)
    plan = _load_json(args.plan, "plan")
    report = verify_plan(plan, topo)
    if not report.ok:
        print(f"INCORRECT: {report.error}", file=sys.stderr)
        return 1
    what = {"reducescatter": "every rank's shard holds every input exactly once",
            "allgather": "every rank ends with every owner's shard"}.get(
                plan.get("collective"), "every rank ends with every input exactly once")
    print(f"correct: {what} ({report.steps} steps, "
          f"{report.transfers} transfers); simulated time {format_time(report.simulated_time_s)}")
    return 0
