"""Run the all-reduce benchmark on an emulated cluster: one worker rank per host namespace."""

from __future__ import annotations

import json
import os
import platform
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from syncplan.core.atomic import atomic_write_json
from syncplan.testbed import TestbedError
from syncplan.testbed.emulator import kill_recorded, spawn_rank
from syncplan.testbed.scenario import Scenario
from syncplan.testbed.state import State

MIB = 1024 * 1024
FULL_SIZES = tuple(s * MIB for s in (1, 4, 16, 64, 256))
MAX_ATTEMPTS = 6  # worker start-ups per benchmark: the first, then one after each failed run


@dataclass
class RunConfig:
    """What to time: buffer sizes (bytes), repetitions, plan documents, limits."""

    sizes: Sequence[int] = FULL_SIZES
    reps: int = 3
    warmup: int = 0
    plans: Sequence[Path] = field(default_factory=list)
    timeout_s: float | None = None  # whole run; None: estimated from sizes and rates

    def __post_init__(self) -> None:
        if not self.sizes:
            raise TestbedError("at least one buffer size is needed")
        for s in self.sizes:
            if s <= 0 or s % 4:
                raise TestbedError(f"size {s}: must be a positive multiple of 4 bytes (float32)")
        if not 1 <= self.reps <= 100:
            raise TestbedError(f"reps must be in 1..100, got {self.reps}")
        if not 0 <= self.warmup <= 10:
            raise TestbedError(f"warmup must be in 0..10, got {self.warmup}")
        for p in self.plans:
            if not Path(p).is_file():
                raise TestbedError(f"plan file {p} not found")

    def estimate_s(self, scenario: Scenario) -> float:
        """A generous limit: 4x the slowest conceivable (slowest-link) time, plus start-up."""
        slow = min(h.rate_mbit for h in scenario.hosts) * 1e6 / 8
        per_op = sum(2 * s / slow for s in self.sizes)
        return 120.0 + 4 * per_op * (self.reps + self.warmup) * (1 + len(self.plans))


