"""Fit the cost model's step floor ``m``, per-message overhead ``o`` and per-exchange
overhead ``x`` on the live testbed.

The loop's service prices a step of a program as ``max(w + o * min(ends, 2), o * ends)``
with ``w = max(wire, m)`` (docs/cost-model.md: ``min_step_s``, ``message_overhead_s`` per
message end of the step's busiest rank, the ends
shared over the machine's cores). On this emulator ``o`` is the CPU cost of a gloo message on
a machine that runs all 8 ranks, and it moves with the machine's load: a constant fitted on
earlier runs (121 us) mispriced later runs by 0.47-1.7x. So the loop, after the agents have
measured and before it plans, times a few cheap reference programs on the same testbed and
fits ``m`` and ``o`` to them:

- the programs: the service's plans for ``REFERENCE_ALGORITHMS`` at ``REFERENCE_SIZES``
  (flat star, ring, one-step direct exchange, recursive doubling and halving-doubling at 4
  and 64 KiB, the candidates ``auto`` weighs at these sizes: from 2 steps of 7 messages to
  14 steps of 8, and steps of 56), run by the executor like the measured plans, ``reps``
  repetitions each after ``warmup``;
- the features: per step the wire time on the service's graph, the charged message ends
  (``syncplan.planner.verify.step_features``) and the ends of its exchanged transfers (a pair that
  sends both ways in the step: ``step_exchange_ends``), so ``predicted(m, o, x) =
  sum(overlapped(max(wire, m), ends, o) + x * exchanged ends)``;
- the fit: ``o`` (1 us apart) and ``x`` (2 us apart) on a grid with the least squared log
  error of the prediction against each program's median, ``m`` fixed (the loop's
  ``min_step_us``, 50 us); ``x`` only when asked (``exchange``; otherwise 0); or ``m`` and
  ``o``, ``m`` 10 us apart (the loop's ``calibrate_min_step``, without ``x``). On gloo a
  step whose ranks send to and receive from the same peer costs more than one whose ranks
  do not (docs/testbed.md "Issue 18, session 8"), which one ``o`` cannot price: it charged
  the ring 1.25-2.06x and recursive doubling 0.44-0.69x their times. A bootstrap over the
  repetitions (resampled medians, refitted) gives the 5-95 % range. ``m`` is left out by default: at
  these sizes nearly every step's wire time is below any plausible floor, so ``m`` and ``o``
  trade off (per step against per message end) and the joint fit wandered from
  (m 110 us, o 78 us) to (910, 15) between two runs of one scenario, without predicting the
  measured plans better (docs/testbed.md "Calibration in the run").

Then ``s`` (``switch_overhead``: the fraction of a switched transfer's wire time a step adds,
docs/cost-model.md) on a grid 0.01 apart with ``o`` and ``x`` fixed, over every point including
``LARGE_ALGORITHMS`` at ``LARGE_SIZE`` (the ring never switches connections, halving-doubling
does at every step but one: at 1 MiB on ``homogeneous`` it ran 88-100 ms against the ring's
81-84 while both were priced alike, docs/testbed.md "Issue 18, session 9"); the small sizes
alone cannot show it, their wire time is a fraction of a step's overheads. The bootstrap
repeats both stages.

The result records every sample, the features' sums, the fitted prediction per program and
the fit's error; ``usable`` is false (and the loop keeps its defaults) when fewer than
``MIN_POINTS`` programs ran correctly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from syncplan.planner.cost import overlapped

REFERENCE_ALGORITHMS = ("star", "ring", "direct", "recursive-doubling", "halving-doubling")
REFERENCE_SIZES = (4096, 65536)
LARGE_ALGORITHMS = ("ring", "halving-doubling")  # fit s: without and with switches
LARGE_SIZE = 1 << 20
S_GRID = np.linspace(0.0, 2.0, 201)  # switch overhead, 0.01 apart
M_GRID_US = np.linspace(0.0, 2000.0, 201)  # step floor, 10 us apart
O_GRID_US = np.linspace(0.0, 500.0, 501)  # per-message overhead, 1 us apart
X_GRID_US = np.linspace(0.0, 500.0, 251)  # per exchanged message end, 2 us apart
MIN_POINTS = 3
BOOTSTRAP = 200


@dataclass
class Point:
    """One timed reference program: its samples, its steps' (wire s, message ends), their
    exchanged message ends (``xends``; none: 0 per step) and the wire time of their slowest
    switched transfer (``swires``; none: 0)."""

    label: str
    algorithm: str
    size_bytes: int
    times_s: Sequence[float]
    feats: Sequence[tuple[float, float]]
    xends: Sequence[float] = ()
    swires: Sequence[float] = ()

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    def predict(
        self, min_step_s: float, overhead_s: float, exchange_s: float = 0.0, switch: float = 0.0
    ) -> float:
        return (
            sum(overlapped(max(w, min_step_s), e, overhead_s) for w, e in self.feats)
            + exchange_s * sum(self.xends)
            + switch * sum(self.swires)
        )


def _log_predictions(
    points: Sequence[Point], m_grid_us: np.ndarray, o_grid_us: np.ndarray, x_grid_us: np.ndarray
) -> np.ndarray:
    """log(predicted seconds), shape (m, point, o, x)."""
    o = o_grid_us * 1e-6
    steps = np.empty((len(m_grid_us), len(points), len(o)))
    for j, p in enumerate(points):
        wire = np.array([w for w, _ in p.feats])
        ends = np.array([e for _, e in p.feats])
        serial = o[None, :] * np.minimum(ends, 2.0)[:, None]  # (step, o)
        busy = o[None, :] * ends[:, None]
        for i, m in enumerate(m_grid_us):
            base = np.maximum(wire, m * 1e-6)[:, None]
            steps[i, j] = np.maximum(base + serial, busy).sum(axis=0)
    xends = np.array([sum(p.xends) for p in points])
    pred = steps[:, :, :, None] + xends[None, :, None, None] * (
        x_grid_us[None, None, None, :] * 1e-6
    )
    return np.log(np.maximum(pred, 1e-12))


def _best(logpred: np.ndarray, log_measured: np.ndarray) -> tuple[int, int, int, float]:
    err = ((logpred - log_measured[None, :, None, None]) ** 2).sum(axis=1)
    i, j, k = np.unravel_index(int(np.argmin(err)), err.shape)
    return int(i), int(j), int(k), float(err[i, j, k])


def _best_switch(
    points: Sequence[Point],
    medians: Sequence[float],
    m_s: float,
    o_s: float,
    x_s: float,
    s_grid: np.ndarray,
) -> int:
    """Index in ``s_grid`` of the least squared log error with ``m``, ``o``, ``x`` fixed."""
    base = np.array([p.predict(m_s, o_s, x_s) for p in points])
    sw = np.array([sum(p.swires) for p in points])
    pred = base[None, :] + s_grid[:, None] * sw[None, :]
    err = ((np.log(pred) - np.log(np.asarray(medians))[None, :]) ** 2).sum(axis=1)
    return int(np.argmin(err))


def fit_settings(
    points: Sequence[Point],
    m_grid_us: np.ndarray = M_GRID_US,
    o_grid_us: np.ndarray = O_GRID_US,
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
    x_grid_us: np.ndarray | None = None,
    s_grid: np.ndarray | None = None,
) -> dict[str, Any]:
    """Least squared log error ``(m, o, x)`` over the medians of the points below
    ``LARGE_SIZE``, then ``s`` over all points with those fixed, with a bootstrap range;
    ``x`` is 0 unless ``x_grid_us`` is given, ``s`` unless ``s_grid`` is."""
    small = [p for p in points if p.size_bytes < LARGE_SIZE]
    if len(small) < MIN_POINTS:
        return {"usable": False, "reason": f"{len(small)} programs timed, {MIN_POINTS} needed"}
    x_grid = np.zeros(1) if x_grid_us is None else x_grid_us
    s_grid = np.zeros(1) if s_grid is None else s_grid
    logpred = _log_predictions(small, m_grid_us, o_grid_us, x_grid)

    def both(medians: list[float]) -> tuple[int, int, int, int, float]:
        y = [v for p, v in zip(points, medians, strict=True) if p.size_bytes < LARGE_SIZE]
        i, j, k, err = _best(logpred, np.log(y))
        q = _best_switch(
            points, medians, m_grid_us[i] * 1e-6, o_grid_us[j] * 1e-6, x_grid[k] * 1e-6, s_grid
        )
        return i, j, k, q, err

    i, j, k, q, _ = both([p.median_s for p in points])
    m_us, o_us, x_us = float(m_grid_us[i]), float(o_grid_us[j]), float(x_grid[k])
    s = float(s_grid[q])
    rng = np.random.default_rng(seed)
    ms, os_, xs, ss = [], [], [], []
    for _ in range(bootstrap):
        y = [
            float(statistics.median(rng.choice(np.asarray(p.times_s), len(p.times_s))))
            for p in points
        ]
        bi, bj, bk, bq, _ = both(y)
        ms.append(m_grid_us[bi])
        os_.append(o_grid_us[bj])
        xs.append(x_grid[bk])
        ss.append(s_grid[bq])
    ratios = [p.predict(m_us * 1e-6, o_us * 1e-6, x_us * 1e-6, s) / p.median_s for p in points]
    err = sum(math.log(r) ** 2 for r in ratios)
    return {
        "usable": True,
        "min_step_us": m_us,
        "message_overhead_us": o_us,
        "exchange_overhead_us": x_us,
        "switch_overhead": s,
        "rms_log_error": round(math.sqrt(err / len(points)), 4),
        "predicted_over_measured": [round(r, 3) for r in ratios],
        "fitted": (
            (["min_step"] if len(m_grid_us) > 1 else [])
            + ["message_overhead"]
            + (["exchange_overhead"] if len(x_grid) > 1 else [])
            + (["switch_overhead"] if len(s_grid) > 1 else [])
        ),
        "at_grid_edge": {
            "min_step": len(m_grid_us) > 1 and i in (0, len(m_grid_us) - 1) and m_us > 0,
            "message_overhead": j == len(o_grid_us) - 1,
            "exchange_overhead": len(x_grid) > 1 and k == len(x_grid) - 1,
            "switch_overhead": len(s_grid) > 1 and q == len(s_grid) - 1,
        },
        "bootstrap": {
            "n": bootstrap,
            "min_step_us_5_50_95": [float(x) for x in np.percentile(ms, [5, 50, 95])],
            "message_overhead_us_5_50_95": [float(x) for x in np.percentile(os_, [5, 50, 95])],
            "exchange_overhead_us_5_50_95": [float(x) for x in np.percentile(xs, [5, 50, 95])],
            "switch_overhead_5_50_95": [float(x) for x in np.percentile(ss, [5, 50, 95])],
        },
    }


def points_from_run(
    result: dict[str, Any],
    plans: dict[tuple[str, int], dict[str, Any]],
    topology: dict[str, Any],
    cores: int,
) -> list[Point]:
    """The correct plan runs of a runner result whose (label, size) is in ``plans``."""
    from syncplan.planner.topology import Topology
    from syncplan.planner.verify import step_exchange_ends, step_features, step_switch_wires

    topo = Topology.from_dict(topology)
    out = []
    for e in result.get("results", []):
        doc = plans.get((e["algorithm"], e["size_bytes"]))
        if doc is None or not e.get("correct") or not e.get("times_s"):
            continue
        out.append(
            Point(
                e["algorithm"],
                doc.get("algorithm", e["algorithm"]),
                e["size_bytes"],
                list(e["times_s"]),
                step_features(doc, topo, message_cores=cores),
                step_exchange_ends(doc, topo, message_cores=cores),
                step_switch_wires(doc, topo),
            )
        )
    return out


def points_from_record(rec: dict[str, Any]) -> list[Point]:
    """The points of a recorded calibration (``record``), to fit them again."""
    return [
        Point(
            p["label"],
            p["algorithm"],
            p["size_bytes"],
            p["times_s"],
            [(w, e) for w, e in p["feats"]],
            list(p.get("exchange_ends", ())),
            list(p.get("switch_wires", ())),
        )
        for p in rec["programs"]
    ]


def record(
    points: Sequence[Point],
    fit: dict[str, Any],
    result: dict[str, Any],
    reps: int,
    warmup: int,
    cores: int,
) -> dict[str, Any]:
    """What the results file keeps of a calibration: samples, features, fit, gloo times."""
    m, o = fit.get("min_step_us", 0.0) * 1e-6, fit.get("message_overhead_us", 0.0) * 1e-6
    x = fit.get("exchange_overhead_us", 0.0) * 1e-6
    s = fit.get("switch_overhead", 0.0)
    return {
        "algorithms": sorted({p.algorithm for p in points}),
        "sizes": sorted({p.size_bytes for p in points}),  # what was timed (1 MiB: fits s)
        "reps": reps,
        "warmup": warmup,
        "message_cores": cores,
        "fit": fit,
        "programs": [
            {
                "label": p.label,
                "algorithm": p.algorithm,
                "size_bytes": p.size_bytes,
                "times_s": [round(t, 7) for t in p.times_s],
                "median_s": round(p.median_s, 7),
                "steps": len(p.feats),
                "wire_s": round(sum(w for w, _ in p.feats), 7),
                "message_ends": round(sum(e for _, e in p.feats), 3),
                "feats": [[w, e] for w, e in p.feats],
                "exchange_ends": list(p.xends),
                "switch_wires": list(p.swires),
                **({"fitted_s": round(p.predict(m, o, x, s), 7)} if fit.get("usable") else {}),
            }
            for p in points
        ],
        "gloo": [
            {"size_bytes": e["size_bytes"], "median_s": e["median_s"]}
            for e in result.get("results", [])
            if e["algorithm"] == "gloo"
        ],
        "failures": result.get("failures", []),
        "wall_s": result.get("wall_s"),
    }


def calibrate(
    run: Callable[[Sequence[Path], Path], dict[str, Any]],
    plan_paths: Sequence[Path],
    topology: dict[str, Any],
    cores: int,
    reps: int,
    warmup: int,
    out_path: Path,
    say: Callable[[str], None],
    min_step_us: float | None = None,
    exchange: bool = False,
    switch: bool = False,
) -> dict[str, Any]:
    """Time the reference plans (``run(plans, out_path)``, the loop's runner) and fit ``o``
    (and ``x`` with ``exchange``, ``s`` with ``switch``) with the step floor fixed at
    ``min_step_us``, or ``m`` and ``o`` when it is None."""
    import json

    plans = {}
    for path in plan_paths:
        doc = json.loads(Path(path).read_text())
        plans[(doc["label"], int(doc["size_bytes"]))] = doc
    result = run(plan_paths, out_path)
    # fit the times as the record keeps them (0.1 us), so the record reproduces the fit
    points = [
        replace(p, times_s=[round(t, 7) for t in p.times_s])
        for p in points_from_run(result, plans, topology, cores)
    ]
    fit = fit_settings(
        points,
        **({} if min_step_us is None else {"m_grid_us": np.array([float(min_step_us)])}),
        x_grid_us=X_GRID_US if exchange and min_step_us is not None else None,
        s_grid=S_GRID if switch else None,
    )
    if fit["usable"]:
        b = fit["bootstrap"]
        say(
            f"calibration: min step {fit['min_step_us']:g} us "
            f"({b['min_step_us_5_50_95'][0]:g}-{b['min_step_us_5_50_95'][2]:g}), message "
            f"overhead {fit['message_overhead_us']:g} us "
            f"({b['message_overhead_us_5_50_95'][0]:g}-{b['message_overhead_us_5_50_95'][2]:g})"
            f", exchange overhead {fit['exchange_overhead_us']:g} us "
            f"({b['exchange_overhead_us_5_50_95'][0]:g}-"
            f"{b['exchange_overhead_us_5_50_95'][2]:g}), switch overhead "
            f"{fit['switch_overhead']:g} ({b['switch_overhead_5_50_95'][0]:g}-"
            f"{b['switch_overhead_5_50_95'][2]:g}) over {cores} cores; rms log error "
            f"{fit['rms_log_error']:.3f} on {len(points)} programs"
        )
        for p, r in zip(points, fit["predicted_over_measured"], strict=True):
            say(
                f"  {p.label} ({p.algorithm}) {p.size_bytes} B: measured "
                f"{p.median_s * 1e3:.2f} ms, fitted {r:.2f}x"
            )
    else:
        say(f"calibration not usable: {fit['reason']}; keeping the defaults")
    return record(points, fit, result, reps, warmup, cores)


def repeat_ratios(rec: dict[str, Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    """The same program timed twice: the measured run's median over the calibration's, per
    plan label and size in both (how far the machine moved between the two, minutes apart)."""
    cal = {(p["label"], p["size_bytes"]): p["median_s"] for p in rec.get("programs", [])}
    out = []
    for e in result.get("results", []):
        c = cal.get((e["algorithm"], e["size_bytes"]))
        if c and e.get("median_s"):
            out.append(
                {
                    "label": e["algorithm"],
                    "size_bytes": e["size_bytes"],
                    "ratio": round(e["median_s"] / c, 3),
                }
            )
    return out
