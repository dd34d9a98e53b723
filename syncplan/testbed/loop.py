"""The whole loop on an emulated cluster: measure (agents), plan (service), run (executor).

``run_loop`` brings a testbed up, starts ``syncplan serve`` in the service namespace and
``syncplan agent`` in every host namespace, triggers one probe cycle, waits until the
service's merged graph holds a measured rate for every host, registers one job per
algorithm (``PUT /v1/jobs/{id}``, ranks ``{host}/cpu0``, ``bucket_sizes`` = the sizes),
fetches each job's plans (``GET /v1/jobs/{id}/plan``), checks them with the verifier against
the service's own graph, times them against gloo's ``all_reduce`` (``runner``), and writes
the results with the agents' measured rates next to the shaped ones. The planner never sees
the scenario's rates: they reach it only through the agents' probes.

The testbed is removed at the end on every path (``keep`` leaves it up).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncplan.testbed import TestbedError
from syncplan.testbed.emulator import child_env, down, kill_recorded, self_record, spawn, up
from syncplan.testbed.netns import alive, sh
from syncplan.testbed.runner import FULL_SIZES, RunConfig, run_benchmark
from syncplan.testbed.scenario import Scenario
from syncplan.testbed.state import State, atomic_write_json

ALGORITHMS = ("ring", "hierarchical", "forest", "auto")
SERVICE_PORT = 8080
PROBE_PORT = 7470
GBPS_TO_MBIT = 8000.0  # 1 GB/s = 8000 Mbit/s
# The cost-model settings the loop's service plans with (docs/testbed.md, "Issue 18: shared
# cores"): fitted by bench/testbed/fit_message_overhead.py (squared log error) to the 23 plans
# timed at 4 KiB - 1 MiB by the loop runs on this machine before the message term
# (bench/results/testbed-small-{homogeneous,one-slow,direct}.json, 8 ranks on 2 cores):
# o = 121 us per message end, the ends of a step shared by the machine's cores, and a step
# floor m = 50 us (bench/results/testbed-message-overhead-fit.json). Before the message term
# the step floor alone was 1,000 us (MIN_STEP_US_ALONE): 8 ranks x 2 ends x 121 us / 2 cores
# is about that for a ring step.
MIN_STEP_US = 50.0
MESSAGE_OVERHEAD_US = 121.0
MIN_STEP_US_ALONE = 1000.0


def machine_cores() -> int:
    """The CPU cores every emulated host's rank shares (one machine runs them all)."""
    return os.cpu_count() or 1


@dataclass
class LoopConfig:
    """Settings of one loop run; validated on creation."""

    sizes: Sequence[int] = FULL_SIZES
    reps: int = 3
    warmup: int = 0
    algorithms: Sequence[str] = ALGORITHMS
    probe_duration_s: float = 1.0  # per direction, per pair
    measure_timeout_s: float = 300.0  # agents start -> every host measured
    run_timeout_s: float | None = None
    # the service's SYNCPLAN_MIN_STEP_US: the least time a step of the gloo executor takes
    # over these shaped TCP links, whatever the link latency the agents measure (docs/testbed.md)
    min_step_us: float = MIN_STEP_US
    # the service's SYNCPLAN_MESSAGE_OVERHEAD_US and SYNCPLAN_MESSAGE_CORES: every host's
    # rank shares this machine's cores, so a step pays o x its message ends / cores
    message_overhead_us: float = MESSAGE_OVERHEAD_US
    message_cores: int = field(default_factory=machine_cores)
    extra: dict[str, Any] = field(default_factory=dict)  # stored in the results (e.g. load)

    def __post_init__(self) -> None:
        RunConfig(sizes=self.sizes, reps=self.reps, warmup=self.warmup)  # same checks
        if not self.algorithms:
            raise TestbedError("at least one algorithm is needed")
        if not 0.2 <= self.probe_duration_s <= 10:
            raise TestbedError(f"probe duration must be in 0.2..10 s, got {self.probe_duration_s}")
        if self.measure_timeout_s <= 0:
            raise TestbedError("measure timeout must be positive")
        if not 0 <= self.min_step_us <= 1e6:
            raise TestbedError(f"min step must be in 0..1e6 us, got {self.min_step_us}")
        if not 0 <= self.message_overhead_us <= 1e6:
            raise TestbedError("message overhead must be in 0..1e6 us, got "
                               f"{self.message_overhead_us}")
        if isinstance(self.message_cores, bool) or not isinstance(self.message_cores, int) \
                or self.message_cores < 0:
            raise TestbedError(f"message cores must be a whole number >= 0, got "
                               f"{self.message_cores!r}")


