"""Shares of a tree packing chosen for the pipeline, not only for the busiest arc.

With P equal pieces, a lockstep pipeline of D phase offsets runs P - D + 1 full steps (every
offset active: the busiest arc's load, theta / P), D - 1 fill steps (offsets 0..s active) and
D - 1 drain steps (offsets s..D-1 active). The fluid LP only minimises theta; when one
offset's arcs are another's idle arcs, the fill and drain steps cost as much as full ones.
This LP minimises the whole pipeline's bandwidth time over the same trees:

    min (P - D + 1) theta + sum_s u_s + sum_s v_s
    s.t. every arc: all offsets' load <= theta, offsets 0..s <= u_s, offsets D-1-s..D-1 <= v_s
         every root: in-tree shares = out-tree shares;  in-tree shares sum to 1.

Trees that reduce where others broadcast then share the arcs, so each arc's load has the
same shape in every step and the fill costs little.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, csr_matrix, hstack, vstack
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn
from syncplan.planner.algorithms.packing.settings import PACKING


def offsets(trees: list[TreeColumn]) -> tuple[int, int]:
    """(H_in, H_out): the tallest reduce and broadcast trees."""
    h_in = max((t.height for t in trees if t.inward), default=0)
    h_out = max((t.height for t in trees if not t.inward), default=0)
    return h_in, h_out


def _crossings(
    ctx: PlanContext, trees: list[TreeColumn], h_in: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every arc crossing as (arc, column, offset)."""
    arcs, cols, offs = [], [], []
    router = ctx.router
    for j, t in enumerate(trees):
        for v, path in enumerate(t.paths):
            if not path:
                continue
            k = int(t.depth[v])
            off = h_in - k if t.inward else h_in + k - 1
            ids = router.arcs(path)
            arcs.extend(ids)
            cols.extend([j] * len(ids))
            offs.extend([off] * len(ids))
    return np.asarray(arcs), np.asarray(cols), np.asarray(offs)


def balanced_packing(
    ctx: PlanContext, packing: Packing, trees: list[TreeColumn], pieces: int
) -> Packing | None:
    """Shares over ``trees`` (every column the LP saw) minimising the pipeline's bandwidth
    time for ``pieces`` equal pieces; None when the LP is too large or fails."""
    h_in, h_out = offsets(trees)
    depth = h_in + h_out
    fill = depth - 1
    if fill < 1 or pieces < depth:
        return None
    arc, col, off = _crossings(ctx, trees, h_in)
    bw = ctx.router.bw
    used, pos = np.unique(arc, return_inverse=True)
    na, nt, n = len(used), len(trees), len(ctx.ranks)
    if na * (1 + 2 * fill) > PACKING.balance_max_rows:
        return None
    w = 1.0 / bw[used][pos]
    per_off = [
        coo_matrix((w[off == k], (pos[off == k], col[off == k])), shape=(na, nt)).tocsr()
        for k in range(depth)
    ]
    blocks = [sum(per_off, csr_matrix((na, nt)))]
    blocks += [sum(per_off[: s + 1], csr_matrix((na, nt))) for s in range(fill)]
    blocks += [sum(per_off[depth - 1 - s :], csr_matrix((na, nt))) for s in range(fill)]
    nz = len(blocks)  # epigraph variables: theta, u_0.., v_0..
    scale = float(blocks[0].max()) or 1.0
    rows = []
    for b, block in enumerate(blocks):
        pick = coo_matrix((-np.ones(na), (np.arange(na), np.full(na, b))), shape=(na, nz))
        rows.append(hstack([block / scale, pick]))
    a_ub = vstack(rows).tocsr()
    a_eq = np.zeros((n + 1, nt + nz))
    for j, t in enumerate(trees):
        a_eq[t.root, j] = 1.0 if t.inward else -1.0
        if t.inward:
            a_eq[n, j] = 1.0
    b_eq = np.zeros(n + 1)
    b_eq[n] = 1.0
    cost = np.concatenate([np.zeros(nt), [pieces - fill], np.ones(nz - 1)])
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(a_ub.shape[0]),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=[(0, None)] * (nt + nz),
        method="highs",
    )
    if res.status != 0:
        return None
    share = np.maximum(res.x[:nt], 0)
    live = share > 1e-9
    return Packing(
        [t for t, x in zip(trees, live, strict=True) if x],
        share[live],
        float(res.x[nt] * scale),
        packing.prices,
    )
