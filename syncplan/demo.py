"""``syncplan demo``: the whole loop on this machine in under a minute.

It starts the service (SQLite in a temporary directory), one agent per emulated host on
loopback (each measures the others with its probe server), waits until the service's graph
holds every host's measured rate, registers a job whose ranks are those hosts' endpoints,
and runs the job: one gloo process per host (SYNCPLAN_HOST names the host, as on a real
cluster), which fetches the job's plan through the executor and times it against gloo's own
all_reduce. Everything it started is stopped on every exit.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncplan.core.errors import CLIError
from syncplan.demo_testbed import DEMO_SIZE, emulated_or_reason, run_emulated, unavailable
from syncplan.extras import install_hint

JOB_ID = "demo"
PROBE_DURATION_S = 0.25
PROBE_SLOT_S = 1.5


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="service + local agents + a gloo job running the service's plan",
        description="Start the service, one agent per emulated host and a gloo job of one "
        "process per host on this machine; print the plan and its measured time against "
        "gloo's all_reduce. As root, the hosts are network namespaces on one switch with one "
        "slow link (about 2 minutes); otherwise processes on loopback (about 40 s). Needs "
        "the api and executor extras.",
    )
    p.add_argument(
        "--on",
        choices=("auto", "emulated", "loopback"),
        default="auto",
        help="emulated: a cluster of network namespaces with one slow link (root); loopback: "
        "processes on this machine's loopback; auto (default): emulated when root",
    )
    p.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="hosts = processes (2..8; default 8 emulated, 4 on loopback)",
    )
    p.add_argument(
        "--size",
        default=None,
        help=f"all-reduce buffer size (default {DEMO_SIZE} emulated, 16MiB on loopback)",
    )
    p.add_argument("--out", type=Path, help="emulated: write the results as JSON to this file")
    p.add_argument(
        "--port",
        type=int,
        default=0,
        help="service port (default: a free one; the service's usual is 8080)",
    )
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds for the whole demo (default 600)"
    )
    p.add_argument(
        "--keep", action="store_true", help="keep the working directory (logs, SQLite file)"
    )
    p.set_defaults(func=cmd_demo)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class _Run:
    """The demo's processes, logs and deadline."""

    work: Path
    deadline: float
    say: Callable[[str], None]
    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], stdout: int | None = None
    ) -> subprocess.Popen[bytes]:
        log = self.work / f"{name}.log"
        with log.open("wb") as f:
            proc = subprocess.Popen(
                argv,
                stdout=stdout if stdout is not None else f,
                stderr=f,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env},
                start_new_session=True,
            )
        self.procs.append((name, proc, log))
        return proc

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check_alive(self) -> None:
        for name, proc, log in self.procs:
            if proc.poll() is not None and not name.startswith("rank"):
                raise CLIError(
                    f"{name} exited with status {proc.returncode}: {_last_line(log)} (log: {log})"
                )

    def wait(self, what: str, done: Callable[[], Any], every: float = 0.3) -> Any:
        while True:
            value = done()
            if value:
                return value
            self.check_alive()
            if self.left() <= 0:
                raise CLIError(
                    f"timed out waiting for {what} (logs in {self.work}; --keep keeps them)"
                )
            time.sleep(every)

    def stop(self) -> None:
        for _, proc, _ in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + 10
        for _, proc, _ in self.procs:
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


