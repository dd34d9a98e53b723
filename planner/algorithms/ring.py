"""Ring all-reduce: reduce-scatter then all-gather around one or more rings.

Several rings (channels) run side by side, each over its share of the buffer: both
directions of full-duplex links, and one ring per NIC (rail) where hosts have several. Ranks
of a host stay adjacent so each ring crosses the network once per host.
"""

from __future__ import annotations

from planner.algorithms.base import Candidate, PlanContext
from planner.program import Program, Step, Transfer


def ring_orders(ctx: PlanContext) -> dict[str, list[list[int]]]:
    """Candidate channel sets, by name: each channel is a cyclic order of rank indices."""
    # hosts under the same switches (a rack) stay adjacent, so the ring leaves a rack once
    paired = sorted(zip(ctx.host_groups, ctx.host_uplinks, strict=True),
                    key=lambda gu: (sorted(gu[1]), gu[0][0]))
    groups = [g for g, _ in paired]
    forward = [i for g in groups for i in g]
    sets = {"1 ring": [forward], "2 rings (both directions)": [forward, forward[::-1]]}
    local = min(len(g) for g in groups)
    nics = min(ctx.nics_per_host, local)
    if nics > 1:
        rotated = []
        for c in range(nics):
            shift = c * local // nics
            rotated.append([i for g in groups for i in g[shift:] + g[:shift]])
        sets[f"{nics} rings (one per NIC)"] = rotated
        both = rotated + [o[::-1] for o in rotated]
        sets[f"{2 * nics} rings (one per NIC, both directions)"] = both
    return sets


def ring_step(order: list[int], base: int, s: int, reduce: bool) -> Step:
    """Step ``s`` of a ring reduce-scatter (``reduce``) or all-gather over units base..base+n-1.

    After the n-1 reduce-scatter steps, position i holds the full sum of chunk (i + 1) mod n;
    the all-gather starts from exactly that state.
    """
    n = len(order)
    step = []
    for i in range(n):
        chunk = (i - s) % n if reduce else (i + 1 - s) % n
        step.append(Transfer(order[i], order[(i + 1) % n], base + chunk, base + chunk + 1,
                             reduce))
    return step


def build_ring_program(channels: list[list[int]]) -> Program:
    n = len(channels[0])
    rs: list[Step] = [[] for _ in range(n - 1)]
    ag: list[Step] = [[] for _ in range(n - 1)]
    for c, order in enumerate(channels):
        for s in range(n - 1):
            rs[s].extend(ring_step(order, c * n, s, True))
            ag[s].extend(ring_step(order, c * n, s, False))
    return Program(len(channels) * n, rs + ag)


def ring(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("ring", 0.0, lambda: Program(1, []), {"channels": 0})
    best: Candidate | None = None
    for name, channels in ring_orders(ctx).items():
        units = len(channels) * n
        first = [t for c, order in enumerate(channels) for t in ring_step(order, c * n, 0, True)]
        step = ctx.cost.step_time(ctx.ranks, first, ctx.size_bytes / units)
        cand = Candidate("ring", 2 * (n - 1) * step,
                         lambda ch=channels: build_ring_program(ch),
                         {"channels": len(channels), "variant": name})
        if best is None or cand.predicted_time_s < best.predicted_time_s:
            best = cand
    assert best is not None
    return best
