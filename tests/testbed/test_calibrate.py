"""The loop's calibration fit (calibrate.py): synthetic points and a recorded calibration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from syncplan.planner.cost import overlapped

from syncplan.testbed.calibrate import (
    LARGE_SIZE,
    MIN_POINTS,
    S_GRID,
    X_GRID_US,
    Point,
    fit_settings,
    points_from_record,
    record,
    repeat_ratios,
)
from syncplan.testbed.loop import LoopConfig

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
# (wire s, message ends) per step: a star (2 steps of 7 ends), a ring (14 steps of 8 ends
# over 2 cores; 2 ends on cores of their own), a one-step direct exchange per phase (56
# ends), at 4 and 64 KiB
STAR = [(2e-5, 7.0)] * 2
RING = [(1e-5, 8.0)] * 14
RING2 = [(1e-5, 2.0)] * 14
DIRECT = [(3e-5, 56.0)] * 2
STAR64 = [(2.6e-3, 7.0)] * 2
RING64 = [(3e-4, 8.0)] * 14


def _points(m: float, o: float, noise: list[float] | None = None) -> list[Point]:
    out = []
    for name, feats in (
        ("star", STAR),
        ("ring", RING),
        ("direct", DIRECT),
        ("star64", STAR64),
        ("ring64", RING64),
        ("ring2", RING2),
    ):
        t = sum(overlapped(max(w, m), e, o) for w, e in feats)
        times = [t * f for f in (noise or [1.0])]
        out.append(Point(name, name, 4096, times, feats))
    return out


@pytest.mark.parametrize(("m_us", "o_us"), [(50.0, 121.0), (0.0, 60.0), (300.0, 20.0)])
def test_fit_recovers_the_settings_that_made_the_times(m_us: float, o_us: float) -> None:
    fit = fit_settings(_points(m_us * 1e-6, o_us * 1e-6), bootstrap=5)
    assert fit["usable"]
    assert fit["message_overhead_us"] == pytest.approx(o_us, abs=1.0)
    assert fit["min_step_us"] == pytest.approx(m_us, abs=10.0)
    assert fit["rms_log_error"] < 0.01
    assert all(r == pytest.approx(1.0, abs=0.02) for r in fit["predicted_over_measured"])


def test_fit_takes_medians_so_one_stalled_repetition_does_not_move_it() -> None:
    # every program had one repetition 20x slow (a TCP timeout, a descheduled rank)
    fit = fit_settings(_points(50e-6, 121e-6, [1.0, 0.98, 1.02, 20.0, 1.01]), bootstrap=50)
    assert fit["message_overhead_us"] == pytest.approx(121.0, abs=3.0)
    lo, _mid, hi = fit["bootstrap"]["message_overhead_us_5_50_95"]
    assert lo <= 121.0 + 3 and hi >= 121.0 - 3


def test_with_the_floor_fixed_only_the_overhead_is_fitted() -> None:
    fit = fit_settings(_points(50e-6, 121e-6), m_grid_us=np.array([50.0]), bootstrap=5)
    assert fit["fitted"] == ["message_overhead"] and fit["min_step_us"] == 50.0
    assert fit["message_overhead_us"] == pytest.approx(121.0, abs=1.0)
    assert not fit["at_grid_edge"]["min_step"]
    both = fit_settings(_points(50e-6, 121e-6), bootstrap=5)
    assert both["fitted"] == ["min_step", "message_overhead"]


def test_fit_separates_the_exchange_term_from_the_message_term() -> None:
    # the direct exchange's 56 ends per step are all exchanged; the star's and ring's none
    pts = []
    for name, feats in (
        ("star", STAR),
        ("ring", RING),
        ("direct", DIRECT),
        ("star64", STAR64),
        ("ring64", RING64),
    ):
        xends = [e if name == "direct" else 0.0 for _, e in feats]
        t = sum(overlapped(max(w, 50e-6), e, 40e-6) for w, e in feats) + 90e-6 * sum(xends)
        pts.append(Point(name, name, 4096, [t], feats, xends))
    fit = fit_settings(pts, m_grid_us=np.array([50.0]), x_grid_us=X_GRID_US, bootstrap=5)
    assert fit["fitted"] == ["message_overhead", "exchange_overhead"]
    assert fit["message_overhead_us"] == pytest.approx(40.0, abs=1.0)
    assert fit["exchange_overhead_us"] == pytest.approx(90.0, abs=2.0)
    assert fit["rms_log_error"] < 0.01
    # without the term the same times are priced worse
    assert fit_settings(pts, m_grid_us=np.array([50.0]), bootstrap=5)["rms_log_error"] > 0.05


def test_fit_takes_the_switch_term_from_the_large_programs() -> None:
    # a 1 MiB ring (14 steps, no switch) and halving-doubling (6 steps, switched wire in 4
    # of them) priced alike without the term; the measured times carry s = 0.36
    pts = []
    for name, feats in (
        ("star", STAR),
        ("ring", RING),
        ("direct", DIRECT),
        ("star64", STAR64),
        ("ring64", RING64),
    ):
        t = sum(overlapped(max(w, 50e-6), e, 40e-6) for w, e in feats)
        pts.append(Point(name, name, 4096, [t], feats))
    ring = [(5.24e-3, 8.0)] * 14
    hd = [(w, 8.0) for w in (21e-3, 10.5e-3, 5.2e-3, 5.2e-3, 10.5e-3, 21e-3)]
    swires = [0.0, 10.5e-3, 5.2e-3, 0.0, 10.5e-3, 21e-3]
    for name, feats, sw in (("ring", ring, [0.0] * 14), ("hd", hd, swires)):
        t = sum(overlapped(max(w, 50e-6), e, 40e-6) for w, e in feats) + 0.36 * sum(sw)
        pts.append(Point(name, name, LARGE_SIZE, [t], feats, (), sw))
    fit = fit_settings(pts, m_grid_us=np.array([50.0]), s_grid=S_GRID, bootstrap=5)
    assert fit["fitted"] == ["message_overhead", "switch_overhead"]
    assert fit["message_overhead_us"] == pytest.approx(40.0, abs=1.0)
    assert fit["switch_overhead"] == pytest.approx(0.36, abs=0.01)
    assert fit["rms_log_error"] < 0.01
    plain = fit_settings(pts, m_grid_us=np.array([50.0]), bootstrap=5)
    assert plain["switch_overhead"] == 0.0 and plain["rms_log_error"] > fit["rms_log_error"]


def test_too_few_programs_leave_the_fit_unusable() -> None:
    fit = fit_settings(_points(50e-6, 121e-6)[: MIN_POINTS - 1])
    assert not fit["usable"] and "needed" in fit["reason"]


def test_the_fit_is_deterministic() -> None:
    pts = _points(80e-6, 90e-6, [1.0, 1.3, 0.9, 1.1])
    assert fit_settings(pts) == fit_settings(pts)


@pytest.mark.parametrize("scenario", ["homogeneous", "one-slow"])
def test_recorded_calibration_refits_to_what_the_loop_planned_with(scenario: str) -> None:
    path = RESULTS / f"testbed-small-{scenario}.json"
    loop = json.loads(path.read_text())["loop"]
    rec = loop["calibration"]
    points = points_from_record(rec)
    assert len(points) >= MIN_POINTS
    assert all(len(p.times_s) == rec["reps"] for p in points)
    grid = (
        {}
        if "min_step" in rec["fit"]["fitted"]
        else {"m_grid_us": np.array([rec["fit"]["min_step_us"]])}
    )
    if "exchange_overhead" in rec["fit"]["fitted"]:
        grid["x_grid_us"] = X_GRID_US
    if "switch_overhead" in rec["fit"]["fitted"]:
        grid["s_grid"] = S_GRID
    fit = fit_settings(points, bootstrap=rec["fit"]["bootstrap"]["n"], **grid)
    assert _within(rec["fit"], fit)  # records before session 8 lack the exchange term
    # the service planned with the fitted values
    x, s = fit["exchange_overhead_us"], fit["switch_overhead"]
    assert (
        loop["min_step_us"],
        loop["message_overhead_us"],
        loop.get("exchange_overhead_us", 0.0),
        loop.get("switch_overhead", 0.0),
    ) == (fit["min_step_us"], fit["message_overhead_us"], x, s)
    for p, entry in zip(points, rec["programs"], strict=True):
        assert p.predict(
            fit["min_step_us"] * 1e-6, fit["message_overhead_us"] * 1e-6, x * 1e-6, s
        ) == pytest.approx(entry["fitted_s"], rel=1e-4)


def _within(recorded: object, fit: object) -> bool:
    """Every key of ``recorded`` (nested) has the same value in ``fit``."""
    if isinstance(recorded, dict):
        return isinstance(fit, dict) and all(
            k in fit and _within(v, fit[k]) for k, v in recorded.items()
        )
    return recorded == fit


def test_loop_calibrates_by_default_and_checks_its_repetitions() -> None:
    cfg = LoopConfig(sizes=[4096])
    assert cfg.calibrate and not cfg.calibrate_min_step
    with pytest.raises(Exception, match="reps"):
        LoopConfig(sizes=[4096], calibration_reps=0)
    assert np.isfinite(LoopConfig(sizes=[4096], calibrate=False).message_overhead_us)


def test_repeat_ratios_pair_the_same_program_in_both_runs() -> None:
    rec = {
        "programs": [
            {"label": "star", "size_bytes": 4096, "median_s": 0.002},
            {"label": "ring", "size_bytes": 4096, "median_s": 0.008},
        ]
    }
    result = {
        "results": [
            {"algorithm": "star", "size_bytes": 4096, "median_s": 0.003},
            {"algorithm": "star", "size_bytes": 65536, "median_s": 0.03},
            {"algorithm": "gloo", "size_bytes": 4096, "median_s": 0.02},
        ]
    }
    assert repeat_ratios(rec, result) == [{"label": "star", "size_bytes": 4096, "ratio": 1.5}]


def test_a_record_lists_the_sizes_and_algorithms_it_timed() -> None:
    """The 1 MiB ring and halving-doubling that fit the switch term are in the record's
    ``sizes`` and ``algorithms`` (they listed only the 4 and 64 KiB references)."""
    rec = json.loads((RESULTS / "testbed-small-homogeneous.json").read_text())["loop"]
    points = points_from_record(rec["calibration"])
    out = record(points, rec["calibration"]["fit"], {}, 3, 1, 1)
    assert out["sizes"] == sorted({p.size_bytes for p in points})
    assert LARGE_SIZE in out["sizes"] and 4096 in out["sizes"]
    assert set(out["algorithms"]) == {p.algorithm for p in points}
    assert points_from_record(out) == points