class Service:
    """Requests to the service, issued from inside the service namespace."""

    def __init__(self, state: State, work: Path, job_token: str) -> None:
        assert state.service is not None
        self.netns = state.service.netns
        self.base = f"http://{state.service.addr}:{SERVICE_PORT}"
        self.work = work
        self.token = job_token

    def call(self, method: str, path: str, body: Any = None,
             timeout_s: float = 120.0) -> tuple[int, Any]:
        """(status, body); TestbedError if the service cannot be reached."""
        tag = secrets.token_hex(4)
        out = self.work / f"resp-{tag}.json"
        argv = ["ip", "netns", "exec", self.netns, sys.executable, "-m",
                "syncplan.testbed.svcclient", method, self.base + path, "--token", self.token,
                "--timeout", str(timeout_s), "--out", str(out)]
        if body is not None:
            req = self.work / f"req-{tag}.json"
            atomic_write_json(req, body)
            argv += ["--body", str(req)]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s + 30,
                                 env=child_env())
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


def _start_service(state: State, work: Path, tokens: dict[str, str],
                   min_step_us: float, message_overhead_us: float = 0.0,
                   message_cores: int = 0) -> None:
    assert state.service is not None
    db = work / "service.db"
    argv = [sys.executable, "-m", "syncplan", "serve", "--host", state.service.addr,
            "--port", str(SERVICE_PORT), "--database-url", f"sqlite:///{db}",
            "--log-level", "warning"]
    env = {"SYNCPLAN_ADMIN_TOKEN": tokens["admin"], "SYNCPLAN_AGENT_SECRET": tokens["agent"],
           "SYNCPLAN_JOB_TOKEN": tokens["job"], "SYNCPLAN_STALE_AFTER_S": "600",
           "SYNCPLAN_MIN_STEP_US": str(min_step_us),
           "SYNCPLAN_MESSAGE_OVERHEAD_US": str(message_overhead_us),
           "SYNCPLAN_MESSAGE_CORES": str(message_cores)}
    spawn(state, state.service.netns, argv, "service", work / "service.log", env=env)


def _start_agents(state: State, work: Path, secret: str, server: str,
                  probe_duration_s: float) -> list[int]:
    """One agent per host, each with its own host token (api/identity.py)."""
    from api.identity import host_token

    pids = []
    for h in state.hosts:
        peers = ",".join(f"{o.name}={o.addr}:{PROBE_PORT}" for o in state.hosts if o is not h)
        argv = [sys.executable, "-m", "syncplan", "agent", "--server", server,
                "--host-name", h.name, "--interval", "2",
                # one cycle on demand (SIGUSR1), none by the clock while all-reduce runs
                "--probe-interval", "1e9", "--probe-duration", f"{probe_duration_s:g}",
                "--peers", peers, "--bind", h.addr, "--probe-port", str(PROBE_PORT),
                "--http-port", "-1", "--no-gpu-copy", "--spool-dir", str(work / f"spool-{h.name}")]
        proc = spawn(state, h.netns, argv, "agent", work / f"agent-{h.name}.log",
                     env={"SYNCPLAN_AGENT_TOKEN": host_token(secret, h.name)})
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


def start_cluster(state: State, probe_duration_s: float, min_step_us: float,
                  progress: Callable[[str], None], message_overhead_us: float = 0.0,
                  message_cores: int = 0) -> Cluster:
    """Start ``syncplan serve`` and one agent per host with fresh tokens; wait until all
    listen."""
    assert state.service is not None
    work = (state.path.parent if state.path else Path(".")) / f"{state.prefix}-logs"
    work.mkdir(parents=True, exist_ok=True)
    # tokens["agent"] is the service's agent secret; each agent gets its host token
    tokens = {k: f"{k}-{secrets.token_hex(16)}" for k in ("admin", "agent", "job")}
    _start_service(state, work, tokens, min_step_us, message_overhead_us, message_cores)
    server = f"http://{state.service.addr}:{SERVICE_PORT}"
    _start_agents(state, work, tokens["agent"], server, probe_duration_s)
    _wait_listening(state, 60.0, progress)
    n = len(state.hosts)
    return Cluster(work, tokens, server, Service(state, work, tokens["job"]),
                   round(2 * probe_duration_s + 3.0, 3), n - 1 + n % 2)