@contextmanager
def _workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="syncplan-demo-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from syncplan.planner.sizes import format_size, format_time, parse_size

    emulated = args.on == "emulated" or (
        args.on == "auto" and emulated_or_reason(lambda m: print(m, flush=True))
    )
    if args.on == "emulated" and (reason := unavailable()) is not None:
        raise CLIError(f"--on emulated: {reason}")
    hosts = args.hosts if args.hosts is not None else 8 if emulated else 4
    if not 2 <= hosts <= 8:
        raise CLIError(f"--hosts must be in 2..8, got {hosts}")
    if not args.timeout > 0:
        raise CLIError("--timeout must be > 0")
    size_text = args.size or (DEMO_SIZE if emulated else "16MiB")
    size = parse_size(size_text)
    if size % 4:
        raise CLIError(f"--size {size_text}: must be a whole number of float32 elements")
    if emulated:
        return run_emulated(hosts, size, args.timeout, args.keep, args.out)
    for module, _extra in (("httpx", "api"), ("uvicorn", "api"), ("torch", "executor")):
        try:
            __import__(module)
        except ImportError:
            raise CLIError(f"needs {module}: {install_hint(module)}") from None
    port = args.port or _free_port()
    if _listening(port):
        raise CLIError(f"port {port} is in use (choose another with --port)")
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t0:5.1f} s] {msg}", flush=True)

    with _workdir(args.keep) as work:
        run = _Run(work, t0 + args.timeout, say)
        try:
            result = _demo(run, hosts, port, size)
        finally:
            run.stop()
        if args.keep:
            say(f"logs and the SQLite store are in {work}")
    plan, job, line = result
    ratio = job["gloo_s"] / job["plan_s"] if job["plan_s"] > 0 else float("nan")
    print(
        f"\nplan {plan['plan_id']}: {plan['algorithm']} over {len(plan['ranks'])} ranks, "
        f"{format_size(size)}, predicted {format_time(plan['predicted_time_s'])} "
        f"(lower bound {format_time(plan['lower_bound_time_s'])}) on the measured graph"
    )
    print(f"executor: {line}")
    print(
        f"measured per all-reduce: plan {format_time(job['plan_s'])}, gloo all_reduce "
        f"{format_time(job['gloo_s'])} (gloo / plan {ratio:.2f}); results agree "
        f"(max |difference| {job['max_abs_err']:.1e})"
    )
    for line in loopback_note(plan, ratio):
        print(line)
    print(f"done in {time.monotonic() - t0:.1f} s")
    return 0


def loopback_note(plan: dict[str, Any], ratio: float) -> list[str]:
    """Why the plan cannot beat gloo on loopback, and where it does."""
    return [
        f"On loopback every host measures the same rate and all {len(plan['ranks'])} processes "
        f"share this machine's {os.cpu_count()} cores:",
        "there is no slow link to route around, the CPU rather than the wire sets the times, "
        "and the",
        f"prediction (priced at the measured loopback rate) is not comparable. gloo / plan "
        f"{ratio:.2f} is what to expect.",
        "As root, `syncplan demo` runs an emulated cluster with one slow link, where the plan "
        "is faster than",
        "gloo and its prediction holds (`--on emulated`; docs/testbed.md).",
    ]


