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
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.core.options import PlanOptions
from syncplan.testbed import TestbedError
from syncplan.testbed.calibrate import (
    LARGE_ALGORITHMS,
    LARGE_SIZE,
    REFERENCE_ALGORITHMS,
    REFERENCE_SIZES,
    calibrate,
    repeat_ratios,
)
from syncplan.testbed.cluster import (
    Cluster,
    Service,
    current_graph,
    measured_rates,
    restart_service,
    start_cluster,
    trigger_cycle,
    wait_measured,
)
from syncplan.testbed.emulator import down, kill_recorded, self_record, up
from syncplan.testbed.runner import FULL_SIZES, RunConfig, run_benchmark
from syncplan.testbed.scenario import Scenario
from syncplan.testbed.state import State

ALGORITHMS = ("ring", "hierarchical", "forest", "auto")
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
    # the service's SYNCPLAN_EXCHANGE_OVERHEAD_US: added per message end of a step's
    # exchanged transfers (docs/cost-model.md); 0 without calibration
    exchange_overhead_us: float = 0.0
    # the service's SYNCPLAN_SWITCH_OVERHEAD: the fraction of a switched transfer's wire
    # time a step adds (docs/cost-model.md); 0 without calibration
    switch_overhead: float = 0.0
    # fit min_step_us and message_overhead_us on the testbed before planning (calibrate.py);
    # the values above are then the calibration's fallback only
    calibrate: bool = True
    calibrate_min_step: bool = False  # also fit min_step_us (else kept at the value above)
    calibrate_exchange: bool = True  # also fit exchange_overhead_us (not with min_step_us)
    calibrate_switch: bool = True  # also fit switch_overhead (1 MiB ring, halving-doubling)
    calibration_reps: int = 9
    calibration_warmup: int = 2
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
            raise TestbedError(
                f"message overhead must be in 0..1e6 us, got {self.message_overhead_us}"
            )
        if not 0 <= self.exchange_overhead_us <= 1e6:
            raise TestbedError(
                f"exchange overhead must be in 0..1e6 us, got {self.exchange_overhead_us}"
            )
        if not 0 <= self.switch_overhead <= 100:
            raise TestbedError(f"switch overhead must be in 0..100, got {self.switch_overhead}")
        RunConfig(sizes=REFERENCE_SIZES, reps=self.calibration_reps, warmup=self.calibration_warmup)
        if (
            isinstance(self.message_cores, bool)
            or not isinstance(self.message_cores, int)
            or self.message_cores < 0
        ):
            raise TestbedError(
                f"message cores must be a whole number >= 0, got {self.message_cores!r}"
            )


def fetch_plans(
    svc: Service,
    state: State,
    topology: dict[str, Any],
    cfg: LoopConfig,
    out_dir: Path,
    say: Callable[[str], None],
    job_prefix: str = "testbed",
) -> list[Path]:
    """Register one job per algorithm, fetch its plans, verify them, write them to files."""
    from syncplan.planner.topology import Topology
    from syncplan.planner.verify import verify_plan

    topo = Topology.from_dict(topology)
    ranks = [f"{h.name}/cpu0" for h in state.hosts]
    paths = []
    for algo in cfg.algorithms:
        job = f"{job_prefix}-{algo}"
        svc.ok(
            "PUT",
            f"/v1/jobs/{job}",
            {"ranks": ranks, "bucket_sizes": list(cfg.sizes), "algorithm": algo},
        )
        answer = svc.ok("GET", f"/v1/jobs/{job}/plan")
        docs = answer.get("plans", [answer])
        if len(docs) != len(cfg.sizes):
            raise TestbedError(f"job {job}: {len(docs)} plans for {len(cfg.sizes)} sizes")
        for size, doc in zip(cfg.sizes, docs, strict=True):
            # simulated under the settings the service priced the plan with
            rep = verify_plan(doc, topo, options=PlanOptions.recorded_in(doc))
            if not rep.ok:
                raise TestbedError(
                    f"{algo} plan {doc.get('plan_id')} for {size} bytes from the "
                    f"service fails verification: {rep.error}"
                )
            doc["label"] = algo
            doc["job_id"] = job
            doc["topology_version"] = answer.get("topology_version")
            doc["verified_time_s"] = rep.simulated_time_s
            path = out_dir / f"{algo}-{size}.json"
            atomic_write_json(path, doc)
            paths.append(path)
            say(
                f"{algo} plan ({doc['algorithm']}) for {size / 2**20:g} MiB: predicted "
                f"{doc['predicted_time_s']:.3f} s, verified"
            )
    return paths


