"""Spanning arborescences on a dense cost matrix over ranks.

``cost[u, v]`` is the price of the tree edge u -> v (``inf``: no such edge). An out-tree
from ``root`` has every other node reached by exactly one edge from its parent; an in-tree
towards ``root`` is an out-tree of the transposed matrix. Trees are returned as parent
arrays (``parent[root] == -1``).

- ``min_arborescence``: the exact minimum (Chu-Liu/Edmonds, contracting cycles), used for
  the packing's lower bound and its unrestricted pricing.
- ``shallow_trees``: for every root at once, a greedy (Prim-like) cheap tree whose depth is
  at most a per-root limit; shallow trees keep the pipeline's fill short.
- ``layered_trees``: the same greedy where an edge's price depends on the depth it puts its
  head at (``packing_window``: the depth decides the step the edge runs at).
"""

from __future__ import annotations

import numpy as np

from planner.errors import InfeasibleError


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
    n = cost.shape[0]
    c = cost.copy()
    np.fill_diagonal(c, np.inf)
    c[:, root] = np.inf
    pick = np.argmin(c, axis=0)
    best = c[pick, np.arange(n)]
    best[root] = 0.0
    pick[root] = -1
    if not np.isfinite(best).all():
        return None
    # find a cycle among the chosen edges
    color = np.zeros(n, dtype=np.int64)  # 0 new, 1 on stack of walk k+1.., 2 done
    cycle: list[int] | None = None
    for start in range(n):
        if color[start]:
            continue
        walk = []
        v = start
        while v != -1 and color[v] == 0:
            color[v] = 1
            walk.append(v)
            v = int(pick[v])
        if v != -1 and color[v] == 1:
            cycle = walk[walk.index(v):]
        for u in walk:
            color[u] = 2
        if cycle is not None:
            break
    if cycle is None:
        return pick
    in_cycle = np.zeros(n, dtype=bool)
    in_cycle[cycle] = True
    rest = np.nonzero(~in_cycle)[0]
    k = len(rest)  # contracted node index k stands for the cycle
    idx = np.full(n, k)
    idx[rest] = np.arange(k)
    cyc = np.array(cycle)
    sub = np.full((k + 1, k + 1), np.inf)
    sub[:k, :k] = cost[np.ix_(rest, rest)]
    # edges into the cycle: cost minus the cycle edge they replace
    into = cost[np.ix_(rest, cyc)] - best[cyc][None, :]
    enter = np.argmin(into, axis=1)
    sub[:k, k] = into[np.arange(k), enter]
    out = cost[np.ix_(cyc, rest)]
    leave = np.argmin(out, axis=0)
    sub[k, :k] = out[leave, np.arange(k)]
    sub_parent = _edmonds(sub, int(idx[root]))
    if sub_parent is None:
        return None
    parent = pick.copy()
    for j, v in enumerate(rest):
        p = sub_parent[j]
        if p == -1:
            parent[v] = -1
        elif p == k:
            parent[v] = cyc[leave[j]]
        else:
            parent[v] = rest[p]
    p = sub_parent[k]
    entry_from = rest[p]
    entry_to = cyc[enter[p]]
    parent[entry_to] = entry_from
    return parent


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
    n = cost.shape[1]
    roots = np.arange(n)
    parent = np.full((n, n), -1)
    depth = np.zeros((n, n), dtype=np.int64)
    attached = np.zeros((n, n), dtype=bool)
    attached[roots, roots] = True
    best = np.where(max_depth >= 1, cost[step_of[1]][roots], np.inf)  # from each root
    arg = np.repeat(roots[:, None], n, axis=1)
    best[attached] = np.inf
    kmax = len(step_of) - 1
    for _ in range(n - 1):
        v = np.argmin(best, axis=1)
        val = best[roots, v]
        if not np.isfinite(val).all():
            raise InfeasibleError("no spanning tree within the depth limit: some rank is "
                                  "unreachable")
        u = arg[roots, v]
        parent[roots, v] = u
        depth[roots, v] = depth[roots, u] + 1
        attached[roots, v] = True
        nxt = depth[roots, v] + 1
        rows = cost[step_of[np.minimum(nxt, kmax)], v]  # (roots, n): edges v -> w at nxt
        cand = np.where(nxt[:, None] <= np.minimum(max_depth, kmax), rows, np.inf)
        better = cand < best
        best = np.where(better, cand, best)
        arg = np.where(better, v[:, None], arg)
        best[attached] = np.inf
    return parent


def tree_depths(parent: np.ndarray) -> np.ndarray:
    """Depth of every node of a parent array (root 0)."""
    n = len(parent)
    depth = np.full(n, -1)
    for v in range(n):
        chain = []
        u = v
        while depth[u] < 0 and parent[u] >= 0:
            chain.append(u)
            u = parent[u]
        if depth[u] < 0:
            depth[u] = 0
        d = depth[u]
        for w in reversed(chain):
            d += 1
            depth[w] = d
    return depth
