"""Spanning arborescences on a dense cost matrix over ranks.

``cost[u, v]`` is the price of the tree edge u -> v (``inf``: no such edge). An out-tree
from ``root`` has every other node reached by exactly one edge from its parent; an in-tree
towards ``root`` is an out-tree of the transposed matrix. Trees are returned as parent
arrays (``parent[root] == -1``).

- ``min_arborescence``: the exact minimum (Chu-Liu/Edmonds, contracting every cycle of a
  level at once), used for the packing's lower bound and its unrestricted pricing.
- ``shallow_trees``: for every root at once, a greedy (Prim-like) cheap tree whose depth is
  at most a per-root limit; shallow trees keep the pipeline's fill short.
- ``layered_trees``: the same greedy where an edge's price depends on the depth it puts its
  head at (``packing.window``: the depth decides the step the edge runs at).
"""

from __future__ import annotations

import numpy as np
from syncplan.core.errors import InfeasibleError


def min_arborescence(cost: np.ndarray, root: int) -> np.ndarray:
    """Parent array of a minimum-cost out-arborescence of ``cost`` rooted at ``root``."""
    n = cost.shape[0]
    if n == 1:
        return np.array([-1])
    parent = _edmonds(np.array(cost, dtype=float), root)
    if parent is None:
        raise InfeasibleError(f"no spanning tree from rank {root}: some rank is unreachable")
    return parent


def _edmonds(cost: np.ndarray, root: int) -> np.ndarray | None:
    """Chu-Liu/Edmonds by levels: at each level every node takes its cheapest incoming edge,
    and every cycle those edges form is contracted at once (one contraction per level would
    take dozens of levels on the near-equal prices of switched clusters)."""
    c = np.array(cost, dtype=float)
    np.fill_diagonal(c, np.inf)
    c[:, root] = np.inf
    levels = []
    r = root
    while True:
        m = c.shape[0]
        pick = np.argmin(c, axis=0)
        best = c[pick, np.arange(m)]
        pick[r] = -1
        best[r] = 0.0
        if not np.isfinite(best).all():
            return None
        cycles = _cycles(pick.tolist())
        if not cycles:
            break
        in_cycle = np.zeros(m, dtype=bool)
        for cyc in cycles:
            in_cycle[cyc] = True
        rest = np.flatnonzero(~in_cycle)
        k = len(rest)
        comp = np.empty(m, dtype=np.int64)
        comp[rest] = np.arange(k)
        for j, cyc in enumerate(cycles):
            comp[cyc] = k + j
        size = k + len(cycles)
        # an edge into a cycle costs its price minus the cycle edge it replaces
        adj = c - np.where(in_cycle, best, 0.0)[None, :]
        head = np.empty((m, size), dtype=np.int64)  # per row: the cheapest head per component
        head[:, :k] = rest[None, :]
        for j, cyc in enumerate(cycles):
            nodes = np.asarray(cyc)
            head[:, k + j] = nodes[np.argmin(adj[:, nodes], axis=1)]
        by_head = adj[np.arange(m)[:, None], head]
        tail = np.empty((size, size), dtype=np.int64)  # per pair: the cheapest tail
        tail[:k, :] = rest[:, None]
        for j, cyc in enumerate(cycles):
            nodes = np.asarray(cyc)
            tail[k + j, :] = nodes[np.argmin(by_head[nodes, :], axis=0)]
        cols = np.arange(size)[None, :]
        sub = by_head[tail, cols]
        head = head[tail, cols]
        np.fill_diagonal(sub, np.inf)
        r = int(comp[r])
        sub[:, r] = np.inf
        levels.append((pick, tail, head))
        c = sub
    parent = pick
    for pick, tail, head in reversed(levels):
        full = pick.copy()  # cycle nodes keep their cycle edge but where the tree enters
        for b, a in enumerate(parent.tolist()):
            if a >= 0:
                full[head[a, b]] = tail[a, b]
        parent = full
    return parent


def _cycles(pick: list[int]) -> list[list[int]]:
    """Every cycle of the functional graph v -> pick[v] (-1 ends a walk)."""
    color = [0] * len(pick)  # 0 unseen, 1 on the current walk, 2 done
    out = []
    for start in range(len(pick)):
        if color[start]:
            continue
        walk = []
        v = start
        while v >= 0 and color[v] == 0:
            color[v] = 1
            walk.append(v)
            v = pick[v]
        if v >= 0 and color[v] == 1:
            out.append(walk[walk.index(v) :])
        for u in walk:
            color[u] = 2
    return out


