"""``syncplan topo show``: hosts, ranks, links per kind and the narrowest cuts."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

from syncplan.planner.cli_output import table


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
        table(
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
            table(
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