def summarise(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per size and algorithm: median, speed-up over gloo, measured / predicted."""
    gloo = {e["size_bytes"]: e["median_s"] for e in result["results"] if e["algorithm"] == "gloo"}
    rows = []
    for e in result["results"]:
        row = {
            "size_bytes": e["size_bytes"],
            "algorithm": e["algorithm"],
            "plan_algorithm": e.get("plan_algorithm"),
            "median_s": e["median_s"],
            "correct": e["correct"],
        }
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


def run_loop(
    scenario: Scenario,
    state_dir: Path,
    cfg: LoopConfig,
    out_path: Path,
    say: Callable[[str], None] = print,
    keep: bool = False,
) -> dict[str, Any]:
    """The whole loop on a fresh testbed of ``scenario``; writes and returns the results."""
    tag = f"[{scenario.name}]"

    def progress(msg: str) -> None:
        say(msg if msg.startswith("[") else f"{tag} {msg}")

    started = time.monotonic()
    load_before = cpu_load()
    with running_testbed(scenario, state_dir, progress, keep) as state:
        cluster = start_cluster(
            state,
            cfg.probe_duration_s,
            cfg.min_step_us,
            progress,
            cfg.message_overhead_us,
            cfg.message_cores,
            cfg.exchange_overhead_us,
            cfg.switch_overhead,
        )
        work, svc = cluster.work, cluster.svc
        t_measure = time.monotonic()
        trigger_cycle(state, cluster.slot_s)
        progress(f"probe cycle triggered ({cluster.rounds} rounds of {cluster.slot_s:g} s)")
        topology = wait_measured(svc, state, cfg.measure_timeout_s, progress)
        measure_s = time.monotonic() - t_measure
        rates = measured_rates(topology, [h.name for h in state.hosts])
        agents = []
        for h in state.hosts:
            m = rates[h.name]
            agents.append(
                {
                    "host": h.name,
                    "shaped_mbit": h.rate_mbit,
                    "measured_mbit": m,
                    "ratio": round(m / h.rate_mbit, 4) if m else None,
                }
            )
            progress(
                f"  {h.name}: measured {m} Mbit/s, shaped {h.rate_mbit:g} "
                f"({(m or 0) / h.rate_mbit:.1%})"
            )
        kill_recorded(state, "agent")  # nothing but the benchmark on the links from here
        calibration = None
        if cfg.calibrate:
            calibration, cfg = _calibrate(state, scenario, cluster, topology, cfg, progress)
            before = topology
            topology = current_graph(svc, [h.name for h in state.hosts])  # restarted service
            # reports that reached the store after the agents' last poll can move the graph
            # a little (the plans use the store's latest, recorded under loop.graph)
            names = [h.name for h in state.hosts]
            calibration["graph_before"] = {
                "version": before.get("version"),
                "rates_mbit": measured_rates(before, names),
            }
            calibration["graph_unchanged"] = (topology.get("links"), topology.get("version")) == (
                before.get("links"),
                before.get("version"),
            )
        plan_dir = work / "plans"
        plans = fetch_plans(svc, state, topology, cfg, plan_dir, progress)
        run_cfg = RunConfig(
            sizes=cfg.sizes,
            reps=cfg.reps,
            warmup=cfg.warmup,
            plans=plans,
            timeout_s=cfg.run_timeout_s,
        )
        result = run_benchmark(state, scenario, run_cfg, out_path, progress=progress)
        result["loop"] = {
            "topology_version": topology.get("version"),
            "measure_s": round(measure_s, 1),
            "probe_duration_s": cfg.probe_duration_s,
            "min_step_us": cfg.min_step_us,
            "message_overhead_us": cfg.message_overhead_us,
            "message_cores": cfg.message_cores,
            "exchange_overhead_us": cfg.exchange_overhead_us,
            "switch_overhead": cfg.switch_overhead,
            "calibration": calibration,
            "algorithms": list(cfg.algorithms),
            "agents": agents,
            "graph": {"nodes": topology.get("nodes"), "links": topology.get("links")},
            "load_before": load_before,
            "load_after": cpu_load(),
            **cfg.extra,
        }
        if calibration is not None:
            calibration["repeat_ratios"] = repeat_ratios(calibration, result)
        result["summary"] = summarise(result)
        result["wall_s"] = round(time.monotonic() - started, 1)
        atomic_write_json(out_path, result)
        return result


def _calibrate(
    state: State,
    scenario: Scenario,
    cluster: Cluster,
    topology: dict[str, Any],
    cfg: LoopConfig,
    progress: Callable[[str], None],
) -> tuple[dict[str, Any], LoopConfig]:
    """Time the reference plans, fit (m, o), restart the service with them; returns the
    calibration record and the config with the fitted settings (unchanged if unusable)."""
    ref = replace(cfg, algorithms=REFERENCE_ALGORITHMS, sizes=REFERENCE_SIZES, calibrate=False)
    paths = fetch_plans(
        cluster.svc,
        state,
        topology,
        ref,
        cluster.work / "calibration-plans",
        progress,
        job_prefix="calibrate",
    )
    sizes = REFERENCE_SIZES
    if cfg.calibrate_switch:
        large = replace(ref, algorithms=LARGE_ALGORITHMS, sizes=(LARGE_SIZE,))
        paths += fetch_plans(
            cluster.svc,
            state,
            topology,
            large,
            cluster.work / "calibration-plans-large",
            progress,
            job_prefix="calibrate-large",
        )
        sizes = (*REFERENCE_SIZES, LARGE_SIZE)

    def run(plans: Sequence[Path], out: Path) -> dict[str, Any]:
        return run_benchmark(
            state,
            scenario,
            RunConfig(
                sizes=sizes, reps=cfg.calibration_reps, warmup=cfg.calibration_warmup, plans=plans
            ),
            out,
            progress=progress,
        )

    rec = calibrate(
        run,
        paths,
        topology,
        cfg.message_cores,
        cfg.calibration_reps,
        cfg.calibration_warmup,
        cluster.work / "calibration.json",
        progress,
        None if cfg.calibrate_min_step else cfg.min_step_us,
        cfg.calibrate_exchange,
        cfg.calibrate_switch,
    )
    rec["defaults"] = {
        "min_step_us": cfg.min_step_us,
        "message_overhead_us": cfg.message_overhead_us,
        "exchange_overhead_us": cfg.exchange_overhead_us,
        "switch_overhead": cfg.switch_overhead,
    }
    fit = rec["fit"]
    if not fit["usable"]:
        return rec, cfg
    cfg = replace(
        cfg,
        min_step_us=fit["min_step_us"],
        message_overhead_us=fit["message_overhead_us"],
        exchange_overhead_us=fit["exchange_overhead_us"],
        switch_overhead=fit["switch_overhead"],
    )
    restart_service(
        state,
        cluster,
        cfg.min_step_us,
        cfg.message_overhead_us,
        cfg.message_cores,
        progress,
        cfg.exchange_overhead_us,
        cfg.switch_overhead,
    )
    return rec, cfg


@contextlib.contextmanager
def running_testbed(
    scenario: Scenario, state_dir: Path, progress: Callable[[str], None], keep: bool = False
) -> Iterator[State]:
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
