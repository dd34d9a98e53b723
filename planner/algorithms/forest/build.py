"""The host forest's programs: a plan's trees, shares and piece sizes as lockstep steps, and
the host fan-in that the forest trades model time for (``FOREST.fan_in_tolerance``)."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.forest.plan import HostPlan
from syncplan.planner.algorithms.pipeline import piece_starts, piece_units, round_to_total


def _units_per_tree(w: np.ndarray, total: int) -> np.ndarray:
    return round_to_total(w * total / w.sum(), total)


def build_program(plan: HostPlan, fracs: np.ndarray, units: int, group: int = 1) -> Program:
    """The program: per lane, per piece, per tree a contiguous range of units; merged
    intra-host transfers cover ``group`` consecutive pieces of a lane."""
    trees, w = plan.trees, plan.w
    pieces = len(fracs)
    cum = piece_starts(fracs)
    live = [j for j in range(len(trees)) if w[j] > 0]
    per_tree = dict(zip(live, _units_per_tree(w[live], units), strict=True))
    nsteps = pieces + plan.offsets - 1
    steps: list[Step] = [[] for _ in range(nsteps)]
    by_lane: dict[int, list[int]] = defaultdict(list)
    for j in live:
        by_lane[trees[j].lane].append(j)
    base = 0
    for li in sorted(by_lane):
        js = by_lane[li]
        intra = plan.intra(li)
        nets = {j: plan.phases(j) for j in js}
        split = {j: plan.tree_intra(j) for j in js}
        for p in range(pieces):
            if p % group == 0:
                start = base
            ends: dict[tuple, tuple[int, int]] = {}  # split transfer -> (step, index)
            for j in js:
                u = int(per_tree[j])
                a, b = base, base + (round(u * cum[p + 1]) - round(u * cum[p]))
                base = b
                if a == b:
                    continue
                for off, src, dst, red, path in nets[j]:
                    steps[p + off].append(Transfer(src, dst, a, b, red, path))
                for key in split[j]:
                    off, src, dst, red, path = key
                    at = ends.get(key)
                    if at is not None and steps[at[0]][at[1]].hi == a:
                        lo = steps[at[0]][at[1]].lo  # the same transfer, now up to b
                        steps[at[0]][at[1]] = Transfer(src, dst, lo, b, red, path)
                    else:
                        ends[key] = (p + off, len(steps[p + off]))
                        steps[p + off].append(Transfer(src, dst, a, b, red, path))
            if (p % group == group - 1 or p == pieces - 1) and base > start:
                first = p // group * group
                for off, src, dst, red, path in intra:
                    step = first if off == 0 else p + off
                    steps[step].append(Transfer(src, dst, start, base, red, path))
    return Program(units, [s for s in steps if s])


def plan_fan_in(ctx: PlanContext, plan: HostPlan, fracs: np.ndarray, units: int) -> int:
    """``host_fan_in`` of ``build_program(plan, fracs, units, group)`` without building it
    (a quarter of a second a program on 64 ranks): only the trees' network transfers cross
    hosts (the gathers and hand-backs inside a host never do), and tree j's run in piece p
    wherever j's units in p are not zero, whatever the grouping of intra-host transfers."""
    host = [ctx.topo.host_of(r) for r in ctx.ranks]
    live = [j for j in range(len(plan.trees)) if plan.w[j] > 0]
    sizes = piece_units(_units_per_tree(plan.w[live], units), fracs)
    into: dict[tuple[int, str], set[str]] = defaultdict(set)
    for k, j in enumerate(live):
        pieces = np.flatnonzero(sizes[:, k] > 0).tolist()
        cross = {
            (off, host[src], host[dst])
            for off, src, dst, *_ in plan.phases(j)
            if host[src] != host[dst]
        }
        for off, src, dst in cross:
            for p in pieces:
                into[p + off, dst].add(src)
    return max((len(v) for v in into.values()), default=0)


def host_fan_in(ctx: PlanContext, program: Program) -> int:
    """The most hosts that send to one host in one step."""
    host = [ctx.topo.host_of(r) for r in ctx.ranks]
    worst = 0
    for step in program.steps:
        into: dict[str, set[str]] = defaultdict(set)
        for t in step:
            if host[t.src] != host[t.dst]:
                into[host[t.dst]].add(host[t.src])
        worst = max(worst, max((len(v) for v in into.values()), default=0))
    return worst


def max_fan_in(plan: HostPlan) -> int:
    """The most children any host has in any tree that carries data."""
    fan = 0
    for tree, w in zip(plan.trees, plan.w, strict=True):
        if w > 0:
            kids = Counter(p for p in tree.parent if p >= 0)
            fan = max(fan, max(kids.values(), default=0))
    return fan
