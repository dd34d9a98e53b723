"""The lane study's LP (bench/planner_scale/lane_study.py) against a hand-computed case."""

from __future__ import annotations

import numpy as np
import pytest

from tests.planner.conftest import load_bench_script


@pytest.fixture(scope="module")
def study():
    return load_bench_script("lane_study")


def test_stars_on_equal_hosts_take_two_loaded_steps(study) -> None:
    # 8 equal hosts, one star per root: equal shares give every NIC 7/8 of the lane's bytes
    # up (offset of a depth-1 leaf) and 7/8 down, in two different steps per piece.
    m = 8
    cap = np.full(m, 25.0)
    stars = [(r, [-1 if h == r else r for h in range(m)]) for r in range(m)]
    profiles = [study.tree_profile(r, p) for r, p in stars]
    seconds, used = study.best_time(cap, profiles, pieces=1)
    loaded = 2 * (m - 1) / m * study.LANE_BYTES / 25e9
    assert used == m
    assert seconds == pytest.approx(loaded + study.OFFSETS * study.STEP_LATENCY_S, rel=1e-6)


def test_a_slow_leaf_everywhere_paces_every_step(study) -> None:
    m = 8
    cap = np.full(m, 25.0)
    cap[3] = 12.5
    stars = [(r, [-1 if h == r else r for h in range(m)]) for r in range(m) if r != 3]
    seconds, _ = study.best_time(cap, [study.tree_profile(r, p) for r, p in stars], pieces=1)
    # host 3 roots nothing: it sends the whole lane up and hears it all back, at half rate
    assert seconds >= 2 * study.LANE_BYTES / 12.5e9
