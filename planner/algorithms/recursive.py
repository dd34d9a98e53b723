"""Recursive doubling and recursive halving-doubling (Rabenseifner) all-reduces.

Ranks are laid out host by host; the core is the largest power of two p <= n. Extra ranks
fold first: rank at position 2k+1 (k < n - p) sends its whole buffer to position 2k
(reduce; neighbours, so usually on one host) and gets the result back in a last step.

- ``recursive-doubling``: log2 p steps; in each, core rank i and i XOR d exchange their whole
  buffers (reduce). Every rank forms the sum itself: not a reduce-then-broadcast program.
- ``halving-doubling``: a reduce-scatter by recursive halving (partners exchange halves of
  their region, each keeps and sums one half) then an all-gather by recursive doubling in
  the reverse order; p units (fewer when the buffer has fewer bytes).

Both the near-partner-first and the far-partner-first orders of d are priced.
"""

from __future__ import annotations

from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import coarsen, host_order, priced


def fold(order: list[int]) -> tuple[list[int], list[tuple[int, int]]]:
    """(core of 2^k ranks, [(extra, its core partner)])."""
    n = len(order)
    p = 1 << (n.bit_length() - 1)
    extras = n - p
    pairs = [(order[2 * k + 1], order[2 * k]) for k in range(extras)]
    core = [order[2 * k] for k in range(extras)] + order[2 * extras :]
    return core, pairs


def _distances(p: int, near_first: bool) -> list[int]:
    ds = [1 << b for b in range(p.bit_length() - 1)]
    return ds if near_first else ds[::-1]


def _wrap(core_steps: list[Step], pairs: list[tuple[int, int]], units: int) -> list[Step]:
    first = [Transfer(x, c, 0, units, True) for x, c in pairs]
    last = [Transfer(c, x, 0, units, False) for x, c in pairs]
    return [s for s in [first, *core_steps, last] if s]


def doubling_program(order: list[int], near_first: bool) -> Program:
    core, pairs = fold(order)
    p = len(core)
    steps = [
        [Transfer(core[i], core[i ^ d], 0, 1, True) for i in range(p)]
        for d in _distances(p, near_first)
    ]
    return Program(1, _wrap(steps, pairs, 1))


def halving_program(order: list[int], near_first: bool, size_bytes: int) -> Program:
    core, pairs = fold(order)
    p = len(core)
    ds = _distances(p, near_first)
    region = [(0, p)] * p
    rs: list[Step] = []
    history = []
    for d in ds:
        history.append(list(region))
        step = []
        for i in range(p):
            lo, hi = region[i]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if not i & d else ((mid, hi), (lo, mid))
            step.append(Transfer(core[i], core[i ^ d], *give, True))
            region[i] = keep
        rs.append(step)
    ag: list[Step] = []
    for d, before in zip(reversed(ds), reversed(history), strict=True):
        ag.append([Transfer(core[i], core[i ^ d], *region[i], False) for i in range(p)])
        region = before
    return coarsen(Program(p, _wrap(rs + ag, pairs, p)), min(p, size_bytes))


def recursive_doubling(ctx: PlanContext) -> Candidate:
    if len(ctx.ranks) == 1:
        return Candidate("recursive-doubling", 0.0, lambda: Program(1, []), {"steps": 0})
    order = host_order(ctx)
    return priced(
        ctx,
        "recursive-doubling",
        {
            "near partners first": lambda: doubling_program(order, True),
            "far partners first": lambda: doubling_program(order, False),
        },
    )


def halving_doubling(ctx: PlanContext) -> Candidate:
    if len(ctx.ranks) == 1:
        return Candidate("halving-doubling", 0.0, lambda: Program(1, []), {"steps": 0})
    order = host_order(ctx)
    size = ctx.size_bytes
    return priced(
        ctx,
        "halving-doubling",
        {
            "near partners first": lambda: halving_program(order, True, size),
            "far partners first": lambda: halving_program(order, False, size),
        },
    )
