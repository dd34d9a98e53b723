"""Ring all-reduce: reduce-scatter then all-gather around one or more rings.

Several rings (channels) run side by side, each over its share of the buffer: both
directions of full-duplex links, and one ring per NIC (rail) where hosts have several. Ranks
of a host stay adjacent so each ring crosses the network once per host.
"""

from __future__ import annotations

from functools import partial

from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import PRICE_BUDGET, price, ready


def ring_orders(ctx: PlanContext) -> dict[str, list[list[int]]]:
    """Candidate channel sets, by name: each channel is a cyclic order of rank indices."""
    # hosts under the same switches (a rack) stay adjacent, so the ring leaves a rack once
    paired = sorted(
        zip(ctx.host_groups, ctx.host_uplinks, strict=True),
        key=lambda gu: (sorted(gu[1]), gu[0][0]),
    )
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
        step.append(Transfer(order[i], order[(i + 1) % n], base + chunk, base + chunk + 1, reduce))
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


def coarse_ring_program(channels: list[list[int]], units: int) -> Program:
    """The ring program on ``units`` < len(channels) * n units (a buffer of fewer bytes than
    ring chunks): chunk k of the ring is units [k*units//L, (k+1)*units//L) (L chunks), and
    only the transfers of non-empty chunks are built; steps are never empty (every step
    moves every chunk once)."""
    n = len(channels[0])
    big = len(channels) * n
    live = [k for k in range(big) if k * units // big < (k + 1) * units // big]
    rs: list[Step] = [[] for _ in range(n - 1)]
    ag: list[Step] = [[] for _ in range(n - 1)]
    for k in live:
        c, j = divmod(k, n)
        order, u = channels[c], k * units // big
        for s in range(n - 1):
            i = (j + s) % n  # reduce-scatter: position i sends chunk (i - s) mod n
            rs[s].append(Transfer(order[i], order[(i + 1) % n], u, u + 1, True))
            i = (j - 1 + s) % n  # all-gather: position i sends chunk (i + 1 - s) mod n
            ag[s].append(Transfer(order[i], order[(i + 1) % n], u, u + 1, False))
    return Program(units, rs + ag)


def ring(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("ring", 0.0, lambda: Program(1, []), {"channels": 0})
    best: Candidate | None = None
    for name, channels in ring_orders(ctx).items():
        units = len(channels) * n
        if ctx.size_bytes < units:  # chunks would be finer than a byte
            coarse = ctx.size_bytes
            if 2 * (n - 1) * coarse > PRICE_BUDGET:
                continue
            prog = coarse_ring_program(channels, coarse)
            cand = Candidate(
                "ring",
                price(ctx, prog),
                ready(prog),
                {"channels": len(channels), "variant": name, "units": coarse},
            )
        else:
            first = [
                t for c, order in enumerate(channels) for t in ring_step(order, c * n, 0, True)
            ]
            step = ctx.cost.step_time(ctx.ranks, first, ctx.size_bytes / units)
            cand = Candidate(
                "ring",
                2 * (n - 1) * step,
                partial(build_ring_program, channels),
                {"channels": len(channels), "variant": name},
            )
        if best is None or cand.predicted_time_s < best.predicted_time_s:
            best = cand
    if best is None:
        raise InfeasibleError(
            f"ring: {ctx.size_bytes} bytes over {n} ranks is fewer bytes than ring chunks, and "
            f"a ring of 1-byte chunks would take {2 * (n - 1) * ctx.size_bytes} transfers "
            f"(limit {PRICE_BUDGET})"
        )
    return best
