"""The agent: discovery, probe server and scheduler, GPU copy timing, reporting, metrics."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from datetime import UTC, datetime
from typing import Any

from syncplan.agents.config import AgentConfig
from syncplan.agents.directory import PeerDirectory
from syncplan.agents.discovery import Discoverer
from syncplan.agents.gpucopy import CopyBandwidth, measure_gpu_copies
from syncplan.agents.metrics import AgentHTTP, AgentMetrics
from syncplan.agents.nvml import RealNVML, RecordedNVML
from syncplan.agents.probe import (
    PairResult,
    PeerBusy,
    ProbeError,
    ProbeServer,
    hello,
    probe_peer,
)
from syncplan.agents.procfs import ProcFS
from syncplan.agents.reporter import Reporter
from syncplan.agents.schedule import circle_rounds, my_pairs, next_cycle_start
from syncplan.agents.sysfs import SysFS
from syncplan.core.report import (
    MAX_BANDWIDTH_GBPS,
    MAX_LATENCY_US,
    MIN_BANDWIDTH_GBPS,
    HostReport,
    PeerMeasurement,
)

log = logging.getLogger("syncplan.agent")


class Agent:
    """A running agent. ``start()`` returns it; ``stop()`` shuts every part down."""

    def __init__(self, cfg: AgentConfig) -> None:
        self.cfg = cfg
        fixture = cfg.nvml_fixture
        self.discoverer = Discoverer(
            cfg.host,
            SysFS(cfg.sysfs_root),
            ProcFS(cfg.procfs_root),
            (lambda: RecordedNVML.load(fixture)) if fixture else RealNVML,
        )
        self.metrics = AgentMetrics()
        self.lock = threading.Lock()  # the host's probe lock: one session at a time
        self.stop_event = threading.Event()
        self.trigger_event = threading.Event()
        self._peers: dict[str, PeerMeasurement] = {}
        self._peers_lock = threading.Lock()
        self._latest: HostReport | None = None
        self._copies: CopyBandwidth | None = None
        self._threads: list[threading.Thread] = []
        self.server: ProbeServer | None = None
        self.http: AgentHTTP | None = None
        self.reporter: Reporter | None = None
        self.directory = (
            PeerDirectory(cfg.server, cfg.host, cfg.token, cfg.report_timeout_s)
            if cfg.server and not cfg.peers
            else None
        )

    # lifecycle --------------------------------------------------------------------------

    def start(self, *, loops: bool = True) -> Agent:
        cfg = self.cfg
        self.server = ProbeServer(
            cfg.host, cfg.bind, cfg.probe_port, lock=self.lock, on_result=self._record_served
        )
        if cfg.http_port is not None:
            self.http = AgentHTTP(
                self.metrics,
                cfg.http_bind,
                cfg.http_port,
                report=self._latest_json,
                trigger=self.trigger,
                control_token=cfg.control_token,
            )
        if cfg.server:
            os.makedirs(cfg.spool_dir, exist_ok=True)
            self.reporter = Reporter(
                cfg.server,
                cfg.host,
                cfg.token,
                cfg.spool_dir,
                timeout_s=cfg.report_timeout_s,
                backoff=cfg.backoff,
                on_delivered=self._delivered,
                on_failure=lambda _: self.metrics.report_failures.inc(),
            )
            self.reporter.start()
        if loops:
            for target, name in ((self._heartbeat_loop, "heartbeat"), (self._probe_loop, "prober")):
                t = threading.Thread(target=target, name=name, daemon=True)
                t.start()
                self._threads.append(t)
        log.info(
            "agent %s: probe server on %s:%d%s",
            cfg.host,
            *self.server.address,
            f", http on {self.http.address[0]}:{self.http.port}" if self.http else "",
        )
        return self

    def stop(self, flush_timeout_s: float = 2.0) -> None:
        self.stop_event.set()
        self.trigger_event.set()
        for t in self._threads:
            t.join(timeout=self.cfg.slot_s or 10)
        self._threads.clear()
        if self.reporter:
            self.reporter.stop(flush_timeout_s=flush_timeout_s)
        if self.http:
            self.http.stop()
        if self.server:
            self.server.stop()
        log.info("agent %s stopped", self.cfg.host)

    close = stop

    def trigger(self) -> None:
        """Run a probe cycle now (SIGUSR1, ``POST /v1/probe``)."""
        self.trigger_event.set()

    # reports ----------------------------------------------------------------------------

    def probe_address(self, report: HostReport | None = None) -> str | None:
        port = self.server.port if self.server else self.cfg.probe_port
        addr = self.cfg.advertise
        if not addr and self.cfg.bind not in ("0.0.0.0", "::", ""):
            addr = self.cfg.bind
        if not addr and report is not None:
            addr = next((n.address for n in report.nics if n.address), None)
        return f"{addr}:{port}" if addr else None

    def build_report(self) -> HostReport:
        rep = self.discoverer.discover()
        addr = self.probe_address(rep)
        nic_id = None
        if addr:
            ip = addr.rsplit(":", 1)[0]
            nic_id = next((f"nic{j}" for j, n in enumerate(rep.nics) if n.address == ip), None)
        if nic_id is None and len(rep.nics) == 1:
            nic_id = "nic0"
        with self._peers_lock:
            peers = [p.model_copy(update={"nic": nic_id}) for _, p in sorted(self._peers.items())]
        links = _apply_copies(rep, self._copies)
        rep = rep.model_copy(
            update={
                "peers": peers,
                "probe_address": addr,
                "links": links,
                "generated_at": datetime.now(UTC),
            }
        )
        self._latest = rep
        return rep

    def _latest_json(self) -> dict[str, Any] | None:
        return self._latest.model_dump(mode="json") if self._latest else None

    def report_now(self) -> HostReport:
        rep = self.build_report()
        if self.reporter:
            rep = self.reporter.submit(rep)
            self._latest = rep
        return rep

    def _delivered(self, seq: int) -> None:
        self.metrics.report_success.set(time.time())
        self.metrics.report_seq.set(seq)

    def _heartbeat_loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.report_now()
            except Exception:  # a daemon must survive a bad pass; the next one may work
                log.exception("building the report failed")
            self.stop_event.wait(self.cfg.interval_s)

    # GPU copies -------------------------------------------------------------------------

    def measure_gpus(self) -> None:
        if not self.cfg.gpu_copy or self.cfg.nvml_fixture:
            return
        try:
            self._copies = measure_gpu_copies()
        except Exception as exc:  # CUDA errors surface as RuntimeError subclasses
            log.warning("GPU copy measurement failed: %s", exc)
            self._copies = None
        if self._copies:
            for i, v in self._copies.d2h.items():
                self.metrics.gpu_copy.labels("d2h", f"gpu{i}", "host").set(v)
            for (i, j), v in self._copies.d2d.items():
                self.metrics.gpu_copy.labels("d2d", f"gpu{i}", f"gpu{j}").set(v)

    # probes -----------------------------------------------------------------------------

    def peers(self) -> dict[str, tuple[str, int]]:
        """The static ``--peers``, else the last list fetched from the service."""
        if self.cfg.peers or self.directory is None:
            return dict(self.cfg.peers)
        return dict(self.directory.peers)

    def refresh_peers(self) -> dict[str, tuple[str, int]]:
        """Fetch the peer list from the service (without ``--peers``); returns the peers."""
        if not self.cfg.peers and self.directory is not None:
            self.directory.refresh()
        return self.peers()

    def _record(self, r: PairResult) -> None:
        with self._peers_lock:
            old = self._peers.get(r.peer_host)
            self._peers[r.peer_host] = PeerMeasurement(
                peer_host=r.peer_host,
                bandwidth_GBps=min(max(r.bandwidth_GBps, MIN_BANDWIDTH_GBPS), MAX_BANDWIDTH_GBPS),
                latency_us=min(max(r.latency_us, 0.0), MAX_LATENCY_US),
                measured_at=datetime.fromtimestamp(r.measured_at, UTC),
                samples=(old.samples + 1) if old else 1,
            )
        self.metrics.probe_bandwidth.labels(r.peer_host).set(r.bandwidth_GBps)
        self.metrics.probe_latency.labels(r.peer_host).set(r.latency_us)
        self.metrics.probe_last.labels(r.peer_host).set(r.measured_at)
        log.info(
            "measured %s -> %s: %.4f GB/s, %.1f us",
            self.cfg.host,
            r.peer_host,
            r.bandwidth_GBps,
            r.latency_us,
        )

    def _record_served(self, r: PairResult) -> None:
        self._record(r)  # the responder's own direction: this host -> the initiator

    def run_cycle(self) -> float:
        """Run this host's share of one probe cycle; returns when the cycle ends (epoch s)."""
        slot = float(self.cfg.slot_s or 5.0)
        peers = self.peers()
        hosts = [self.cfg.host, *peers]
        rounds = circle_rounds(hosts)
        t0 = next_cycle_start(time.time(), slot)
        for r, peer, initiate in my_pairs(hosts, self.cfg.host):
            if not initiate or self.stop_event.is_set():
                continue
            start = t0 + r * slot
            self.stop_event.wait(max(0.0, start - time.time()))
            self._probe_in_slot(peer, peers[peer], start + slot)
        return t0 + len(rounds) * slot

    def _probe_in_slot(self, peer: str, addr: tuple[str, int], slot_end: float) -> None:
        need = 2 * self.cfg.probe.duration_s + 0.5
        last_err: Exception | None = None
        while not self.stop_event.is_set() and time.time() + need < slot_end:
            try:
                self._record(
                    probe_peer(
                        self.cfg.host, peer, addr[0], addr[1], self.cfg.probe, lock=self.lock
                    )
                )
                return
            except (PeerBusy, ProbeError) as exc:
                last_err = exc
                self.stop_event.wait(0.3)
        if not self.stop_event.is_set():
            self.metrics.probe_failures.labels(peer).inc()
            log.warning("probe of %s failed in its slot: %s", peer, last_err or "no time left")

    def _probe_loop(self) -> None:
        self.measure_gpus()
        interval = self.cfg.probe_interval_s
        next_at = next_cycle_start(time.time(), interval, lead_s=0.0)
        while not self.stop_event.is_set():
            self.trigger_event.wait(max(0.0, next_at - time.time()))
            if self.stop_event.is_set():
                return
            self.trigger_event.clear()
            if self.refresh_peers():
                try:
                    self.run_cycle()
                except Exception:
                    log.exception("probe cycle failed")
                with contextlib.suppress(Exception):
                    self.report_now()
            next_at = next_cycle_start(time.time(), interval, lead_s=0.0)

    def wait_for_peers(self, timeout_s: float) -> list[str]:
        """Wait until every peer's probe server answers; returns those that never did."""
        pending = dict(self.peers())
        deadline = time.time() + timeout_s
        while pending and not self.stop_event.is_set():
            for name, (addr, port) in list(pending.items()):
                with contextlib.suppress(OSError, ProbeError):
                    hello(addr, port, timeout_s=1.0)
                    del pending[name]
            if not pending or time.time() >= deadline:
                break
            self.stop_event.wait(0.2)
        if pending:
            log.warning(
                "peers not answering after %.0f s: %s", timeout_s, ", ".join(sorted(pending))
            )
        return sorted(pending)

    def once(self) -> HostReport:
        """Discover, measure every peer once (serving peers until the cycle is over), report.

        Agents started together agree on the cycle only once all their probe servers are up,
        so this waits (``peer_wait_s``) for every peer to answer before the cycle starts.
        """
        self.measure_gpus()
        if self.refresh_peers():
            self.wait_for_peers(self.cfg.peer_wait_s)
            end = self.run_cycle()
            grace = float(self.cfg.slot_s or 5.0)
            self.stop_event.wait(max(0.0, end + grace - time.time()))
        return self.report_now()


def _apply_copies(rep: HostReport, copies: CopyBandwidth | None) -> list:
    if not copies:
        return list(rep.links)
    out = []
    for ln in rep.links:
        m = None
        ends = {ln.src, ln.dst}
        if ln.kind == "nvlink" and ln.src.startswith("gpu") and ln.dst.startswith("gpu"):
            i, j = int(ln.src[3:]), int(ln.dst[3:])
            vals = [v for v in (copies.d2d.get((i, j)), copies.d2d.get((j, i))) if v]
            m = min(vals) if vals else None
        elif ln.kind == "pcie":
            gpu = next((e for e in ends if e.startswith("gpu")), None)
            if gpu is not None:
                i = int(gpu[3:])
                vals = [v for v in (copies.d2h.get(i), copies.h2d.get(i)) if v]
                m = min(vals) if vals else None
        out.append(ln.model_copy(update={"measured_bandwidth_GBps": m}) if m else ln)
    return out
