"""Merge host reports and the admin fabric into one cluster graph (docs/formats.md, Topology file).

The rules (also in docs/service.md):

* A report's local nodes become ``{host}/{local_id}`` (``host`` = the host); its local
  links likewise, with ``measured_bandwidth_GBps`` when present, else the nominal value.
  A report without any ``gpu``/``cpu`` node gets a ``{host}/cpu0`` endpoint, joined to each
  of its NICs at ``HOST_BUS_GBPS``.
* Each host's network rate is the MAX over peer measurements that involve it (a pair probe
  measures ``min(rate_a, rate_b)``, so the fastest peer recovers a host's own rate); its
  latency is half the median of those measurements' latencies. Measured values are rounded
  to three significant digits so that noise alone rarely changes the graph's version.
* Fabric nodes of a reporting host are replaced by the report's; fabric links inside a
  reporting host are ignored; fabric links to nodes that do not exist (a host that has not
  reported, or is stale) are dropped. A fabric link from a reporting host's NIC (or its
  endpoint, if it reported no NIC) to a node outside the host takes the host's measured
  rate as its bandwidth when there is one.
* A reporting host with no fabric link leaving it is joined to one switch ``fabric`` from
  each NIC (or from its first endpoint if it reported no NIC) at its measured rate, else at
  its fastest NIC's nominal speed; a host with neither stays unconnected.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from syncplan.core.errors import TopologyError
from syncplan.core.report import HostReport
from syncplan.planner.topology import RANK_KINDS

HOST_BUS_GBPS = 100.0
AUTO_SWITCH = "fabric"


def canonical_json(data: Any) -> bytes:
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def digest(data: Any) -> str:
    return hashlib.sha256(canonical_json(data)).hexdigest()


def round3(x: float) -> float:
    """``x`` to three significant digits; a finite value near the float limit stays as it
    is rather than round up to infinity (which JSON cannot carry)."""
    r = float(f"{x:.3g}")
    return r if math.isfinite(r) else x


def local_graph(report: HostReport) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The host's own nodes and links with cluster-wide ids."""
    host = report.host
    nodes = [{"id": f"{host}/{n.id}", "kind": n.kind, "host": host} for n in report.nodes]
    if not nodes and report.endpoint_kind == "gpu":
        nodes = [
            {"id": f"{host}/gpu{g.index}", "kind": "gpu", "host": host}
            for g in sorted(report.gpus, key=lambda g: g.index)
        ]
    links: list[dict[str, Any]] = []
    for lk in report.links:
        bw = lk.measured_bandwidth_GBps or lk.bandwidth_GBps
        entry: dict[str, Any] = {
            "src": f"{host}/{lk.src}",
            "dst": f"{host}/{lk.dst}",
            "bandwidth_GBps": bw,
            "latency_us": lk.latency_us,
            "kind": lk.kind,
        }
        if lk.directed:
            entry["directed"] = True
        links.append(entry)
    if not any(n["kind"] in RANK_KINDS for n in nodes):
        cpu = f"{host}/cpu0"
        if any(n["id"] == cpu for n in nodes):
            raise TopologyError(f"nodes: {cpu!r} exists but is not of kind cpu")
        nodes.append({"id": cpu, "kind": "cpu", "host": host})
        links.extend(
            {
                "src": cpu,
                "dst": n["id"],
                "bandwidth_GBps": HOST_BUS_GBPS,
                "latency_us": 0.0,
                "kind": "host_bus",
            }
            for n in nodes
            if n["kind"] == "nic"
        )
    return nodes, links


def graph_key(report: HostReport) -> str:
    """A digest of what the merge reads from a report: unchanged when only ``seq``,
    timestamps or inventory details change."""
    nodes, links = local_graph(report)
    peers = sorted(
        (p.peer_host, round3(p.bandwidth_GBps), p.latency_us, p.nic or "") for p in report.peers
    )
    speeds = sorted(n.speed_GBps or 0.0 for n in report.nics)
    return digest([nodes, links, peers, speeds])


def check_report(report: HostReport) -> None:
    """Raise TopologyError (naming the field) unless the report is self-consistent."""
    nodes, links = local_graph(report)
    seen_gpus: set[int] = set()
    for i, g in enumerate(report.gpus):
        if g.index in seen_gpus:
            raise TopologyError(f"gpus[{i}].index: GPU index {g.index} appears twice")
        seen_gpus.add(g.index)
    for i, p in enumerate(report.peers):
        if p.peer_host == report.host:
            raise TopologyError(f"peers[{i}].peer_host: a host cannot measure itself")
    ids = {n["id"] for n in nodes}
    for i, lk in enumerate(report.links):
        for end in ("src", "dst"):
            local = getattr(lk, end)
            if f"{report.host}/{local}" not in ids:
                raise TopologyError(f"links[{i}].{end}: unknown local node {local!r}")
    check_graph(nodes, links)


