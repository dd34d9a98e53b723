"""The in-memory view of the store: the merged cluster graph, rebuilt only when needed.

Readers call ``current()`` (no I/O) and fall back to ``refresh()`` (store I/O, run in a
worker thread) when the view may be out of date: after a local write, when a host's report
is about to pass its TTL, or every ``sync_interval_s`` to see other replicas' writes.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker
from syncplan.api import store
from syncplan.api.merge import Merged, graph_key, merge
from syncplan.api.models import HostStatus
from syncplan.core.errors import PlannerError
from syncplan.core.report import HostReport
from syncplan.planner.topology import RANK_KINDS, Topology

log = logging.getLogger(__name__)


@dataclass
class Snapshot:
    version: str
    graph: dict[str, Any]
    topology: Topology | None
    hosts: dict[str, HostStatus]
    stale: frozenset[str]
    generation: int
    valid_until: float
    endpoints_by_host: dict[str, list[str]] = field(default_factory=dict)
    graph_json: bytes = b""
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def body(self) -> bytes:
        """The ``GET /v1/topology`` document (TopologyPublic), built on first use."""
        hosts = {h: st.model_dump(mode="json") for h, st in self.hosts.items()}
        tail = json.dumps(
            {"hosts": hosts, "stale_hosts": sorted(self.stale), **self.extra}, separators=(",", ":")
        )
        return (
            b'{"version":"'
            + self.version.encode()
            + b'",'
            + self.graph_json[1:-1]
            + b","
            + tail[1:].encode()
        )


def utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


class ClusterState:
    """Thread-safe holder of the latest Snapshot; see the module doc."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        stale_after_s: float,
        sync_interval_s: float,
        clock: Any = time.time,
    ) -> None:
        self._factory = factory
        self.sessions = factory
        self._ttl = stale_after_s
        self._sync = sync_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._reports: dict[str, tuple[str, HostReport, str]] = {}
        self._fabric: tuple[str, dict[str, Any]] | None = None
        self._snapshot: Snapshot | None = None
        self._dirty = True
        self.merges = 0
        self._synced_at = 0.0
        self._merge_key: tuple[Any, ...] | None = None
        self._merged: tuple[Merged, Topology | None, dict[str, list[str]], bytes] | None = None

    def invalidate(self) -> None:
        """Mark the view out of date (after a write through this process)."""
        self._dirty = True

    @property
    def generation(self) -> int:
        snap = self._snapshot
        return snap.generation if snap else -1

    def current(self) -> Snapshot | None:
        """The snapshot if it is certainly current, without I/O; None otherwise."""
        snap = self._snapshot
        if snap is None or self._dirty:
            return None
        now = self._clock()
        if now >= snap.valid_until or now - self._synced_at >= self._sync:
            return None
        return snap

    def refresh(self) -> Snapshot:
        """Bring the view up to date with the store (blocking I/O)."""
        with self._lock:
            snap = self.current()
            if snap is not None:
                return snap
            self._dirty = False
            try:
                return self._refresh_locked()
            except BaseException:
                self._dirty = True  # a failed read (store outage) must not look current
                raise

    def _refresh_locked(self) -> Snapshot:
        now = self._clock()
        prev = self._snapshot
        if prev is not None and now < prev.valid_until:
            with self._factory() as s:
                if store.generation(s) == prev.generation:
                    self._synced_at = now
                    return prev
        with self._factory() as s:
            gen, index = store.report_index(s)
            changed = [
                r.host
                for r in index
                if r.host not in self._reports or self._reports[r.host][0] != r.digest
            ]
            bodies = store.report_bodies(s, changed) if changed else {}
            fabric_row = store.get_fabric(s)
        hosts_now = {r.host for r in index}
        for h in list(self._reports):
            if h not in hosts_now:
                del self._reports[h]
        for h, (d, body) in bodies.items():
            try:
                report = HostReport.model_validate_json(body)
            except ValidationError as exc:  # stored by an older, laxer version
                log.warning(
                    "ignoring host %s: its stored report is no longer valid: %s",
                    h,
                    str(exc).splitlines()[0],
                )
                continue
            self._reports[h] = (d, report, graph_key(report))
        if fabric_row is None:
            self._fabric = None
        elif self._fabric is None or self._fabric[0] != fabric_row.digest:
            self._fabric = (fabric_row.digest, json.loads(fabric_row.body))
        self._synced_at = now
        self._snapshot = self._build(gen, index, now)
        return self._snapshot

    def _build(self, gen: int, index: list[store.ReportIndex], now: float) -> Snapshot:
        stale = frozenset(r.host for r in index if now - r.received_at >= self._ttl)
        fresh = {
            r.host: self._reports[r.host][1]
            for r in index
            if r.host not in stale and r.host in self._reports
        }
        key = (
            tuple(sorted((h, self._reports[h][2]) for h in fresh)),
            stale,
            self._fabric[0] if self._fabric else None,
        )
        if key != self._merge_key or self._merged is None:
            merged = merge(fresh, self._fabric[1] if self._fabric else None, stale)
            self.merges += 1
            topo: Topology | None = None
            if merged.graph["nodes"]:
                try:
                    topo = Topology.from_dict(merged.graph)
                except PlannerError:
                    log.exception("merged graph is invalid; planning is refused until fixed")
            by_host: dict[str, list[str]] = {}
            for n in merged.graph["nodes"]:
                if n["kind"] in RANK_KINDS:
                    by_host.setdefault(n.get("host") or n["id"], []).append(n["id"])
            graph_json = json.dumps(
                {"nodes": merged.graph["nodes"], "links": merged.graph["links"]},
                separators=(",", ":"),
            ).encode()
            self._merged = (merged, topo, by_host, graph_json)
            self._merge_key = key
        merged, topo, by_host, graph_json = self._merged
        hosts = {
            r.host: HostStatus(
                seq=r.seq,
                last_report_at=utc(r.received_at),
                stale=r.host in stale,
                measured_GBps=merged.host_rates.get(r.host),
                endpoints=len(by_host.get(r.host, [])),
                probe_address=self._probe_address(r.host),
            )
            for r in sorted(index, key=lambda r: r.host)
        }
        fresh_deadlines = [r.received_at + self._ttl for r in index if r.host not in stale]
        return Snapshot(
            merged.version,
            merged.graph,
            topo,
            hosts,
            stale,
            gen,
            min(fresh_deadlines, default=float("inf")),
            by_host,
            graph_json,
            {
                "unlinked_hosts": merged.unlinked,
                "dropped_fabric_links": merged.dropped_fabric_links,
            },
        )

    def _probe_address(self, host: str) -> str | None:
        entry = self._reports.get(host)
        return entry[1].probe_address if entry else None

    def check_fabric(self, fabric: dict[str, Any]) -> None:
        """Raise PlannerError if ``fabric`` would not merge with the current reports."""
        snap = self.refresh() if self.current() is None else self._snapshot
        assert snap is not None
        with self._lock:
            fresh = {h: r for h, (_, r, _) in self._reports.items() if h not in snap.stale}
        merged = merge(fresh, fabric, snap.stale)
        if merged.graph["nodes"]:
            Topology.from_dict(merged.graph)
