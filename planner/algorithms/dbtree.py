"""Double binary trees (after NCCL's tree algorithm): two binary trees, half the buffer each.

Ranks are laid out host by host. Tree A is the balanced in-order binary tree over positions
0..n-1 (the middle position is the root; leaves sit mostly at even positions, so the lower
levels stay inside hosts); tree B is the same tree shifted by one position, so most ranks
that are inner nodes of one tree are leaves of the other, and every rank sends and receives
about the same bytes. Each tree reduces its half to its root and broadcasts it back,
pipelined in P pieces: a rank at depth k of a tree of height H sends its partial sum of
piece p at step p + H - k (its children sent theirs one step earlier) and receives the sum of
piece p at step p + H + k - 1, so a tree takes P + 2H - 1 steps. Every P of PIECES whose
program stays within PRICE_BUDGET / 4 transfers is priced.
"""

from __future__ import annotations

from functools import partial

from syncplan.core.errors import InfeasibleError
from syncplan.core.program import Program, Step, Transfer, merge_parallel
from syncplan.planner.algorithms.base import Candidate, PlanContext
from syncplan.planner.algorithms.common import PRICE_BUDGET, coarsen, host_order, priced

PIECES = (1, 2, 4, 8, 16, 32)


def inorder_parents(m: int) -> list[int]:
    """Parent position of every position 0..m-1 in the balanced in-order tree (root: -1)."""
    parent = [-1] * m
    stack = [(0, m, -1)]
    while stack:
        lo, hi, up = stack.pop()
        if lo >= hi:
            continue
        mid = (lo + hi) // 2
        parent[mid] = up
        stack.append((lo, mid, mid))
        stack.append((mid + 1, hi, mid))
    return parent


def tree_steps(parent: dict[int, int], base: int, pieces: int) -> list[Step]:
    """Reduce-then-broadcast of units base..base+pieces-1 over a tree (rank -> parent rank)."""
    depth: dict[int, int] = {}

    def d(v: int) -> int:
        if v not in depth:
            depth[v] = 0 if parent[v] < 0 else d(parent[v]) + 1
        return depth[v]

    for v in parent:
        d(v)
    height = max(depth.values())
    steps: list[Step] = [[] for _ in range(pieces + 2 * height - 1)]
    for v, up in parent.items():
        if up < 0:
            continue
        k = depth[v]
        for p in range(pieces):
            u = base + p
            steps[p + height - k].append(Transfer(v, up, u, u + 1, True))
            steps[p + height + k - 1].append(Transfer(up, v, u, u + 1, False))
    return steps


def dbtree_program(order: list[int], pieces: int, size_bytes: int) -> Program:
    n = len(order)
    pos_parent = inorder_parents(n)
    a = {order[q]: (order[pos_parent[q]] if pos_parent[q] >= 0 else -1) for q in range(n)}
    b = {
        order[(q + 1) % n]: (order[(pos_parent[q] + 1) % n] if pos_parent[q] >= 0 else -1)
        for q in range(n)
    }
    steps = merge_parallel(tree_steps(a, 0, pieces), tree_steps(b, pieces, pieces))
    return coarsen(Program(2 * pieces, steps), min(2 * pieces, size_bytes))


def dbtree(ctx: PlanContext) -> Candidate:
    n = len(ctx.ranks)
    if n == 1:
        return Candidate("dbtree", 0.0, lambda: Program(1, []), {"pieces": 0})
    order = host_order(ctx)
    size = ctx.size_bytes
    options = [p for p in PIECES if p == 1 or (2 * p <= size and 4 * p * n <= PRICE_BUDGET // 4)]
    if 4 * n > PRICE_BUDGET:
        raise InfeasibleError(f"dbtree is limited to {PRICE_BUDGET // 4} ranks, got {n}")
    return priced(
        ctx,
        "dbtree",
        {f"{p} pieces": partial(dbtree_program, order, p, size) for p in options},
    )