def run_benchmark(
    state: State,
    scenario: Scenario,
    cfg: RunConfig,
    out_path: Path,
    progress: Callable[[str], None] = print,
    links: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run one worker per host, gather rank 0's results, write ``out_path``; returns them.

    A run that fails is listed under ``failures`` and the others go on; ``incomplete`` says
    why when some runs could not be made at all."""
    if state.phase != "up":
        raise TestbedError(f"testbed {scenario.name} is not up (phase {state.phase})")
    for p in cfg.plans:
        try:
            doc = json.loads(Path(p).read_text())
        except (OSError, ValueError) as exc:
            raise TestbedError(f"plan {p}: unreadable ({exc})") from exc
        if not isinstance(doc, dict) or len(doc.get("ranks") or []) != len(state.hosts):
            raise TestbedError(
                f"plan {p}: needs one rank per host ({len(state.hosts)}); "
                "is it a plan document for this scenario?"
            )
    run_dir = (state.path.parent if state.path else Path(".")) / f"{state.prefix}-run"
    limit = cfg.timeout_s or cfg.estimate_s(scenario)
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    incomplete: str | None = None
    # A run that fails (a rank dies or times out) breaks the process group: record it, start
    # the workers again and go on with the runs not yet done.
    for attempt in range(MAX_ATTEMPTS):
        skip = [f"{e['algorithm']}@{e['size_bytes']}" for e in (*results, *failures)]
        raw, error = _attempt(state, scenario, cfg, run_dir, skip, limit, progress)
        results += raw.get("results", [])
        if error is None:
            break
        running = raw.get("running")
        if not running:
            if not results and not failures:
                raise TestbedError(error)
            incomplete = f"workers failed outside a timed run: {error}"
            break
        failures.append({**running, "error": error, "attempt": attempt + 1})
        progress(
            f"[{scenario.name}] {running['size_bytes'] / MIB:g} MiB "
            f"{running['algorithm']} FAILED; going on with the rest. {error}"
        )
    else:
        incomplete = f"gave up after {MAX_ATTEMPTS} attempts"
    if incomplete:
        progress(f"[{scenario.name}] results are incomplete: {incomplete}")
    raw = {k: v for k, v in raw.items() if k not in ("results", "running")}
    result = {
        "scenario": scenario.to_dict(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "python": platform.python_version(),
        },
        "config": {
            "sizes": list(cfg.sizes),
            "reps": cfg.reps,
            "warmup": cfg.warmup,
            "plans": [str(p) for p in cfg.plans],
        },
        "wall_s": round(time.monotonic() - started, 2),
        **raw,
        "results": results,
        "failures": failures,
        "incomplete": incomplete,
    }
    for entry in result["results"]:
        entry["ring_bound_s"] = scenario.ring_bound_s(entry["size_bytes"])
    if links is not None:
        result["links"] = links
    atomic_write_json(out_path, result)
    return result


def _attempt(
    state: State,
    scenario: Scenario,
    cfg: RunConfig,
    run_dir: Path,
    skip: list[str],
    limit: float,
    progress: Callable[[str], None],
) -> tuple[dict[str, Any], str | None]:
    """Run the workers once; returns rank 0's (possibly partial) results and the error."""
    raw_out = run_dir / "rank0.json"
    raw_out.unlink(missing_ok=True)
    master = f"{state.hosts[0].addr}:{20000 + secrets.randbelow(30000)}"
    base = [
        sys.executable,
        "-u",
        "-m",
        "syncplan.testbed.worker",
        "--world",
        str(len(state.hosts)),
        "--master",
        master,
        "--reps",
        str(cfg.reps),
        "--warmup",
        str(cfg.warmup),
        "--timeout",
        str(int(limit)),
        "--sizes",
        *map(str, cfg.sizes),
    ]
    if cfg.plans:
        base += ["--plans", *[str(Path(p).resolve()) for p in cfg.plans]]
    if skip:
        base += ["--skip", *skip]
    procs = []
    started = time.monotonic()
    error: str | None = None
    try:
        for h in state.hosts:
            argv = [*base, "--rank", str(h.rank)]
            if h.rank == 0:
                argv += ["--out", str(raw_out)]
            procs.append(spawn_rank(state, h, argv, run_dir))
        log0 = run_dir / "rank0.log"
        seen = 0
        while True:
            seen = _relay(log0, seen, scenario.name, progress)
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, c = failed[0]
                tail = _tail(run_dir / f"rank{i}.log")
                error = f"rank {i} failed (exit {c}); last lines of its log:\n{tail}"
                break
            if all(c == 0 for c in codes):
                break
            if time.monotonic() - started > limit:
                error = f"benchmark did not finish within {limit:.0f} s"
                break
            time.sleep(0.2)
        _relay(log0, seen, scenario.name, progress)
    finally:
        kill_recorded(state, "worker")
    try:
        raw = json.loads(raw_out.read_text())
    except (OSError, ValueError):
        if error is None:
            raise TestbedError(f"rank 0 wrote no results ({raw_out})") from None
        raw = {}
    return raw, error


def _relay(path: Path, seen: int, tag: str, progress: Callable[[str], None]) -> int:
    """Print the lines of ``path`` beyond byte ``seen``; returns the new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(seen)
            data = f.read()
    except FileNotFoundError:
        return seen
    end = data.rfind(b"\n") + 1
    for line in data[:end].decode(errors="replace").splitlines():
        progress(f"[{tag}] {line}")
    return seen + end


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def write_ground_truth_plans(
    scenario: Scenario,
    sizes: Sequence[int],
    algorithms: Sequence[str],
    out_dir: Path,
    progress: Callable[[str], None] = print,
) -> list[Path]:
    """Plan documents from the scenario's shaped rates (not from agents' measurements).

    For developing the executor path only: the real loop plans from what the agents measure.
    Each document gets ``label`` = the requested algorithm (``auto`` keeps its label).
    An algorithm the planner lacks or that cannot serve the request is skipped with a note.
    """
    from syncplan.core.errors import PlannerError
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import Topology

    topo = Topology.from_dict(scenario.ground_truth_topology())
    ranks = [f"{h.name}/cpu0" for h in scenario.hosts]
    written = []
    for size in sizes:
        for algo in algorithms:
            try:
                doc = make_plan(topo, ranks, size, algo)
            except PlannerError as exc:
                progress(f"[{scenario.name}] no {algo} plan for {size} bytes: {exc}")
                continue
            doc["label"] = algo
            path = out_dir / f"{scenario.name}-{algo}-{size}.json"
            atomic_write_json(path, doc)
            progress(
                f"[{scenario.name}] {algo} ({doc['algorithm']}) {size} bytes: predicted "
                f"{doc['predicted_time_s']:.3f} s -> {path}"
            )
            written.append(path)
    return written
