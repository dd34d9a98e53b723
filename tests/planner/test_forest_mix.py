"""Per-piece tree mixes of the host forest (planner/algorithms/forest/mix.py)."""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest import FOREST
from syncplan.planner.algorithms.forest import mix as mix_mod
from syncplan.planner.algorithms.forest import pricing as pricing_mod
from syncplan.planner.builders import star
from syncplan.planner.plan import make_plan
from syncplan.planner.topology import Topology
from syncplan.planner.verify import verify_plan

F = sys.modules["syncplan.planner.algorithms.forest.host"]
SIZE = 256 << 20
SLOW_STAR = star([12.5, 12.5, 12.5, 3.125])  # examples/star-one-slow.json


def _configs(topo: Topology) -> tuple[PlanContext, list[tuple]]:
    """The host forest's priced configurations, best first (forest_hosts' ``ranked``)."""
    ctx = PlanContext.create(topo, topo.endpoints(), SIZE)
    seen: dict[str, list[tuple]] = {}

    def grab(_ctx: PlanContext, ranked: list[tuple], _units: int) -> None:
        seen["ranked"] = ranked

    saved = F.mixed_program
    F.mixed_program = grab
    try:
        F.forest_hosts(ctx)
    finally:
        F.mixed_program = saved
    return ctx, [c for c in seen["ranked"] if c[3] == 1]


def test_a_mix_of_the_pipelines_own_shares_is_its_program() -> None:
    """Every piece mixing the trees in the plan's shares (x = fracs w) builds the pipelined
    program of build_program: same transfers per step, same cost-model time."""
    ctx, ranked = _configs(Topology.from_dict(SLOW_STAR))
    _, plan, width, group, fracs, *_ = ranked[0]
    plan.set_stagger(width)
    trees = [j for j in range(len(plan.trees)) if plan.w[j] > 0]
    units = 1 << 20
    x = np.outer(fracs, plan.w[trees])
    moves, groups = mix_mod.host_moves(plan, trees)
    mixed = mix_mod.build_mix(moves, groups, x / x.sum(), units, plan.offsets)
    piped = F.build_program(plan, fracs, units, group)
    assert [len(s) for s in mixed.steps] == [len(s) for s in piped.steps]
    assert ctx.cost.program_time(ctx.ranks, mixed, SIZE) == pytest.approx(
        ctx.cost.program_time(ctx.ranks, piped, SIZE), rel=1e-4
    )
    assert mix_mod.mix_transfers(moves, groups, x / x.sum(), units) == mixed.transfer_count


@pytest.mark.parametrize("name", ["star-one-slow", "degraded-rail"])
def test_the_mix_lp_never_loses_to_the_pipelines_own_shares(name: str) -> None:
    """The LP's mix, built and priced by the cost model, is no slower than the pipelined
    program of the same trees and piece count (the LP counts every arc's latency in every
    step it could be used, so the built program is never above the LP's time)."""
    from syncplan.planner.topology import load_topology

    topo = (
        Topology.from_dict(SLOW_STAR)
        if name == "star-one-slow"
        else load_topology(f"examples/{name}.json")
    )
    ctx, ranked = _configs(topo)
    _, plan, width, group, fracs, *_ = ranked[0]
    plan.set_stagger(width)
    trees = [j for j in range(len(plan.trees)) if plan.w[j] > 0]
    units = 1 << 20
    x = mix_mod.mix_lp(
        mix_mod.tree_profiles(plan, trees),
        plan.w[trees],
        plan.offsets,
        len(ctx.router.bw),
        len(fracs),
        SIZE,
    )
    assert x is not None and x.shape == (len(fracs), len(trees))
    assert x.min() >= 0 and x.sum() == pytest.approx(1.0)
    moves, groups = mix_mod.host_moves(plan, trees)
    lp = ctx.cost.program_time(
        ctx.ranks, mix_mod.build_mix(moves, groups, x, units, plan.offsets), SIZE
    )
    piped = ctx.cost.program_time(ctx.ranks, F.build_program(plan, fracs, units, group), SIZE)
    assert lp <= piped * (1 + 1e-4)
    if name == "degraded-rail":  # the ramp's idle NICs are what the mix fills
        assert lp < piped * 0.99


def test_forest_takes_the_mix_where_it_is_faster_and_it_verifies() -> None:
    topo = Topology.from_dict(SLOW_STAR)
    doc = make_plan(topo, topo.endpoints(), SIZE, "forest")
    assert doc["details"].get("mixed") is True
    rep = verify_plan(doc, topo)
    assert rep.ok, rep.error
    assert rep.simulated_time_s == pytest.approx(doc["predicted_time_s"], rel=1e-9)
    assert doc["lower_bound_time_s"] <= doc["predicted_time_s"] <= 1.005 * doc["lower_bound_time_s"]