def _wait_listening(state: State, timeout_s: float, say: Callable[[str], None]) -> None:
    """Wait until the service and every agent's probe server accept connections."""
    assert state.service is not None
    want = [(state.service.netns, SERVICE_PORT)] + [(h.netns, PROBE_PORT) for h in state.hosts]
    deadline = time.monotonic() + timeout_s
    pending = list(want)
    while pending:
        pending = [(ns, port) for ns, port in pending
                   if f":{port} " not in sh(["ip", "netns", "exec", ns, "ss", "-Htln"],
                                            check=False)]
        if not pending:
            break
        for rec in state.processes:
            if rec.role in ("service", "agent") and not alive(rec.pid, rec.start_ticks):
                raise TestbedError(f"{rec.role} in {rec.netns} exited; log: {rec.log}\n"
                                   + _tail(rec.log))
        if time.monotonic() > deadline:
            raise TestbedError(f"not listening after {timeout_s:g} s: {pending}")
        time.sleep(0.3)
    say(f"service and {len(state.hosts)} agents listening")


def _tail(path: str | None, n: int = 12) -> str:
    try:
        return "\n".join(Path(path or "").read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def _trigger_cycle(state: State, slot_s: float) -> None:
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


def wait_measured(svc: Service, state: State, timeout_s: float,
                  say: Callable[[str], None]) -> dict[str, Any]:
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
            done = [h for h in names if h in hosts and rates.get(h)
                    and _peer_count(state, h) >= len(names) - 1]
            msg = (f"measured {len(done)}/{len(names)} hosts"
                   f" (reporting {len(hosts)}/{len(names)})")
            if msg != last:
                say(msg)
                last = msg
            if len(done) == len(names):
                return topo
        if time.monotonic() > deadline:
            raise TestbedError(f"agents did not measure every host within {timeout_s:g} s "
                               f"({last or 'service not answering'})")
        time.sleep(2.0)


def _peer_count(state: State, host: str) -> int:
    """Peers the host's agent has recorded a measurement for (from its log)."""
    rec = next((r for r in state.processes if r.role == "agent" and r.netns
                and r.netns.endswith("-" + host)), None)
    if rec is None or not rec.log:
        return 0
    try:
        text = Path(rec.log).read_text(errors="replace")
    except OSError:
        return 0
    return len({line.split(" -> ", 1)[1].split(":", 1)[0] for line in text.splitlines()
                if f"measured {host} -> " in line})


def fetch_plans(svc: Service, state: State, topology: dict[str, Any], cfg: LoopConfig,
                out_dir: Path, say: Callable[[str], None]) -> list[Path]:
    """Register one job per algorithm, fetch its plans, verify them, write them to files."""
    from planner.topology import Topology
    from planner.verify import verify_plan

    topo = Topology.from_dict(topology)
    ranks = [f"{h.name}/cpu0" for h in state.hosts]
    paths = []
    for algo in cfg.algorithms:
        job = f"testbed-{algo}"
        svc.ok("PUT", f"/v1/jobs/{job}", {"ranks": ranks, "bucket_sizes": list(cfg.sizes),
                                           "algorithm": algo})
        answer = svc.ok("GET", f"/v1/jobs/{job}/plan")
        docs = answer.get("plans", [answer])
        if len(docs) != len(cfg.sizes):
            raise TestbedError(f"job {job}: {len(docs)} plans for {len(cfg.sizes)} sizes")
        for size, doc in zip(cfg.sizes, docs, strict=True):
            # simulated under the settings the service priced the plan with
            rep = verify_plan(doc, topo, min_step_s=doc.get("min_step_s", 0.0),
                              message_overhead_s=doc.get("message_overhead_s", 0.0),
                              message_cores=doc.get("message_cores"))
            if not rep.ok:
                raise TestbedError(f"{algo} plan {doc.get('plan_id')} for {size} bytes from the "
                                   f"service fails verification: {rep.error}")
            doc["label"] = algo
            doc["job_id"] = job
            doc["topology_version"] = answer.get("topology_version")
            doc["verified_time_s"] = rep.simulated_time_s
            path = out_dir / f"{algo}-{size}.json"
            atomic_write_json(path, doc)
            paths.append(path)
            say(f"{algo} plan ({doc['algorithm']}) for {size / 2**20:g} MiB: predicted "
                f"{doc['predicted_time_s']:.3f} s, verified")
    return paths


def summarise(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per size and algorithm: median, speed-up over gloo, measured / predicted."""
    gloo = {e["size_bytes"]: e["median_s"] for e in result["results"]
            if e["algorithm"] == "gloo"}
    rows = []
    for e in result["results"]:
        row = {"size_bytes": e["size_bytes"], "algorithm": e["algorithm"],
               "plan_algorithm": e.get("plan_algorithm"), "median_s": e["median_s"],
               "correct": e["correct"]}
        g = gloo.get(e["size_bytes"])
        if g and e["median_s"] > 0:
            row["speedup_over_gloo"] = round(g / e["median_s"], 3)
        pred = e.get("predicted_time_s")
        if pred:
            row["predicted_time_s"] = pred
            row["measured_over_predicted"] = round(e["median_s"] / pred, 3)
        rows.append(row)
    return rows


def cpu_load() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return []


def run_loop(scenario: Scenario, state_dir: Path, cfg: LoopConfig, out_path: Path,
             say: Callable[[str], None] = print, keep: bool = False) -> dict[str, Any]:
    """The whole loop on a fresh testbed of ``scenario``; writes and returns the results."""
    tag = f"[{scenario.name}]"

    def progress(msg: str) -> None:
        say(msg if msg.startswith("[") else f"{tag} {msg}")

    started = time.monotonic()
    load_before = cpu_load()
    with running_testbed(scenario, state_dir, progress, keep) as state:
        cluster = start_cluster(state, cfg.probe_duration_s, cfg.min_step_us, progress,
                                cfg.message_overhead_us, cfg.message_cores)
        work, svc = cluster.work, cluster.svc
        t_measure = time.monotonic()
        _trigger_cycle(state, cluster.slot_s)
        progress(f"probe cycle triggered ({cluster.rounds} rounds of {cluster.slot_s:g} s)")
        topology = wait_measured(svc, state, cfg.measure_timeout_s, progress)
        measure_s = time.monotonic() - t_measure
        rates = measured_rates(topology, [h.name for h in state.hosts])
        agents = []
        for h in state.hosts:
            m = rates[h.name]
            agents.append({"host": h.name, "shaped_mbit": h.rate_mbit, "measured_mbit": m,
                           "ratio": round(m / h.rate_mbit, 4) if m else None})
            progress(f"  {h.name}: measured {m} Mbit/s, shaped {h.rate_mbit:g} "
                     f"({(m or 0) / h.rate_mbit:.1%})")
        kill_recorded(state, "agent")  # nothing but the benchmark on the links from here
        plan_dir = work / "plans"
        plans = fetch_plans(svc, state, topology, cfg, plan_dir, progress)
        run_cfg = RunConfig(sizes=cfg.sizes, reps=cfg.reps, warmup=cfg.warmup, plans=plans,
                            timeout_s=cfg.run_timeout_s)
        result = run_benchmark(state, scenario, run_cfg, out_path, progress=progress)
        result["loop"] = {
            "topology_version": topology.get("version"),
            "measure_s": round(measure_s, 1),
            "probe_duration_s": cfg.probe_duration_s,
            "min_step_us": cfg.min_step_us,
            "message_overhead_us": cfg.message_overhead_us,
            "message_cores": cfg.message_cores,
            "algorithms": list(cfg.algorithms),
            "agents": agents,
            "graph": {"nodes": topology.get("nodes"), "links": topology.get("links")},
            "load_before": load_before, "load_after": cpu_load(),
            **cfg.extra,
        }
        result["summary"] = summarise(result)
        result["wall_s"] = round(time.monotonic() - started, 1)
        atomic_write_json(out_path, result)
        return result


@contextlib.contextmanager
def running_testbed(scenario: Scenario, state_dir: Path, progress: Callable[[str], None],
                    keep: bool = False) -> Iterator[State]:
    """A fresh testbed of ``scenario``, recorded as this run's; removed on every exit
    (``keep``: left up)."""
    state = up(scenario, state_dir)
    progress(f"testbed up: prefix {state.prefix}, {len(state.hosts)} hosts")
    state.processes.append(self_record("run"))
    state.save()
    try:
        yield state
    finally:
        if keep:
            kill_recorded(state, "run")
        else:
            removed = down(state)
            progress(f"testbed down: removed {len(removed)} namespaces")

