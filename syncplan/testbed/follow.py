"""A link degrades under a running job: does the job follow the cluster?

``run_follow`` brings a testbed up with the service and an agent per host, lets the agents
measure, registers a job and starts it (``follow_worker``: the executor's launch path with
replanning on, timing each iteration's plan all-reduce beside gloo's own). Once the job has
run ``healthy_s`` seconds, one host's link is reshaped to ``rate_mbit`` in both directions;
``degraded_s`` later the agents run a probe cycle, the service's graph and then the job's
plan change, and the job switches to the new plan at an all-reduce all ranks agree on. It
runs ``after_s`` more seconds and stops. The result holds every iteration and, per phase
(healthy, degraded on the old plan, probing, on the new plan), the medians of both timings.
"""

from __future__ import annotations

import secrets
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.testbed import TestbedError
from syncplan.testbed.cluster import measured_rates, start_cluster, trigger_cycle, wait_measured
from syncplan.testbed.emulator import kill_recorded, reshape, spawn_rank
from syncplan.testbed.loop import cpu_load, running_testbed
from syncplan.testbed.scenario import Scenario
from syncplan.testbed.state import State

JOB = "follow"


@dataclass
class FollowConfig:
    """Which link degrades, to what, and how long each phase lasts; validated on creation."""

    host: str
    rate_mbit: float
    size_bytes: int = 8 << 20
    healthy_s: float = 30.0
    degraded_s: float = 20.0
    after_s: float = 40.0
    probe_duration_s: float = 1.0
    refresh_interval_s: float = 1.0
    switch_timeout_s: float = 300.0
    min_step_us: float = 1000.0

    def __post_init__(self) -> None:
        if not self.rate_mbit > 0:
            raise TestbedError(f"rate must be > 0 Mbit/s, got {self.rate_mbit}")
        if self.size_bytes <= 0 or self.size_bytes % 4:
            raise TestbedError(
                f"size must be a positive multiple of 4 bytes, got {self.size_bytes}"
            )
        if min(self.healthy_s, self.degraded_s, self.after_s) <= 0:
            raise TestbedError("phase durations must be positive")
        if not 0.2 <= self.probe_duration_s <= 10:
            raise TestbedError(f"probe duration must be in 0.2..10 s, got {self.probe_duration_s}")


def _records(path: Path) -> list[dict[str, Any]]:
    import json

    try:
        return json.loads(path.read_text())["records"]
    except (OSError, ValueError, KeyError):
        return []


def phases(
    records: list[dict[str, Any]], events: dict[str, float], final: str | None
) -> list[dict[str, Any]]:
    """Median plan and gloo time per phase: before the change, after it on the old plan,
    while the agents probe, then on the service's final plan (``final``: its id)."""
    spans = [
        ("healthy", lambda r: r["wall"] < events["degraded"]),
        ("degraded, old plan", lambda r: events["degraded"] <= r["wall"] < events["probing"]),
        ("probing", lambda r: events["probing"] <= r["wall"] < events["measured"]),
        ("final plan", lambda r: r["wall"] >= events["measured"] and r["plan_id"] == final),
    ]
    out = []
    for name, inside in spans:
        rows = [r for r in records if inside(r)]
        if not rows:
            continue
        plan = statistics.median(r["plan_s"] for r in rows)
        gloo = statistics.median(r["gloo_s"] for r in rows)
        out.append(
            {
                "phase": name,
                "iterations": len(rows),
                "plan_median_s": plan,
                "gloo_median_s": gloo,
                "speedup_over_gloo": gloo / plan,
                "plans": sorted({str(r["plan_id"]) for r in rows}),
            }
        )
    return out


def _wait(what: str, done: Callable[[], bool], timeout_s: float, procs: list[Any]) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        failed = [p.returncode for p in procs if p.poll() not in (None, 0)]
        if failed:
            raise TestbedError(f"a job rank exited with {failed[0]} while waiting for {what}")
        if time.monotonic() > deadline:
            raise TestbedError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.5)