def _demo(
    run: _Run, nhosts: int, port: int, size: int
) -> tuple[dict[str, Any], dict[str, Any], str]:
    import logging

    import httpx

    from syncplan.agents.schedule import circle_rounds, next_cycle_start

    logging.getLogger("httpx").setLevel(logging.WARNING)
    tokens = {k: f"{k}-{secrets.token_hex(12)}" for k in ("admin", "agent", "job")}
    server = f"http://127.0.0.1:{port}"
    py = [sys.executable, "-m", "syncplan"]
    run.spawn(
        "service",
        [
            *py,
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--database-url",
            f"sqlite:///{run.work / 'syncplan.db'}",
        ],
        {
            "SYNCPLAN_ENVIRONMENT": "development",
            "SYNCPLAN_ADMIN_TOKEN": tokens["admin"],
            "SYNCPLAN_AGENT_TOKEN": tokens["agent"],
            "SYNCPLAN_JOB_TOKEN": tokens["job"],
        },
    )
    hosts = [f"demo{i}" for i in range(nhosts)]
    probe = {h: _free_port() for h in hosts}
    agents = []
    for h in hosts:
        peers = ",".join(f"{o}=127.0.0.1:{probe[o]}" for o in hosts if o != h)
        agents.append(
            run.spawn(
                f"agent-{h}",
                [
                    *py,
                    "agent",
                    "--server",
                    server,
                    "--host-name",
                    h,
                    "--interval",
                    "1",
                    "--probe-interval",
                    "1e9",
                    "--probe-duration",
                    str(PROBE_DURATION_S),
                    "--slot",
                    str(PROBE_SLOT_S),
                    "--peers",
                    peers,
                    "--bind",
                    "127.0.0.1",
                    "--probe-port",
                    str(probe[h]),
                    "--http-port",
                    "-1",
                    "--no-gpu-copy",
                    "--spool-dir",
                    str(run.work / f"spool-{h}"),
                ],
                {"SYNCPLAN_AGENT_TOKEN": tokens["agent"]},
            )
        )
    run.say(
        f"service {server} (SQLite in {run.work}), {nhosts} agents on loopback: {', '.join(hosts)}"
    )
    run.wait(
        "the service and the agents to listen",
        lambda: all(_listening(p) for p in [port, *probe.values()]),
    )
    # One probe cycle now, started by every agent in the same slot (as the testbed does).
    phase = time.time() % PROBE_SLOT_S
    if phase > PROBE_SLOT_S * 0.6:
        time.sleep(PROBE_SLOT_S - phase + 0.05)
    for proc in agents:
        proc.send_signal(signal.SIGUSR1)
    # The cycle every agent computes from its trigger: its end, plus the reports after it.
    cycle_end = (
        next_cycle_start(time.time(), PROBE_SLOT_S) + len(circle_rounds(hosts)) * PROBE_SLOT_S
    )
    run.say("agents listening; probing each other")
    client = httpx.Client(base_url=server, timeout=30)
    job_auth = {"Authorization": f"Bearer {tokens['job']}"}

    seen: dict[str, float] = {}

    def measured() -> dict[str, Any] | None:
        """Every host's rate, once the probe cycle is over and the graph holds all of them
        unchanged for a second (each pair's result moves a host's rate until then)."""
        topo = client.get("/v1/topology").json()
        rates = {h: (topo.get("hosts", {}).get(h) or {}).get("measured_GBps") for h in hosts}
        if time.time() < cycle_end or not all(rates.values()) or topo.get("unlinked_hosts"):
            return None
        since = seen.setdefault(topo["version"], time.monotonic())
        return rates if time.monotonic() - since >= 1.0 else None

    rates = run.wait("every host's measured rate in the service", measured, every=0.5)
    run.say("measured: " + ", ".join(f"{h} {r:g} GB/s" for h, r in rates.items()))
    ranks = [f"{h}/cpu0" for h in hosts]
    res = client.put(
        f"/v1/jobs/{JOB_ID}", json={"ranks": ranks, "size_bytes": size}, headers=job_auth
    )
    if res.status_code != 200:
        raise CLIError(f"PUT /v1/jobs/{JOB_ID}: HTTP {res.status_code}: {res.text[:300]}")
    res = client.get(f"/v1/jobs/{JOB_ID}/plan", headers=job_auth)
    if res.status_code != 200:
        raise CLIError(f"GET /v1/jobs/{JOB_ID}/plan: HTTP {res.status_code}: {res.text[:300]}")
    plan = res.json()
    from syncplan.planner.topology import Topology
    from syncplan.planner.verify import verify_plan

    graph = client.get("/v1/topology").json()
    report = verify_plan(
        plan, Topology.from_dict({"nodes": graph["nodes"], "links": graph["links"]})
    )
    if not report.ok:
        raise CLIError(f"the service's plan {plan['plan_id']} fails verification: {report.error}")
    run.say(
        f"job {JOB_ID}: ranks {', '.join(ranks)}; the service planned {plan['algorithm']} "
        f"({plan['plan_id']}), verified"
    )
    master = _free_port()
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master),
        "WORLD_SIZE": str(nhosts),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "SYNCPLAN_JOB_ID": JOB_ID,
        "SYNCPLAN_SERVER": server,
        "SYNCPLAN_JOB_TOKEN": tokens["job"],
        "OMP_NUM_THREADS": "1",
    }
    workers = [
        run.spawn(
            f"rank{r}",
            [sys.executable, "-m", "syncplan.demo_job", "--numel", str(size // 4)],
            {**env, "RANK": str(r), "SYNCPLAN_HOST": h},
            stdout=subprocess.PIPE,
        )
        for r, h in enumerate(hosts)
    ]
    run.say(
        f"job: {nhosts} gloo processes, process r runs as host demo<r> "
        "(SYNCPLAN_HOST), endpoint demo<r>/cpu0"
    )
    outputs: list[bytes] = []
    for proc in workers:
        try:
            out, _ = proc.communicate(timeout=max(1.0, run.left()))
        except subprocess.TimeoutExpired:
            raise CLIError(
                f"the job did not finish in time (logs in {run.work}; --keep keeps them)"
            ) from None
        outputs.append(out)
    for r, proc in enumerate(workers):
        if proc.returncode != 0:
            log = run.work / f"rank{r}.log"
            raise CLIError(f"rank {r} exited with status {proc.returncode}: {_last_line(log)}")
    job = json.loads(outputs[0].decode().strip().splitlines()[-1])
    log0 = (run.work / "rank0.log").read_text(errors="replace")
    lines = [
        ln[ln.index("syncplan executor:") :]
        for ln in log0.splitlines()
        if "syncplan executor:" in ln
    ]
    if not job["using_plan"]:
        raise CLIError(f"the job fell back to torch's all_reduce: {job['reason']}")
    return plan, job, lines[0] if lines else "(no log line)"
