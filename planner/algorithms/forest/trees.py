"""Host-level trees of the host-structured forest: degree targets, tree sets, hub trees."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from syncplan.planner.algorithms.forest.lanes import Lane, host_switch_groups
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.pipeline import round_to_total

Path = tuple[str, ...]


@dataclass
class HostTree:
    lane: int
    root: int  # host index
    parent: list[int]  # per host: parent host, -1 at the root
    height: list[int]  # per host: height in the host tree (leaves 0)
    depth: list[int]


# ---- host-level trees -------------------------------------------------------------------


def degree_targets(cap: np.ndarray) -> np.ndarray:
    """Tree degrees per host, in [1, m-1], summing to 2 (m-1), as proportional to ``cap`` as
    those limits allow (water-filling)."""
    m = len(cap)
    if m <= 2:
        return np.ones(m)
    target = 2.0 * (m - 1)
    lo, hi = 0.0, (m - 1) / cap.min()
    for _ in range(100):
        mid = (lo + hi) / 2
        if np.clip(mid * cap, 1, m - 1).sum() < target:
            lo = mid
        else:
            hi = mid
    delta = np.clip(hi * cap, 1, m - 1)
    excess = delta - 1
    return 1 + excess * ((m - 2) / excess.sum())


def host_trees(cap: np.ndarray, groups: Sequence[int], t: int) -> list[tuple[int, list[int]]]:
    """``t`` spanning trees over hosts as (root, parent list); ``groups[h]`` is the switch
    group of host h (trees cross between groups once per group)."""
    m = len(cap)
    if m == 1:
        return [(0, [-1])]
    delta = degree_targets(cap)
    extra = round_to_total(t * (delta - 1), t * (m - 2))
    bins: list[dict[int, int]] = [{} for _ in range(t)]
    b, room = 0, m - 2
    for h in np.argsort(-extra, kind="stable"):
        left = int(extra[h])
        while left > 0 and b < t:
            take = min(left, room)
            bins[b][int(h)] = bins[b].get(int(h), 0) + take
            left -= take
            room -= take
            if room == 0:
                b, room = b + 1, m - 2
    order = np.argsort(-cap, kind="stable")
    # hosts that are leaves everywhere and barely above degree 1: their NIC has no slack for
    # a pipeline offset between sending and hearing back, so they go under the root
    lean = {int(h) for h in range(m) if extra[h] == 0 and delta[h] < 1.5}
    trees = []
    for j, budget in enumerate(bins):
        trees.append(_build_tree(m, budget, groups, order, j, lean))
    return trees


def _build_tree(
    m: int, budget: dict[int, int], groups: Sequence[int], order: np.ndarray, j: int, lean: set[int]
) -> tuple[int, list[int]]:
    members: dict[int, list[int]] = defaultdict(list)
    for h in order:  # fastest hosts first
        members[groups[h]].append(int(h))
    parent = [-1] * m
    group_roots = []
    for grp, hosts in members.items():
        internal = sorted((h for h in hosts if budget.get(h)), key=lambda h: -budget[h])
        root = internal[0] if internal else hosts[j % len(hosts)]
        children_left = {h: budget.get(h, 0) for h in hosts}
        children_left[root] = budget.get(root, 0) + 1
        # slowest leaves first: they take the root's spare slots, where (sending as late as
        # possible) a leaf's reduce and broadcast are one step apart instead of 2 depth - 1
        leaves = [h for h in reversed(hosts) if h != root and not budget.get(h)]
        near = [h for h in leaves if h in lean]
        if near:  # when the root has too few spare slots, a different one misses out per tree
            k = j % len(near)
            near = near[k:] + near[:k]
        rest = [h for h in internal if h != root] + near + [h for h in leaves if h not in lean]
        queue, qi, ri = [root], 0, 0
        while ri < len(rest) and qi < len(queue):
            node = queue[qi]
            while children_left[node] > 0 and ri < len(rest):
                child = rest[ri]
                ri += 1
                parent[child] = node
                children_left[node] -= 1
                if budget.get(child):
                    queue.append(child)
            qi += 1
        for k, child in enumerate(rest[ri:]):  # rounding left some without a slot
            parent[child] = queue[k % len(queue)]
        group_roots.append((budget.get(root, 0), grp, root))
    group_roots.sort(key=lambda x: -x[0])
    top = group_roots[0][2]
    for _, _, r in group_roots[1:]:
        parent[r] = top
    return top, parent


def tree_heights(root: int, parent: list[int]) -> tuple[list[int], list[int]]:
    m = len(parent)
    children: list[list[int]] = [[] for _ in range(m)]
    for h, p in enumerate(parent):
        if p >= 0:
            children[p].append(h)
    depth, order = [0] * m, [root]
    for h in order:
        for c in children[h]:
            depth[c] = depth[h] + 1
            order.append(c)
    if len(order) != m:
        raise AssertionError("host tree does not span every host")
    height = [0] * m
    for h in reversed(order):
        for c in children[h]:
            height[h] = max(height[h], height[c] + 1)
    return height, depth


def tree_counts(m: int) -> list[int]:
    """Trees per lane to try: stars, height-2 and height-3 trees, and on more than
    FOREST.few_trees_above hosts 4 and 5 deeper trees, whose programs fit more pieces under
    PACKING.max_transfers (at 128 and 512 hosts they price 2-13 % below the shallower sets)."""
    if m <= 2:
        return [1 if m == 1 else 2]
    cands = {m, math.isqrt(m - 1) + 2, round(m ** (1 / 3)) + 2}
    if m > FOREST.few_trees_above:
        cands |= {4, 5}
    return sorted(c for c in cands if c <= m)


def build_trees(lanes: list[Lane], t: int) -> list[HostTree]:
    trees = []
    for li, lane in enumerate(lanes):
        groups = host_switch_groups(lane)
        m = len(groups)
        if t == m and len(set(groups)) == 1:
            sets = [(r, [-1 if h == r else r for h in range(m)]) for r in range(m)]
        else:
            sets = host_trees(lane.cap, groups, t)
        for root, parent in sets:
            height, depth = tree_heights(root, parent)
            trees.append(HostTree(li, root, parent, height, depth))
    return trees


def hub_trees(lanes: list[Lane]) -> list[HostTree]:
    """Per lane on one switch, per root r and hub c = r + 1, r + 2: r's only child is c, the
    other hosts are c's children. The root has degree 1 like a leaf but hears the partial sum
    before it sends the result, the mirror image of a leaf's order: mixed with stars, a host
    whose NIC has no room for a star's root can still balance its sends against its receives
    in every step."""
    trees = []
    for li, lane in enumerate(lanes):
        groups = host_switch_groups(lane)
        m = len(groups)
        if m < 3 or len(set(groups)) > 1:
            continue
        for r in range(m):
            for k in (1, 2)[: m - 2]:
                c = (r + k) % m
                parent = [c] * m
                parent[r], parent[c] = -1, r
                height, depth = tree_heights(r, parent)
                trees.append(HostTree(li, r, parent, height, depth))
    return trees
