"""Cluster graph: load, validate and query a topology file (docs/formats.md, Topology file)."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
from syncplan.core.errors import RequestError, TopologyError

RANK_KINDS = frozenset({"gpu", "cpu"})
# every node kind a topology may use (case-sensitive); only RANK_KINDS hold ranks
NODE_KINDS = ("gpu", "cpu", "nic", "switch", "pcie_switch", "nvswitch", "cpu_socket")
NODE_KEYS = ("id", "kind", "host")
LINK_KEYS = ("src", "dst", "bandwidth_GBps", "latency_us", "kind", "directed")
TOP_KEYS = ("nodes", "links")
# what GET /v1/topology adds to the graph: accepted and ignored, so its answer loads as a file
SERVICE_KEYS = ("version", "hosts", "stale_hosts", "unlinked_hosts", "dropped_fabric_links")
GBPS = 1e9  # bytes per second in one GB/s
US = 1e-6  # seconds in one microsecond


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    kind: str
    host: str | None = None

    @property
    def can_hold_rank(self) -> bool:
        return self.kind in RANK_KINDS


@dataclass(frozen=True, slots=True)
class Link:
    src: str
    dst: str
    bandwidth_GBps: float
    latency_us: float = 0.0
    kind: str = "network"
    directed: bool = False


class Topology:
    """A validated cluster graph.

    ``graph`` is a directed networkx graph: a full-duplex link becomes two arcs, each with
    the link's bandwidth. Arc attributes: ``bw`` (bytes/s), ``lat`` (s), ``kind``.
    """

    def __init__(self, nodes: Iterable[Node], links: Iterable[Link]) -> None:
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if node.id in self.nodes:
                raise TopologyError(f"duplicate node id {node.id!r}")
            self.nodes[node.id] = node
        self.links: list[Link] = list(links)
        self._ranks_ok: list[str] | None = None  # the last ranks check_ranks accepted
        self.graph = nx.DiGraph()
        for node in self.nodes.values():
            self.graph.add_node(node.id, kind=node.kind, host=node.host)
        for i, link in enumerate(self.links):
            self._add_link(i, link)

    def _add_link(self, i: int, link: Link) -> None:
        where = f"links[{i}] ({link.src} -> {link.dst})"
        for end in (link.src, link.dst):
            if end not in self.nodes:
                raise TopologyError(f"{where}: unknown node {end!r}")
        if link.src == link.dst:
            raise TopologyError(f"{where}: a link must join two different nodes")
        if not (
            isinstance(link.bandwidth_GBps, int | float)
            and math.isfinite(link.bandwidth_GBps)
            and link.bandwidth_GBps > 0
        ):
            raise TopologyError(
                f"{where}: bandwidth_GBps must be a positive number, got {link.bandwidth_GBps!r}"
            )
        if not (
            isinstance(link.latency_us, int | float)
            and math.isfinite(link.latency_us)
            and link.latency_us >= 0
        ):
            raise TopologyError(
                f"{where}: latency_us must be a non-negative number, got {link.latency_us!r}"
            )
        arcs = (
            [(link.src, link.dst)]
            if link.directed
            else [(link.src, link.dst), (link.dst, link.src)]
        )
        for u, v in arcs:
            if self.graph.has_edge(u, v):
                raise TopologyError(
                    f"{where}: duplicate link {u} -> {v}; give one link with the total bandwidth"
                )
            self.graph.add_edge(
                u, v, bw=link.bandwidth_GBps * GBPS, lat=link.latency_us * US, kind=link.kind
            )

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any) -> Topology:
        """Build from the parsed JSON/YAML structure; raise TopologyError naming the problem."""
        if not isinstance(data, Mapping):
            raise TopologyError("topology must be an object with 'nodes' and 'links'")
        check_keys(data)
        raw_nodes, raw_links = data.get("nodes"), data.get("links", [])
        if not isinstance(raw_nodes, list) or not raw_nodes:
            raise TopologyError("topology needs a non-empty 'nodes' list")
        if not isinstance(raw_links, list):
            raise TopologyError("'links' must be a list")
        nodes = [_parse_node(i, n) for i, n in enumerate(raw_nodes)]
        links = [_parse_link(i, lk) for i, lk in enumerate(raw_links)]
        return cls(nodes, links)

    def to_dict(self) -> dict[str, Any]:
        nodes = []
        for n in self.nodes.values():
            entry: dict[str, Any] = {"id": n.id, "kind": n.kind}
            if n.host is not None:
                entry["host"] = n.host
            nodes.append(entry)
        links = []
        for lk in self.links:
            entry = {
                "src": lk.src,
                "dst": lk.dst,
                "bandwidth_GBps": lk.bandwidth_GBps,
                "latency_us": lk.latency_us,
                "kind": lk.kind,
            }
            if lk.directed:
                entry["directed"] = True
            links.append(entry)
        return {"nodes": nodes, "links": links}

    def fingerprint(self) -> str:
        """A short hash of the graph (nodes, links, rates), independent of their order: two
        topologies with the same fingerprint plan the same way."""
        data = self.to_dict()
        key = json.dumps(
            [
                sorted(json.dumps(n, sort_keys=True) for n in data["nodes"]),
                sorted(json.dumps(lk, sort_keys=True) for lk in data["links"]),
            ]
        )
        return hashlib.sha256(key.encode()).hexdigest()[:20]

    # ---- queries --------------------------------------------------------------------------

    def endpoints(self) -> list[str]:
        """Ids of every node that can hold a rank, in file order."""
        return [n.id for n in self.nodes.values() if n.can_hold_rank]

    def host_of(self, node_id: str) -> str:
        """The host of a node; a node without ``host`` is its own host."""
        node = self.nodes[node_id]
        return node.host if node.host is not None else node.id

    def hosts(self, ranks: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Endpoints grouped by host, hosts in first-seen order."""
        out: dict[str, list[str]] = {}
        for r in self.endpoints() if ranks is None else ranks:
            out.setdefault(self.host_of(r), []).append(r)
        return out

    def check_ranks(self, ranks: list[str]) -> None:
        """Raise RequestError unless ``ranks`` are distinct, connected endpoints (the last
        list accepted is remembered: one request that passes its ranks along checks once)."""
        if isinstance(ranks, list) and ranks == self._ranks_ok:
            return
        if not ranks:
            raise RequestError("ranks: at least one rank is needed")
        seen: set[str] = set()
        for i, r in enumerate(ranks):
            if not isinstance(r, str):
                raise RequestError(f"ranks[{i}]: expected a node id string, got {r!r}")
            if r not in self.nodes:
                raise RequestError(f"ranks[{i}]: unknown node {r!r}")
            if not self.nodes[r].can_hold_rank:
                raise RequestError(
                    f"ranks[{i}]: node {r!r} is a {self.nodes[r].kind}, which only "
                    "forwards data and cannot hold a rank"
                )
            if r in seen:
                raise RequestError(f"ranks[{i}]: node {r!r} appears twice")
            seen.add(r)
        reach = nx.descendants(self.graph, ranks[0]) | {ranks[0]}
        for r in ranks:
            if r not in reach:
                raise RequestError(f"ranks: {r!r} cannot be reached from {ranks[0]!r}")
        back = nx.ancestors(self.graph, ranks[0]) | {ranks[0]}
        for r in ranks:
            if r not in back:
                raise RequestError(f"ranks: {ranks[0]!r} cannot be reached from {r!r}")
        self._ranks_ok = list(ranks)

    def resolve_ranks(self, spec: str | list[str]) -> list[str]:
        """``"all"`` (every endpoint), a comma-separated string, or a list of ids."""
        if isinstance(spec, str):
            ranks = (
                self.endpoints()
                if spec == "all"
                else [s.strip() for s in spec.split(",") if s.strip()]
            )
        else:
            ranks = list(spec)
        self.check_ranks(ranks)
        return ranks


