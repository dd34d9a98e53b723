"""Direct exchanges: ranks send to each other without intermediate ranks.

- ``direct`` (one step): every rank sends its whole buffer to every other rank with
  ``reduce: true``. A transfer sends the value its source held at the start of the step
  (docs/formats.md, Plan document), so each rank adds the n-1 inputs to its own: every input counted
  once. Not a reduce-then-broadcast program: every rank forms the sum itself.
- ``direct-2level``: per host, ranks reduce to the host's leader; the leaders exchange their
  host sums in one step as above; the leaders send the result to their ranks (3 steps).
- ``direct-2step``: a reduce-scatter by all-to-all (rank j receives part j from every rank,
  reduce) then an all-gather by all-to-all (rank j sends part j to every rank, replace).

A step of these puts up to n(n-1) transfers in flight; they are priced and offered up to
DIRECT_MAX_RANKS ranks (leaders, for direct-2level).

Rounding: in ``direct`` (and among the leaders of ``direct-2level``) every rank adds the
same n values itself. The executor adds a step's received values in rank order, with the
rank's own value in its own place (``syncplan.executor.schedule.fold_in_rank_order``), so every rank
computes the same left fold x0 + x1 + ... + x(n-1) and ends with the same bits
(tests/executor/test_identical_bits.py, on gloo processes too); ``direct-2step`` computes
each part's sum once. So their candidates say ``details["identical_bits"]: True`` and
``auto`` may pick them. The block-sparse executor folds in rank order per block too
(docs/executor.md "Identical bits").
"""

from __future__ import annotations

from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Transfer, split_range
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import check_ranks, coarsen, leaders, price

DIRECT_MAX_RANKS = 64


def one_step_program(members: list[int]) -> list[Transfer]:
    return [Transfer(i, j, 0, 1, True) for i in members for j in members if i != j]


def direct(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    check_ranks("direct", n, DIRECT_MAX_RANKS)
    prog = Program(1, [one_step_program(list(range(n)))] if n > 1 else [])
    return Candidate(
        "direct", price(ctx, prog), lambda: prog, {"steps": len(prog.steps), "identical_bits": True}
    )


def two_level_program(groups: list[list[int]], heads: list[int]) -> Program:
    gather = [
        Transfer(i, h, 0, 1, True) for g, h in zip(groups, heads, strict=True) for i in g if i != h
    ]
    scatter = [
        Transfer(h, i, 0, 1, False) for g, h in zip(groups, heads, strict=True) for i in g if i != h
    ]
    return Program(1, [s for s in (gather, one_step_program(heads), scatter) if s])


def direct_2level(ctx: PlanContext) -> Candidate:
    groups = ctx.host_groups
    if len(groups) < 2 or len(groups) == len(ctx.ranks):
        raise InfeasibleError(
            "direct-2level needs at least two hosts and a host with two "
            "ranks or more (otherwise it is the one-step direct exchange)"
        )
    check_ranks("direct-2level (leaders)", len(groups), DIRECT_MAX_RANKS)
    heads = leaders(ctx)
    prog = two_level_program(groups, heads)
    return Candidate(
        "direct-2level",
        price(ctx, prog),
        lambda: prog,
        {
            "leaders": [ctx.ranks[h] for h in heads],
            "steps": len(prog.steps),
            "identical_bits": True,
        },
    )


def two_step_program(n: int, size_bytes: int) -> Program:
    parts = split_range(0, n, n)
    rs = [Transfer(i, j, *parts[j], True) for j in range(n) for i in range(n) if i != j]
    ag = [Transfer(j, i, *parts[j], False) for j in range(n) for i in range(n) if i != j]
    return coarsen(Program(n, [rs, ag]), min(n, size_bytes))


def direct_2step(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    check_ranks("direct-2step", n, DIRECT_MAX_RANKS)
    if n == 1:
        return Candidate("direct-2step", 0.0, lambda: Program(1, []), {"steps": 0})
    prog = two_step_program(n, ctx.size_bytes)
    return Candidate(
        "direct-2step",
        price(ctx, prog),
        lambda: prog,
        {"units": prog.units, "steps": len(prog.steps)},
    )