def shallow_trees(cost: np.ndarray, max_depth: np.ndarray) -> np.ndarray:
    """Per root r (row r), a cheap out-tree in which node v sits at depth at most
    ``max_depth[r, v]``: grow from the root, each time attaching the cheapest node that an
    attached node can take within the limit. With ``max_depth`` = hop distance from the root
    plus a slack, the tree always completes (a node nearest the root among those left has
    its shortest-hop predecessor attached within its own limit). Rows hold parent arrays."""
    n = cost.shape[0]
    return layered_trees(cost[None], np.zeros(n, dtype=np.int64), np.minimum(max_depth, n - 1))


def layered_trees(cost: np.ndarray, step_of: np.ndarray, max_depth: np.ndarray) -> np.ndarray:
    """Per root r, a cheap out-tree in which node v sits at depth at most ``max_depth[r, v]``
    and the edge u -> v that puts v at depth k costs ``cost[step_of[k], u, v]``: grow from
    the root, each time attaching the cheapest node an attached node can take. Rows hold
    parent arrays (``arborescence.shallow_trees`` with prices that depend on the depth)."""
    return layered_trees_costed(cost, step_of, max_depth)[0]


def layered_trees_costed(
    cost: np.ndarray, step_of: np.ndarray, max_depth: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``layered_trees`` and each root's tree cost (the sum of its edges' costs at the
    depths they join at), so a caller can skip the trees that cannot price in. With
    ``step_of`` of shape (B, depths), B such problems at once (batch b's depth k priced by
    ``cost[step_of[b, k]]``): parents (B, n, n) and costs (B, n), each batch the same as
    solved alone."""
    if step_of.ndim == 1:
        parent, total = layered_trees_costed(cost, step_of[None], max_depth)
        return parent[0], total[0]
    batches, n = step_of.shape[0], cost.shape[1]
    rows = batches * n
    root = np.tile(np.arange(n), batches)  # every row is one root of one batch
    batch = np.repeat(np.arange(batches), n)
    limit = np.tile(np.minimum(max_depth, step_of.shape[1] - 1), (batches, 1))
    every = np.arange(rows)
    total = np.zeros(rows)
    parent = np.full((rows, n), -1)
    depth = np.zeros((rows, n), dtype=np.int64)
    attached = np.zeros((rows, n), dtype=bool)
    attached[every, root] = True
    best = np.where(limit >= 1, cost[step_of[batch, 1], root], np.inf)  # from each root
    arg = np.repeat(root[:, None], n, axis=1)
    best[attached] = np.inf
    kmax = step_of.shape[1] - 1
    for _ in range(n - 1):
        v = np.argmin(best, axis=1)
        val = best[every, v]
        if not np.isfinite(val).all():
            raise InfeasibleError(
                "no spanning tree within the depth limit: some rank is unreachable"
            )
        total += val
        u = arg[every, v]
        parent[every, v] = u
        depth[every, v] = depth[every, u] + 1
        attached[every, v] = True
        nxt = depth[every, v] + 1
        edges = cost[step_of[batch, np.minimum(nxt, kmax)], v]  # (rows, n): v -> w at nxt
        cand = np.where(nxt[:, None] <= limit, edges, np.inf)
        better = cand < best
        best = np.where(better, cand, best)
        arg = np.where(better, v[:, None], arg)
        best[attached] = np.inf
    return parent.reshape(batches, n, n), total.reshape(batches, n)


def tree_depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node of a parent array (roots 0; -1 where following parents never
    reaches a root: a cycle), by pointer doubling."""
    n = len(parent)
    up = np.where(parent >= 0, parent, np.arange(n))
    depth = (parent >= 0).astype(np.int64)  # hops from each node to ``up`` of it
    for _ in range(max(1, n).bit_length() + 1):
        nxt = up[up]
        if np.array_equal(nxt, up):
            break
        depth = depth + depth[up]
        up = nxt
    return np.where(parent[up] < 0, depth, -1)  # a cycle's nodes end on a non-root