def unknown_key(where: str, raw: Mapping[Any, Any], allowed: Sequence[str]) -> None:
    """Raise TopologyError naming the first key of ``raw`` not in ``allowed`` (and the
    allowed key it is closest to, when there is one)."""
    for key in raw:
        if key in allowed:
            continue
        near = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"did you mean {near[0]!r}?" if near else "allowed keys: " + ", ".join(allowed)
        raise TopologyError(f"{where}{': ' if where else ''}unknown key {key!r}; {hint}")


def check_kind(where: str, kind: str) -> None:
    """Raise TopologyError unless ``kind`` is one of NODE_KINDS (case-sensitive)."""
    if kind in NODE_KINDS:
        return
    near = [k for k in NODE_KINDS if k == kind.lower()] or difflib.get_close_matches(
        kind, NODE_KINDS, n=1
    )
    hint = f"did you mean {near[0]!r}? " if near else ""
    raise TopologyError(
        f"{where}: unknown kind {kind!r}; {hint}allowed kinds: {', '.join(NODE_KINDS)} "
        "(case-sensitive; docs/formats.md)"
    )


def check_keys(data: Mapping[Any, Any]) -> None:
    """The strict part of the format: no unknown key at the top, in a node or in a link, and
    only NODE_KINDS as node kinds (docs/formats.md, Topology file)."""
    unknown_key("", data, TOP_KEYS + SERVICE_KEYS if "version" in data else TOP_KEYS)
    nodes, links = data.get("nodes"), data.get("links")
    for i, n in enumerate(nodes if isinstance(nodes, list) else ()):
        if isinstance(n, Mapping):
            where = f"nodes[{i}]" + (f" ({n['id']})" if isinstance(n.get("id"), str) else "")
            unknown_key(where, n, NODE_KEYS)
            if isinstance(n.get("kind"), str) and n["kind"]:
                check_kind(where, n["kind"])
    for i, lk in enumerate(links if isinstance(links, list) else ()):
        if isinstance(lk, Mapping):
            unknown_key(f"links[{i}] ({lk.get('src')} -> {lk.get('dst')})", lk, LINK_KEYS)