def run_follow(
    scenario: Scenario,
    state_dir: Path,
    cfg: FollowConfig,
    out_path: Path,
    say: Callable[[str], None] = print,
    keep: bool = False,
) -> dict[str, Any]:
    """The experiment on a fresh testbed of ``scenario``; writes and returns the results."""
    if cfg.host not in {h.name for h in scenario.hosts}:
        raise TestbedError(f"scenario {scenario.name} has no host {cfg.host!r}")
    tag = f"[{scenario.name}]"

    def progress(msg: str) -> None:
        say(f"{tag} {msg}")

    started = time.monotonic()
    with running_testbed(scenario, state_dir, progress, keep) as state:
        return _run(state, scenario, cfg, out_path, progress, started)


def _run(
    state: State,
    scenario: Scenario,
    cfg: FollowConfig,
    out_path: Path,
    progress: Callable[[str], None],
    started: float,
) -> dict[str, Any]:
    cluster = start_cluster(state, cfg.probe_duration_s, cfg.min_step_us, progress)
    work, svc, server, slot = cluster.work, cluster.svc, cluster.server, cluster.slot_s
    trigger_cycle(state, slot)
    topology = wait_measured(svc, state, 300.0, progress)
    before = measured_rates(topology, [h.name for h in state.hosts])
    ranks = [f"{h.name}/cpu0" for h in state.hosts]
    svc.ok("PUT", f"/v1/jobs/{JOB}", {"ranks": ranks, "size_bytes": cfg.size_bytes})
    first = svc.ok("GET", f"/v1/jobs/{JOB}/plan")
    progress(
        f"job plan {first['plan_id']} ({first['algorithm']}), predicted "
        f"{first['predicted_time_s']:.3f} s"
    )

    run_dir = work / "follow"
    run_dir.mkdir(exist_ok=True)
    stop, records_path = run_dir / "stop", run_dir / "rank0.json"
    master = f"{state.hosts[0].addr}:{20000 + secrets.randbelow(30000)}"
    procs = []
    for h in state.hosts:
        argv = [
            sys.executable,
            "-u",
            "-m",
            "syncplan.testbed.follow_worker",
            "--rank",
            str(h.rank),
            "--world",
            str(len(state.hosts)),
            "--master",
            master,
            "--server",
            server,
            "--job",
            JOB,
            "--host",
            h.name,
            "--size",
            str(cfg.size_bytes),
            "--stop-file",
            str(stop),
            "--out",
            str(records_path),
            "--refresh-interval",
            str(cfg.refresh_interval_s),
        ]
        procs.append(
            spawn_rank(state, h, argv, run_dir, {"SYNCPLAN_JOB_TOKEN": cluster.tokens["job"]})
        )
    events: dict[str, float] = {}

    def hold(phase: str, since: str, seconds: float, slack_s: float = 60.0) -> None:
        """Wait until ``seconds`` have passed since ``events[since]`` (the job running)."""
        _wait(
            f"the {phase} phase",
            lambda: time.time() - events[since] >= seconds,
            seconds + slack_s,
            procs,
        )

    try:
        _wait("the job's first iteration", lambda: bool(_records(records_path)), 300.0, procs)
        events["job_started"] = time.time()
        progress(f"job running; degrading {cfg.host} in {cfg.healthy_s:g} s")
        hold("healthy", "job_started", cfg.healthy_s)
        old_rate = next(h.rate_mbit for h in state.hosts if h.name == cfg.host)
        reshape(state, cfg.host, cfg.rate_mbit)
        events["degraded"] = time.time()
        progress(f"{cfg.host}: link reshaped {old_rate:g} -> {cfg.rate_mbit:g} Mbit/s")
        hold("degraded", "degraded", cfg.degraded_s)
        trigger_cycle(state, slot)
        events["probing"] = time.time()
        progress("probe cycle triggered")

        rounds = cluster.rounds
        cycle_end = events["probing"] + rounds * slot + 2 * slot
        rates: dict[str, float | None] = {}

        def measured() -> bool:
            status, topo = svc.call("GET", "/v1/topology")
            rates.update(
                measured_rates(
                    topo.get("graph", topo) if status == 200 else {}, [h.name for h in state.hosts]
                )
            )
            rate = rates.get(cfg.host)
            return (
                time.time() >= cycle_end
                and rate is not None
                and rate < 0.75 * (before.get(cfg.host) or old_rate)
            )

        progress(f"waiting for the probe cycle ({rounds} rounds of {slot:g} s)")
        _wait(
            f"the service to see {cfg.host} slower",
            measured,
            cfg.switch_timeout_s + rounds * slot,
            procs,
        )
        events["measured"] = time.time()
        final = svc.ok("GET", f"/v1/jobs/{JOB}/plan")
        progress(
            f"probe cycle done: {cfg.host} measured at {rates.get(cfg.host)} Mbit/s; "
            f"the job's plan is now {final['plan_id']} ({final['algorithm']}, predicted "
            f"{final['predicted_time_s']:.3f} s)"
        )

        def switched() -> bool:
            return any(r["plan_id"] == final["plan_id"] for r in _records(records_path))

        _wait("the job to switch plans", switched, cfg.switch_timeout_s, procs)
        events["switched"] = max(
            events["measured"],
            next(r["wall"] for r in _records(records_path) if r["plan_id"] == final["plan_id"]),
        )
        progress(f"job runs plan {final['plan_id']}")
        hold("last", "switched", cfg.after_s, slack_s=120.0)
        stop.write_text("stop")
        _wait("the job to stop", lambda: all(p.poll() is not None for p in procs), 300.0, [])
    finally:
        stop.write_text("stop")
        kill_recorded(state, "worker")
        kill_recorded(state, "agent")
    records = _records(records_path)
    keys = ("plan_id", "algorithm", "predicted_time_s", "lower_bound_time_s")
    result = {
        "scenario": scenario.name,
        "size_bytes": cfg.size_bytes,
        "host": cfg.host,
        "rate_before_mbit": old_rate,
        "rate_after_mbit": cfg.rate_mbit,
        "measured_mbit": {"before": before, "after": rates},
        "plans": {
            "first": {k: first.get(k) for k in keys},
            "final": {k: final.get(k) for k in keys},
        },
        "events": events,
        "phases": phases(records, events, final["plan_id"]),
        "correct": all(r["plan_correct"] and r["gloo_correct"] for r in records),
        "records": records,
        "load": cpu_load(),
        "wall_s": round(time.monotonic() - started, 1),
    }
    atomic_write_json(out_path, result)
    return result


def plot_follow(result: dict[str, Any], out: Path) -> Path:
    """Each iteration's plan and gloo time against wall time, the events marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = result["records"]
    t0 = recs[0]["wall"] if recs else 0.0
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(
        [r["wall"] - t0 for r in recs],
        [r["plan_s"] for r in recs],
        "o-",
        ms=3,
        label="syncplan (executor, replanning on)",
    )
    ax.plot(
        [r["wall"] - t0 for r in recs],
        [r["gloo_s"] for r in recs],
        "s--",
        ms=3,
        label="gloo all_reduce",
    )
    for name, wall in result["events"].items():
        if name != "job_started":
            ax.axvline(wall - t0, color="gray", ls=":", lw=1)
            ax.text(wall - t0, ax.get_ylim()[1] * 0.97, f" {name}", fontsize=8, va="top")
    ax.set_xlabel("seconds since the job started")
    ax.set_ylabel("all-reduce time (s)")
    ax.set_title(
        f"{result['scenario']}: {result['host']} {result['rate_before_mbit']:g} -> "
        f"{result['rate_after_mbit']:g} Mbit/s, {result['size_bytes'] / 2**20:g} MiB"
    )
    ax.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
