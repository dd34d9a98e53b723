"""Property tests over random members of every topology family (planner.families).

Every algorithm of the table emits a program the independent verifier accepts at its
predicted time, and the lower bound is never above the best program; on 2-3 ranks the bound
is never above a brute-force optimum over small reduce-then-broadcast programs (an upper
bound on the family's optimum, so ``bound <= brute force`` must hold).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import cache

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Transfer, program_to_doc
from syncplan.planner.algorithms import ALGORITHMS, OUTSIDE_REDUCE_BROADCAST
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.bound import lower_bound
from syncplan.planner.bound_any import lower_bound_any
from syncplan.planner.families import FAMILIES, random_family
from syncplan.planner.plan import with_routes
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

SETTINGS = settings(
    max_examples=3,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def check_all_algorithms(topo: Topology, ranks: list[str], size: int) -> dict[str, str]:
    """Verify every feasible algorithm's program; return {algorithm: infeasibility reason}."""
    ctx = PlanContext.create(topo, ranks, size)
    bound = lower_bound(ctx)
    infeasible, times = {}, {}
    for name, algorithm in ALGORITHMS.items():
        try:
            cand = algorithm(ctx)
        except InfeasibleError as exc:
            assert str(exc), name
            infeasible[name] = str(exc)
            continue
        program = with_routes(cand.build(), ranks, ctx.router)
        doc = {"ranks": ranks, "size_bytes": size, "program": program_to_doc(program)}
        rep = verify_plan(doc, topo)
        assert rep.ok, f"{name}: {rep.error}"
        assert rep.simulated_time_s == pytest.approx(cand.predicted_time_s, rel=1e-6), name
        times[name] = cand.predicted_time_s
    assert times, f"no algorithm served the request: {infeasible}"
    family = [t for name, t in times.items() if name not in OUTSIDE_REDUCE_BROADCAST]
    if family:  # the reduce-then-broadcast bound holds for that family only
        assert bound.time_s <= min(family) * (1 + 1e-9), (bound, times)
    any_bound = lower_bound_any(ctx, bound.cut_bandwidth_Bps)
    assert any_bound.time_s <= min(times.values()) * (1 + 1e-9), (any_bound, times)
    return infeasible


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@SETTINGS
@given(seed=st.integers(0, 10**6), size=st.sampled_from([4096, 256 << 20]))
def test_every_algorithm_on_random_members(
    family: str, seed: int, size: int, record_property: pytest.RecordProperty
) -> None:
    topo = Topology.from_dict(random_family(family, seed, max_ranks=12))
    infeasible = check_all_algorithms(topo, topo.endpoints(), size)
    for name, reason in infeasible.items():
        record_property(f"infeasible:{family}:{seed}:{name}", reason)


# ---- brute force on 2-3 ranks -------------------------------------------------------------


def _trees(root: int, n: int) -> list[list[list[tuple[int, int]]]]:
    """Reduce trees into ``root`` over ranks 0..n-1, as levels of (child, parent) edges:
    a star, or (n = 3) a chain through either other rank."""
    others = [r for r in range(n) if r != root]
    trees = [[[(o, root) for o in others]]]
    if n == 3:
        for a, b in itertools.permutations(others):
            trees.append([[(a, b)], [(b, root)]])
    return trees


def _unit_options(n: int, max_offset: int) -> list[list[list[tuple[int, int, bool]]]]:
    """Per unit: its transfers by step, for every root, reduce tree, broadcast tree (a reduce
    tree reversed) and start step."""
    options = []
    for root in range(n):
        for red, bc in itertools.product(_trees(root, n), repeat=2):
            levels = [[(s, d, True) for s, d in lv] for lv in red]
            levels += [[(d, s, False) for s, d in lv] for lv in reversed(bc)]
            for offset in range(max_offset + 1):
                options.append([[] for _ in range(offset)] + levels)
    return options


def _paths(ctx: PlanContext, src: int, dst: int, k: int) -> list[tuple[str, ...] | None]:
    """The router's path (None) and up to k-1 more simple paths, fastest first."""
    if k == 1:
        return [None]
    weight = {(u, v): d["lat"] + (1 << 20) / d["bw"] for u, v, d in ctx.topo.graph.edges(data=True)}
    gen = nx.shortest_simple_paths(
        ctx.topo.graph, ctx.ranks[src], ctx.ranks[dst], weight=lambda u, v, _d: weight[(u, v)]
    )
    return [None, *(tuple(p) for p in itertools.islice(gen, k))][:k]


def brute_force(
    ctx: PlanContext, units: int, paths: int = 1, max_offset: int = 2
) -> tuple[float, Program]:
    """The fastest program whose ``units`` equal units each follow one unit option, every
    transfer on one of ``paths`` routes."""
    n = len(ctx.ranks)
    bpu = ctx.size_bytes / units
    routes = {(a, b): _paths(ctx, a, b, paths) for a in range(n) for b in range(n) if a != b}
    options = []
    for opt in _unit_options(n, max_offset):
        flat = [t for level in opt for t in level]
        for choice in itertools.product(*(routes[(s, d)] for s, d, _ in flat)):
            it = iter(choice)
            options.append([[(s, d, r, next(it)) for s, d, r in level] for level in opt])

    @cache
    def step_time(step: tuple[Transfer, ...]) -> float:
        return ctx.cost.step_time(ctx.ranks, step, bpu) if step else 0.0

    best: tuple[float, Program] | None = None
    for combo in itertools.combinations_with_replacement(options, units):
        steps: list[list[Transfer]] = [[] for _ in range(max(map(len, combo)))]
        for u, option in enumerate(combo):
            for k, level in enumerate(option):
                steps[k].extend(Transfer(s, d, u, u + 1, r, p) for s, d, r, p in level)
        t = sum(step_time(tuple(st)) for st in steps)
        if best is None or t < best[0]:
            best = (t, Program(units, [st for st in steps if st]))
    assert best is not None
    return best


def _tiny_ranks(topo: Topology, seed: int, k: int) -> Sequence[str]:
    ends = topo.endpoints()
    step = max(1, len(ends) // k)
    start = seed % len(ends)
    return [ends[(start + i * step) % len(ends)] for i in range(k)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    "nranks,units,paths,offsets",
    [
        (2, 4, 1, 2),  # 126 programs: fast
        pytest.param(3, 2, 1, 2, marks=pytest.mark.slow),  # 3,321 programs
        pytest.param(2, 3, 3, 1, marks=pytest.mark.slow),  # 3 routes per transfer: 7,770 programs
    ],
)
def test_bound_never_above_brute_force_on_tiny_cases(
    family: str, nranks: int, units: int, paths: int, offsets: int
) -> None:
    for seed in range(2):
        topo = Topology.from_dict(random_family(family, seed, max_ranks=8))
        ranks = list(_tiny_ranks(topo, seed, nranks))
        for size in (4096, 256 << 20):
            ctx = PlanContext.create(topo, ranks, size)
            best_t, program = brute_force(ctx, units, paths, offsets)
            doc = {
                "ranks": ranks,
                "size_bytes": size,
                "program": program_to_doc(with_routes(program, ranks, ctx.router)),
            }
            rep = verify_plan(doc, topo)  # the enumerated programs are all-reduces
            assert rep.ok, rep.error
            assert rep.simulated_time_s == pytest.approx(best_t, rel=1e-6)
            assert lower_bound(ctx).time_s <= best_t * (1 + 1e-9), (family, seed, ranks, size)