def _parse_node(i: int, raw: Any) -> Node:
    if not isinstance(raw, Mapping):
        raise TopologyError(f"nodes[{i}]: expected an object")
    nid, kind, host = raw.get("id"), raw.get("kind"), raw.get("host")
    if not isinstance(nid, str) or not nid:
        raise TopologyError(f"nodes[{i}]: 'id' must be a non-empty string")
    if not isinstance(kind, str) or not kind:
        raise TopologyError(f"nodes[{i}] ({nid}): 'kind' must be a non-empty string")
    if host is not None and not isinstance(host, str):
        raise TopologyError(f"nodes[{i}] ({nid}): 'host' must be a string")
    return Node(nid, kind, host)


def _parse_link(i: int, raw: Any) -> Link:
    if not isinstance(raw, Mapping):
        raise TopologyError(f"links[{i}]: expected an object")
    src, dst = raw.get("src"), raw.get("dst")
    if not isinstance(src, str) or not isinstance(dst, str):
        raise TopologyError(f"links[{i}]: 'src' and 'dst' must be node id strings")
    bw = raw.get("bandwidth_GBps")
    lat = raw.get("latency_us", 0.0)
    if "bandwidth_GBps" not in raw:
        raise TopologyError(f"links[{i}] ({src} -> {dst}): 'bandwidth_GBps' is missing")
    for name, value in (("bandwidth_GBps", bw), ("latency_us", lat)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TopologyError(
                f"links[{i}] ({src} -> {dst}): '{name}' must be a number, got {value!r}"
            )
    kind = raw.get("kind", "network")
    directed = raw.get("directed", False)
    if not isinstance(kind, str) or not isinstance(directed, bool):
        raise TopologyError(
            f"links[{i}] ({src} -> {dst}): 'kind' must be a string and 'directed' a boolean"
        )
    assert isinstance(bw, int | float)  # checked above
    return Link(src, dst, float(bw), float(lat), kind, directed)


def load_topology(path: str | Path) -> Topology:
    """Read a topology file (.json, .yaml or .yml) and validate it."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise TopologyError(f"{p}: cannot read ({exc.strerror or exc})") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TopologyError(f"{p}: invalid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TopologyError(
                f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    try:
        return Topology.from_dict(data)
    except TopologyError as exc:
        raise TopologyError(f"{p}: {exc}") from None