def test_no_mix_outside_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    topo = Topology.from_dict(SLOW_STAR)
    before = make_plan(topo, topo.endpoints(), SIZE, "forest")
    monkeypatch.setattr(pricing_mod, "FOREST", replace(FOREST, mix_budget=0))
    after = make_plan(topo, topo.endpoints(), SIZE, "forest")
    assert "mixed" not in after["details"]
    assert after["predicted_time_s"] > before["predicted_time_s"]


def test_packing_mixes_keep_the_middle_and_never_lose_to_the_pipeline() -> None:
    """On a packing's pairs (any-topology path), a mix whose ends alone mix freely keeps the
    packing's shares in the middle pieces, verifies, and is no slower than the pipelined
    program of the same piece sizes."""
    from syncplan.core.program import program_to_doc
    from syncplan.planner.algorithms.forest import pipelined as fa
    from syncplan.planner.algorithms.packing import sets as packing_sets
    from syncplan.planner.algorithms.packing.schedule import PairSchedule, pair_trees
    from syncplan.planner.family_grids import torus

    topo = Topology.from_dict(torus(2, 3, gpus_per_host=2, degraded=1))
    ctx = PlanContext.create(topo, topo.endpoints(), SIZE)
    table = packing_sets.packings(ctx)
    key = min(table, key=lambda k: (table[k].theta, str(k)))
    sched = PairSchedule(ctx, pair_trees(table[key]))
    shares, _ = sched.fluid_shares()
    best = fa.Pipelined()
    units = 1 << 20
    fa.price_pipelines(sched, shares, SIZE, units, best)
    fracs, pairs = best.fracs, [j for j in range(len(shares)) if shares[j] > 0]
    ends = 2
    assert len(fracs) > 2 * ends + 2
    x = mix_mod.mix_lp(
        mix_mod.pair_profiles(sched, pairs),
        shares[pairs],
        sched.columns,
        len(ctx.router.bw),
        len(fracs),
        SIZE,
        ends=ends,
    )
    assert x is not None
    w = shares[pairs] / shares[pairs].sum()
    for row in x[ends : len(fracs) - ends]:
        assert row == pytest.approx(row.sum() * w, abs=1e-12)
    moves = [sched.transfers[j] for j in pairs]
    groups = [(list(range(len(pairs))), [])]
    prog = mix_mod.build_mix(moves, groups, x, units, sched.columns)
    doc = {"ranks": ctx.ranks, "size_bytes": SIZE, "program": program_to_doc(prog)}
    rep = verify_plan(doc, topo)
    assert rep.ok, rep.error
    mixed = ctx.cost.program_time(ctx.ranks, prog, SIZE)
    assert rep.simulated_time_s == pytest.approx(mixed, rel=1e-9)
    piped = ctx.cost.program_time(ctx.ranks, sched.build(shares, fracs, units), SIZE)
    assert mixed <= piped * (1 + 1e-4)
    assert mix_mod.mix_cost(len(fracs), len(pairs), ends) < mix_mod.mix_cost(len(fracs), len(pairs))


def test_mixed_plans_repeat() -> None:
    """The interior point is deterministic: the same request gives the same program."""
    topo = Topology.from_dict(SLOW_STAR)
    a = make_plan(topo, topo.endpoints(), SIZE, "forest")
    b = make_plan(topo, topo.endpoints(), SIZE, "forest")
    assert a["details"].get("mixed") is True
    assert a["program"] == b["program"]
    assert a["predicted_time_s"] == b["predicted_time_s"]


def test_one_host_takes_the_faster_packing_within_the_fan_in_tolerance() -> None:
    """With one host neither program has host fan-in: the packing, faster than the (mixed)
    host forest by less than FAN_IN_TOLERANCE, wins (an 8-GPU full mesh)."""
    from syncplan.planner.families import random_family

    topo = Topology.from_dict(random_family("full_mesh", 10))
    hosts = F.forest_hosts(PlanContext.create(topo, topo.endpoints(), SIZE))
    doc = make_plan(topo, topo.endpoints(), SIZE, "forest")
    assert doc["details"]["path"] == "any-topology packing"
    assert doc["predicted_time_s"] < hosts.predicted_time_s
    assert hosts.predicted_time_s * (1 - FOREST.fan_in_tolerance) < doc["predicted_time_s"]