def check_graph(nodes: list[dict[str, Any]], links: list[dict[str, Any]]) -> None:
    """What ``Topology.from_dict`` checks of a report's own graph (unique ids, links between
    known, different nodes, at most one link per direction), without building it; numbers
    are already in range (core/report.py)."""
    seen: set[str] = set()
    for n in nodes:
        if n["id"] in seen:
            raise TopologyError(f"duplicate node id {n['id']!r}")
        seen.add(n["id"])
    arcs: set[tuple[str, str]] = set()
    for i, lk in enumerate(links):
        src, dst = lk["src"], lk["dst"]
        where = f"links[{i}] ({src} -> {dst})"
        for end in (src, dst):
            if end not in seen:
                raise TopologyError(f"{where}: unknown node {end!r}")
        if src == dst:
            raise TopologyError(f"{where}: a link must join two different nodes")
        for arc in ((src, dst),) if lk.get("directed") else ((src, dst), (dst, src)):
            if arc in arcs:
                raise TopologyError(
                    f"{where}: duplicate link {arc[0]} -> {arc[1]}; give one "
                    "link with the total bandwidth"
                )
            arcs.add(arc)


@dataclass(frozen=True)
class FreshReport:
    report: HostReport
    seq: int
    received_at: float


@dataclass
class Merged:
    graph: dict[str, Any]
    version: str
    host_rates: dict[str, float] = field(default_factory=dict)
    unlinked: list[str] = field(default_factory=list)
    dropped_fabric_links: int = 0


def measured_rates(
    reports: Iterable[HostReport],
) -> tuple[dict[str, float], dict[tuple[str, str], float], dict[str, float]]:
    """Per-host rate (max over peers), per-(host, nic) rate, per-host half-median latency."""
    rates: dict[str, float] = {}
    nic_rates: dict[tuple[str, str], float] = {}
    lats: dict[str, list[float]] = {}
    for rep in reports:
        for m in rep.peers:
            for h in (rep.host, m.peer_host):
                rates[h] = max(rates.get(h, 0.0), m.bandwidth_GBps)
                lats.setdefault(h, []).append(m.latency_us)
            if m.nic:
                key = (rep.host, m.nic)
                nic_rates[key] = max(nic_rates.get(key, 0.0), m.bandwidth_GBps)
    half_lat = {
        h: round3(statistics.median(v) / 2) if statistics.median(v) > 0 else 0.0
        for h, v in lats.items()
    }
    return (
        {h: round3(r) for h, r in rates.items()},
        {k: round3(r) for k, r in nic_rates.items()},
        half_lat,
    )


def merge(
    reports: Mapping[str, HostReport],
    fabric: Mapping[str, Any] | None,
    excluded: Collection[str] = (),
) -> Merged:
    """The merged graph of the fresh ``reports`` and the fabric, without the ``excluded``
    (stale) hosts' fabric nodes; see the module doc."""
    nodes: dict[str, dict[str, Any]] = {}
    links: list[dict[str, Any]] = []
    hosts = sorted(reports)
    for h in hosts:
        ns, ls = local_graph(reports[h])
        for n in ns:
            nodes[n["id"]] = n
        links.extend(ls)
    rates, nic_rates, half_lat = measured_rates(reports[h] for h in hosts)

    def host_of(nid: str) -> str | None:
        return nodes[nid].get("host")

    by_host: dict[str, list[dict[str, Any]]] = {}
    for n in nodes.values():
        by_host.setdefault(n.get("host") or "", []).append(n)

    def attach_points(h: str) -> list[str]:
        local = by_host.get(h, [])
        nics = [n["id"] for n in local if n["kind"] == "nic"]
        return nics or [n["id"] for n in local if n["kind"] in RANK_KINDS][:1]

    attach = {h: set(attach_points(h)) for h in hosts}

    def rate_of(nid: str) -> float | None:
        h = host_of(nid)
        if h is None or h not in reports:
            return None
        return nic_rates.get((h, nid.split("/", 1)[1])) or rates.get(h)

    linked: set[str] = set()
    dropped = 0
    if fabric:
        for n in fabric.get("nodes", []):
            if n.get("host") in reports or n.get("host") in excluded or n["id"] in nodes:
                continue
            nodes[n["id"]] = dict(n)
        for lk in fabric.get("links", []):
            src, dst = lk["src"], lk["dst"]
            if src not in nodes or dst not in nodes:
                dropped += 1
                continue
            hs, hd = host_of(src), host_of(dst)
            if hs == hd and hs in reports:
                continue
            entry = dict(lk)
            rated = [
                rate_of(e)
                for e, h in ((src, hs), (dst, hd))
                if h is not None and h in reports and e in attach[h]
            ]
            measured = [r for r in rated if r]
            if measured:
                entry["bandwidth_GBps"] = min(measured)
            for end in (hs, hd):
                if end is not None and end in reports:
                    linked.add(end)
            links.append(entry)
    unlinked: list[str] = []
    auto: list[dict[str, Any]] = []
    for h in hosts:
        if h in linked:
            continue
        nominal = max((n.speed_GBps for n in reports[h].nics if n.speed_GBps), default=None)
        pts = sorted(attach[h])
        made = False
        for p in pts:
            bw = rate_of(p) or nominal
            if bw:
                auto.append(
                    {
                        "src": p,
                        "dst": AUTO_SWITCH,
                        "bandwidth_GBps": bw,
                        "latency_us": half_lat.get(h, 0.0),
                        "kind": "network",
                    }
                )
                made = True
        if not made:
            unlinked.append(h)
    if auto:
        nodes.setdefault(AUTO_SWITCH, {"id": AUTO_SWITCH, "kind": "switch"})
        links.extend(auto)
    graph = {"nodes": list(nodes.values()), "links": links}
    return Merged(
        graph, digest(graph)[:16], {h: rates[h] for h in hosts if h in rates}, unlinked, dropped
    )
