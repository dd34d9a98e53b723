"""Star all-reduces: every rank reduces its whole buffer to one root, which sends the sum back.

- ``star`` (flat): 2 steps; every other rank sends to the root (reduce), the root sends the
  result to every other rank (replace). Every root is priced up to STAR_ALL_ROOTS ranks;
  above, the first rank of each of the hosts with the most capacity (at most
  MAX_ROOT_HOSTS, and ROUTE_BUDGET / n: each root costs 2 (n - 1) routes).
- ``two-level-star``: per host, the ranks reduce to the host's leader (the rank nearest the
  network); the leaders reduce to the root leader; the root sends the sum to the leaders;
  the leaders to their ranks. 4 steps, each short on the network.

Both move the whole buffer in one unit: they are for buffers where latency, not bandwidth,
sets the time. Both are reduce-then-broadcast programs (the root holds the sum first).
"""

from __future__ import annotations

from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Transfer
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import host_capacity_order, leaders, price

STAR_ALL_ROOTS = 32
MAX_ROOT_HOSTS = 32
ROUTE_BUDGET = 2048  # roots * ranks: each root prices n - 1 new routes each way


def _root_candidates(ctx: PlanContext) -> list[int]:
    n = len(ctx.ranks)
    if n <= STAR_ALL_ROOTS:
        return list(range(n))
    order = host_capacity_order(ctx)[: max(1, min(MAX_ROOT_HOSTS, ROUTE_BUDGET // n))]
    return [ctx.host_groups[k][0] for k in order]


def flat_star_program(n: int, root: int) -> Program:
    others = [i for i in range(n) if i != root]
    return Program(
        1,
        [
            [Transfer(i, root, 0, 1, True) for i in others],
            [Transfer(root, i, 0, 1, False) for i in others],
        ],
    )


def star(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("star", 0.0, lambda: Program(1, []), {"root": 0})
    best: tuple[float, int] | None = None
    for root in _root_candidates(ctx):
        t = price(ctx, flat_star_program(n, root))
        if best is None or t < best[0]:
            best = (t, root)
    assert best is not None
    t, root = best
    return Candidate(
        "star", t, lambda: flat_star_program(n, root), {"root": ctx.ranks[root], "steps": 2}
    )


def two_level_program(n: int, groups: list[list[int]], heads: list[int], root: int) -> Program:
    """``root`` is one of ``heads`` (one head per group)."""
    gather = [
        Transfer(i, h, 0, 1, True) for g, h in zip(groups, heads, strict=True) for i in g if i != h
    ]
    up = [Transfer(h, root, 0, 1, True) for h in heads if h != root]
    down = [Transfer(root, h, 0, 1, False) for h in heads if h != root]
    scatter = [
        Transfer(h, i, 0, 1, False) for g, h in zip(groups, heads, strict=True) for i in g if i != h
    ]
    return Program(1, [s for s in (gather, up, down, scatter) if s])


def two_level_star(ctx: PlanContext) -> Candidate:
    n, groups = len(ctx.ranks), ctx.host_groups
    if len(groups) < 2:
        raise InfeasibleError("two-level-star needs ranks on at least two hosts")
    if len(groups) == n:
        raise InfeasibleError(
            "two-level-star needs a host with two ranks or more "
            "(with one rank per host it is the flat star)"
        )
    heads = leaders(ctx)
    limit = max(1, min(MAX_ROOT_HOSTS, ROUTE_BUDGET // len(heads)))
    roots = [heads[k] for k in host_capacity_order(ctx)[:limit]]
    best: tuple[float, int] | None = None
    for root in roots:
        t = price(ctx, two_level_program(n, groups, heads, root))
        if best is None or t < best[0]:
            best = (t, root)
    assert best is not None
    t, root = best
    return Candidate(
        "two-level-star",
        t,
        lambda: two_level_program(n, groups, heads, root),
        {"root": ctx.ranks[root], "leaders": [ctx.ranks[h] for h in heads], "steps": 4},
    )
