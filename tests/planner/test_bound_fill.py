"""The host partition bound with aggregation fill and per-step latency (planner.bound_fill).

It must stay below every reduce-then-broadcast program (brute force on tiny clusters whose
hosts hold two ranks, every algorithm on the examples), and it must bind where the fill is
real: rail clusters, whose NICs idle while a host aggregates."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest
from syncplan.core.errors import InfeasibleError
from syncplan.planner import bound_fill
from syncplan.planner.algorithms import ALGORITHMS, OUTSIDE_REDUCE_BROADCAST
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.bound import lower_bound
from syncplan.planner.families import random_family
from syncplan.planner.topology import Topology

sys.path.insert(0, str(Path(__file__).parent))
from test_families_property import brute_force

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> Topology:
    return Topology.from_dict(json.loads((EXAMPLES / f"{name}.json").read_text()))


def _plain(topo: Topology, ranks: list[str], size: int, monkeypatch) -> float:
    """The bound without the fill LP."""
    with monkeypatch.context() as m:
        m.setattr(bound_fill, "MAX_CLASSES", 0)
        return lower_bound(PlanContext.create(topo, ranks, size)).time_s


def _two_and_one(topo: Topology) -> list[str] | None:
    """Two ranks of one host and one of another, or None."""
    hosts: dict[str, list[str]] = {}
    for e in topo.endpoints():
        hosts.setdefault(topo.host_of(e), []).append(e)
    multi = [h for h, v in hosts.items() if len(v) >= 2]
    if not multi or len(hosts) < 2:
        return None
    other = next(v[0] for h, v in hosts.items() if h != multi[0])
    return [*hosts[multi[0]][:2], other]


@pytest.mark.parametrize(
    "family", ["mesh2d", "torus", "host_ring", "random_two_switch", "directed_cluster"]
)
def test_never_above_brute_force_with_two_ranks_on_a_host(family: str, monkeypatch) -> None:
    active = 0
    for seed in range(3):
        topo = Topology.from_dict(random_family(family, seed, max_ranks=8))
        ranks = _two_and_one(topo)
        if ranks is None:
            continue
        for size in (4096, 1 << 20, 256 << 20):
            ctx = PlanContext.create(topo, ranks, size)
            bound = lower_bound(ctx).time_s
            best, _ = brute_force(ctx, 2, 1, 2)
            assert bound <= best * (1 + 1e-9), (family, seed, size)
            active += bound > _plain(topo, ranks, size, monkeypatch) * (1 + 1e-9)
    assert active, f"the fill LP never raised the bound on {family}"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("dgx-4x8-rail", marks=pytest.mark.slow),
        pytest.param("degraded-rail", marks=pytest.mark.slow),
        "host-ring-4x2",
    ],
)  # the rail clusters: 5 s each
@pytest.mark.parametrize("size", [4096, 1 << 20, 256 << 20])
def test_every_program_of_the_family_is_above_it(name: str, size: int, monkeypatch) -> None:
    topo = _example(name)
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, size)
    bound = lower_bound(ctx).time_s
    for algo, fn in ALGORITHMS.items():
        if algo in OUTSIDE_REDUCE_BROADCAST:
            continue
        try:
            cand = fn(ctx)
        except InfeasibleError:
            continue
        assert bound <= cand.predicted_time_s * (1 + 1e-9), (algo, cand.predicted_time_s)
    if size >= 1 << 20:  # the NICs idle while the hosts aggregate
        assert bound > _plain(topo, ranks, size, monkeypatch) * (1.01 if "rail" in name else 1.001)


def test_the_lp_never_rises_with_more_steps() -> None:
    """The search bounds ranges of K by this (an empty step can always be added)."""
    args = ([8, 8], [3, 1], [1.0, 0.9], [1.0, 0.9], [12.0, 12.0], 3.9)
    for pattern in ((False, False), (True, True), (True, False)):
        values = [bound_fill._lp(k, *pattern, *args) for k in range(4, 16)]
        assert all(b <= a * (1 + 1e-7) for a, b in itertools.pairwise(values))
        assert values[-1] >= bound_fill._fluid(args[1], *args[2:4], args[5]) * (1 - 1e-7)


def test_alike_hosts_as_one_class_give_the_same_lp() -> None:
    """Classes of alike hosts stand for their members (the LP is symmetric in them)."""
    for k in (4, 7):
        one = bound_fill._lp(k, True, True, [4, 2], [2, 1], [1.0, 0.5], [1.0, 0.5], [9.0, 4.0], 2.5)
        each = bound_fill._lp(
            k,
            True,
            True,
            [4, 4, 2],
            [1, 1, 1],
            [1.0, 1.0, 0.5],
            [1.0, 1.0, 0.5],
            [9.0, 9.0, 4.0],
            2.5,
        )
        assert one == pytest.approx(each, rel=1e-7)


def test_the_search_finds_the_least_step_count() -> None:
    """``_least`` against every K solved one by one."""

    def lp(k: int) -> float:
        return 10.0 + 40.0 / k

    def charge(k: int) -> float:
        return 0.7 * k

    exact = min(lp(k) + charge(k) for k in range(2, 200))
    found = bound_fill._least(lp, charge, 2, 10.0, 64)
    assert found <= exact + 1e-12
    assert found >= exact * (1 - bound_fill.TOLERANCE) - 1e-12


def test_not_applied_to_hosts_of_one_rank(monkeypatch) -> None:
    topo = _example("mesh-4x4")
    ctx = PlanContext.create(topo, topo.endpoints(), 256 << 20)
    assert bound_fill.fill_bound(ctx) == 0.0
