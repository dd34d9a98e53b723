"""The service and the agents of a loop run: start them on a testbed, talk to the service
from inside its namespace, trigger a probe cycle and wait until every host is measured.

``restart_service`` starts the service again on the same store with other cost-model
settings (the loop's calibration, ``calibrate.py``): the merged graph lives in the store, so
the agents need not measure again.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.testbed import TestbedError
from syncplan.testbed.emulator import child_env, kill_recorded, spawn
from syncplan.testbed.netns import alive, sh
from syncplan.testbed.state import State

SERVICE_PORT = 8080
PROBE_PORT = 7470
GBPS_TO_MBIT = 8000.0  # 1 GB/s = 8000 Mbit/s


class Service:
    """Requests to the service, issued from inside the service namespace."""

    def __init__(self, state: State, work: Path, job_token: str) -> None:
        assert state.service is not None
        self.netns = state.service.netns
        self.base = f"http://{state.service.addr}:{SERVICE_PORT}"
        self.work = work
        self.token = job_token

    def call(
        self, method: str, path: str, body: Any = None, timeout_s: float = 120.0
    ) -> tuple[int, Any]:
        """(status, body); TestbedError if the service cannot be reached."""
        tag = secrets.token_hex(4)
        out = self.work / f"resp-{tag}.json"
        argv = [
            "ip",
            "netns",
            "exec",
            self.netns,
            sys.executable,
            "-m",
            "syncplan.testbed.svcclient",
            method,
            self.base + path,
            "--token",
            self.token,
            "--timeout",
            str(timeout_s),
            "--out",
            str(out),
        ]
        if body is not None:
            req = self.work / f"req-{tag}.json"
            atomic_write_json(req, body)
            argv += ["--body", str(req)]
        try:
            res = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout_s + 30, env=child_env()
            )
        except subprocess.TimeoutExpired as exc:
            raise TestbedError(f"{method} {path}: no answer within {timeout_s:g} s") from exc
        finally:
            if body is not None:
                req.unlink(missing_ok=True)
        if res.returncode != 0:
            raise TestbedError(f"{method} {path}: {res.stderr.strip() or res.returncode}")
        data = json.loads(out.read_text())
        out.unlink(missing_ok=True)
        return int(data["status"]), data["body"]

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.call(method, path, body)
        if not 200 <= status < 300:
            raise TestbedError(f"{method} {path}: HTTP {status}: {json.dumps(data)[:400]}")
        return data


def _start_service(
    state: State,
    work: Path,
    tokens: dict[str, str],
    min_step_us: float,
    message_overhead_us: float = 0.0,
    message_cores: int = 0,
    exchange_overhead_us: float = 0.0,
    switch_overhead: float = 0.0,
) -> None:
    assert state.service is not None
    db = work / "service.db"
    argv = [
        sys.executable,
        "-m",
        "syncplan",
        "serve",
        "--host",
        state.service.addr,
        "--port",
        str(SERVICE_PORT),
        "--database-url",
        f"sqlite:///{db}",
        "--log-level",
        "warning",
    ]
    env = {
        "SYNCPLAN_ADMIN_TOKEN": tokens["admin"],
        "SYNCPLAN_AGENT_SECRET": tokens["agent"],
        "SYNCPLAN_JOB_TOKEN": tokens["job"],
        "SYNCPLAN_STALE_AFTER_S": "600",
        "SYNCPLAN_MIN_STEP_US": str(min_step_us),
        "SYNCPLAN_MESSAGE_OVERHEAD_US": str(message_overhead_us),
        "SYNCPLAN_MESSAGE_CORES": str(message_cores),
        "SYNCPLAN_EXCHANGE_OVERHEAD_US": str(exchange_overhead_us),
        "SYNCPLAN_SWITCH_OVERHEAD": str(switch_overhead),
    }
    spawn(state, state.service.netns, argv, "service", work / "service.log", env=env)


def _start_agents(
    state: State, work: Path, secret: str, server: str, probe_duration_s: float
) -> list[int]:
    """One agent per host, each with its own host token (api/identity.py)."""
    from syncplan.api.identity import host_token

    pids = []
    for h in state.hosts:
        peers = ",".join(f"{o.name}={o.addr}:{PROBE_PORT}" for o in state.hosts if o is not h)
        argv = [
            sys.executable,
            "-m",
            "syncplan",
            "agent",
            "--server",
            server,
            "--host-name",
            h.name,
            "--interval",
            "2",
            # one cycle on demand (SIGUSR1), none by the clock while all-reduce runs
            "--probe-interval",
            "1e9",
            "--probe-duration",
            f"{probe_duration_s:g}",
            "--peers",
            peers,
            "--bind",
            h.addr,
            "--probe-port",
            str(PROBE_PORT),
            "--http-port",
            "-1",
            "--no-gpu-copy",
            "--spool-dir",
            str(work / f"spool-{h.name}"),
        ]
        proc = spawn(
            state,
            h.netns,
            argv,
            "agent",
            work / f"agent-{h.name}.log",
            env={"SYNCPLAN_AGENT_TOKEN": host_token(secret, h.name)},
        )
        pids.append(proc.pid)
    return pids


@dataclass
class Cluster:
    """The service and the agents running on a testbed: where their logs go, the tokens,
    the service's URL, a client for it, and the agents' probe slot."""

    work: Path
    tokens: dict[str, str]
    server: str
    svc: Service
    slot_s: float
    rounds: int  # probe rounds in one cycle (every pair once)


def start_cluster(
    state: State,
    probe_duration_s: float,
    min_step_us: float,
    progress: Callable[[str], None],
    message_overhead_us: float = 0.0,
    message_cores: int = 0,
    exchange_overhead_us: float = 0.0,
    switch_overhead: float = 0.0,
) -> Cluster:
    """Start ``syncplan serve`` and one agent per host with fresh tokens; wait until all
    listen."""
    assert state.service is not None
    work = (state.path.parent if state.path else Path(".")) / f"{state.prefix}-logs"
    work.mkdir(parents=True, exist_ok=True)
    # tokens["agent"] is the service's agent secret; each agent gets its host token
    tokens = {k: f"{k}-{secrets.token_hex(16)}" for k in ("admin", "agent", "job")}
    _start_service(
        state,
        work,
        tokens,
        min_step_us,
        message_overhead_us,
        message_cores,
        exchange_overhead_us,
        switch_overhead,
    )
    server = f"http://{state.service.addr}:{SERVICE_PORT}"
    _start_agents(state, work, tokens["agent"], server, probe_duration_s)
    _wait_listening(state, 60.0, progress)
    n = len(state.hosts)
    return Cluster(
        work,
        tokens,
        server,
        Service(state, work, tokens["job"]),
        round(2 * probe_duration_s + 3.0, 3),
        n - 1 + n % 2,
    )


def _wait_listening(
    state: State, timeout_s: float, say: Callable[[str], None], agents: bool = True
) -> None:
    """Wait until the service and (``agents``) every agent's probe server accept
    connections."""
    assert state.service is not None
    want = [(state.service.netns, SERVICE_PORT)]
    if agents:
        want += [(h.netns, PROBE_PORT) for h in state.hosts]
    deadline = time.monotonic() + timeout_s
    pending = list(want)
    while pending:
        pending = [
            (ns, port)
            for ns, port in pending
            if f":{port} " not in sh(["ip", "netns", "exec", ns, "ss", "-Htln"], check=False)
        ]
        if not pending:
            break
        for rec in state.processes:
            if rec.role in ("service", "agent") and not alive(rec.pid, rec.start_ticks):
                raise TestbedError(
                    f"{rec.role} in {rec.netns} exited; log: {rec.log}\n" + _tail(rec.log)
                )
        if time.monotonic() > deadline:
            raise TestbedError(f"not listening after {timeout_s:g} s: {pending}")
        time.sleep(0.3)
    say(f"service and {len(state.hosts)} agents listening" if agents else "service listening")


def restart_service(
    state: State,
    cluster: Cluster,
    min_step_us: float,
    message_overhead_us: float,
    message_cores: int,
    say: Callable[[str], None],
    exchange_overhead_us: float = 0.0,
    switch_overhead: float = 0.0,
) -> None:
    """Stop the service and start it again on the same store and tokens with these
    cost-model settings; returns once it listens."""
    kill_recorded(state, "service")
    _start_service(
        state,
        cluster.work,
        cluster.tokens,
        min_step_us,
        message_overhead_us,
        message_cores,
        exchange_overhead_us,
        switch_overhead,
    )
    _wait_listening(state, 60.0, say, agents=False)


def _tail(path: str | None, n: int = 12) -> str:
    try:
        return "\n".join(Path(path or "").read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def trigger_cycle(state: State, slot_s: float) -> None:
    """SIGUSR1 every agent early in a probe slot, so all of them pick the same cycle start
    (the next slot boundary at least 0.5 s away)."""
    phase = time.time() % slot_s
    if phase > slot_s * 0.6:
        time.sleep(slot_s - phase + 0.05)
    for rec in state.processes:
        if rec.role == "agent" and alive(rec.pid, rec.start_ticks):
            os.kill(rec.pid, signal.SIGUSR1)


def measured_rates(topology: dict[str, Any], hosts: Sequence[str]) -> dict[str, float | None]:
    """Each host's measured network rate (Mbit/s) in the service's merged graph: the
    bandwidth of the link from its NIC (or endpoint) to a node outside the host."""
    nodes = {n["id"]: n for n in topology.get("nodes", [])}
    out: dict[str, float | None] = {h: None for h in hosts}
    for lk in topology.get("links", []):
        a, b = nodes.get(lk["src"], {}), nodes.get(lk["dst"], {})
        ha, hb = a.get("host"), b.get("host")
        if ha != hb:
            for h in (ha, hb):
                if h in out:
                    out[h] = round(lk["bandwidth_GBps"] * GBPS_TO_MBIT, 2)
    return out


def wait_measured(
    svc: Service, state: State, timeout_s: float, say: Callable[[str], None]
) -> dict[str, Any]:
    """Poll ``GET /v1/topology`` until every host reports a measurement of every peer and
    the graph holds a measured rate for each; returns that topology document."""
    names = [h.name for h in state.hosts]
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        status, topo = svc.call("GET", "/v1/topology")
        status_a, _agents = svc.call("GET", "/v1/agents")
        done = []
        if status == 200 and status_a == 200:
            rates = measured_rates(topo.get("graph", topo), names)
            hosts = topo.get("hosts", {})
            done = [
                h
                for h in names
                if h in hosts and rates.get(h) and _peer_count(state, h) >= len(names) - 1
            ]
            msg = f"measured {len(done)}/{len(names)} hosts (reporting {len(hosts)}/{len(names)})"
            if msg != last:
                say(msg)
                last = msg
            if len(done) == len(names):
                return topo
        if time.monotonic() > deadline:
            raise TestbedError(
                f"agents did not measure every host within {timeout_s:g} s "
                f"({last or 'service not answering'})"
            )
        time.sleep(2.0)


def _peer_count(state: State, host: str) -> int:
    """Peers the host's agent has recorded a measurement for (from its log)."""
    rec = next(
        (
            r
            for r in state.processes
            if r.role == "agent" and r.netns and r.netns.endswith("-" + host)
        ),
        None,
    )
    if rec is None or not rec.log:
        return 0
    try:
        text = Path(rec.log).read_text(errors="replace")
    except OSError:
        return 0
    return len(
        {
            line.split(" -> ", 1)[1].split(":", 1)[0]
            for line in text.splitlines()
            if f"measured {host} -> " in line
        }
    )


def current_graph(svc: Service, hosts: Sequence[str], timeout_s: float = 60.0) -> dict[str, Any]:
    """``GET /v1/topology`` once it answers with a measured rate for every host (after
    ``restart_service``: the merged graph comes back from the store, no new probes)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, topo = svc.call("GET", "/v1/topology")
        if status == 200 and all(measured_rates(topo.get("graph", topo), hosts).values()):
            return topo
        if time.monotonic() > deadline:
            raise TestbedError(
                f"the service has no measured graph {timeout_s:g} s after its "
                f"restart (HTTP {status})"
            )
        time.sleep(1.0)
