"""Helpers the latency-oriented algorithms share: unit caps, rank orders, leaders, pricing.

A program's ``units`` cut the buffer into equal parts; a unit must never be finer than a
byte, so an algorithm that wants ``L`` logical units on a buffer of fewer than ``L`` bytes
runs on ``min(L, size_bytes)`` units instead (``coarsen``).
"""

from __future__ import annotations

from collections.abc import Callable

from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Transfer
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.bound_parts import caps, parts_by_host

# Most transfers an algorithm builds to price one variant exactly (a coarsened ring or
# hierarchical program on a buffer smaller than its unit count, a pipelined tree).
PRICE_BUDGET = 200_000


def ready(program: Program) -> Callable[[], Program]:
    """A builder of ``program``, built already (a Candidate's ``build``)."""
    return lambda: program


def coarsen(program: Program, units: int) -> Program:
    """The same program on ``units`` (< program.units) units.

    Logical unit k becomes units [k*units//L, (k+1)*units//L) (L = program.units): each is
    empty or one unit, and the non-empty ones tile the buffer. Every unit of an all-reduce
    program is independent of the others, so the result is correct when the input is;
    transfers and steps left empty are dropped.
    """
    big = program.units
    if units >= big:
        return program

    def m(x: int) -> int:
        return x * units // big

    steps = []
    for step in program.steps:
        out = [
            Transfer(t.src, t.dst, m(t.lo), m(t.hi), t.reduce, t.path)
            for t in step
            if m(t.lo) < m(t.hi)
        ]
        if out:
            steps.append(out)
    return Program(units, steps)


def price(ctx: PlanContext, program: Program) -> float:
    """The cost model's time for ``program`` on this request."""
    return ctx.cost.program_time(ctx.ranks, program, ctx.size_bytes)


def priced(
    ctx: PlanContext,
    name: str,
    variants: dict[str, Callable[[], Program]],
    details: dict | None = None,
) -> Candidate:
    """Build and price every variant; the fastest as a Candidate (its program rebuilt)."""
    best: tuple[float, str, Program] | None = None
    for label, build in variants.items():
        prog = build()
        t = price(ctx, prog)
        if best is None or t < best[0]:
            best = (t, label, prog)
    if best is None:
        raise InfeasibleError(f"{name}: no variant applies")
    t, label, prog = best
    return Candidate(
        name, t, ready(prog), {"variant": label, "steps": len(prog.steps), **(details or {})}
    )


def host_order(ctx: PlanContext) -> list[int]:
    """Rank indices host by host; hosts under the same switches adjacent (as the ring)."""
    paired = sorted(
        zip(ctx.host_groups, ctx.host_uplinks, strict=True),
        key=lambda gu: (sorted(gu[1]), gu[0][0]),
    )
    return [i for g, _ in paired for i in g]


def leaders(ctx: PlanContext) -> list[int]:
    """Per host group: the rank with the least route latency to a rank of another host."""
    groups = ctx.host_groups
    if len(groups) < 2:
        return [g[0] for g in groups]
    out = []
    for k, group in enumerate(groups):
        other = ctx.ranks[groups[(k + 1) % len(groups)][0]]

        def lat(i: int, other: str = other) -> float:
            return ctx.cost._path_arcs(ctx.router.path(ctx.ranks[i], other))[1]

        out.append(min(group, key=lambda i: (lat(i), i)))
    return out


def host_capacity_order(ctx: PlanContext) -> list[int]:
    """Host group indices, most capacity in and out of the host first (ties: in order)."""
    capacity = [min(caps(ctx, part)) for part in parts_by_host(ctx)]
    return sorted(range(len(capacity)), key=lambda k: (-capacity[k], k))


def check_ranks(name: str, n: int, limit: int) -> None:
    """Raise InfeasibleError when ``n`` ranks exceed an algorithm's ``limit``."""
    if n > limit:
        raise InfeasibleError(
            f"{name} is limited to {limit} ranks (its steps put about "
            f"n^2 transfers in flight), got {n}"
        )
