"""The share LPs of one host-forest tree set (``HostPlan``): the shares that minimise the
busiest arc (``solve_shares``), and among shares near that optimum, those whose pipeline fill
and drain are cheapest (``balance_phases``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from syncplan.planner.algorithms.forest.plan import HostPlan


def solve_shares(plan: HostPlan) -> float:
    """Set ``plan.w`` (share per tree) minimising the busiest arc; return its time per byte
    of buffer (the fluid time / size)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, csr_matrix, hstack

    nt = len(plan.trees)
    bw = plan.ctx.router.bw
    arc, col, *_ = plan.arc_entries()
    lane_of = np.array([tr.lane for tr in plan.trees] + list(range(len(plan.lanes))))
    narcs = len(bw)
    # crossings per (arc, tree), and per (arc, lane) for the lanes' intra-host transfers
    net = col < nt
    m_net = coo_matrix((np.ones(int(net.sum())), (arc[net], col[net])), shape=(narcs, nt)).tocsr()
    m_intra = coo_matrix(
        (np.ones(int((~net).sum())), (arc[~net], lane_of[col[~net]])),
        shape=(narcs, len(plan.lanes)),
    ).tocsr()
    tree_lane = csr_matrix(
        (np.ones(nt), ([tr.lane for tr in plan.trees], np.arange(nt))),
        shape=(len(plan.lanes), nt),
    )
    load = (m_net + m_intra @ tree_lane).tocsr()
    used = np.unique(load.nonzero()[0])
    load = csr_matrix(load[used].multiply(1.0 / bw[used][:, None]))
    plan.busy_arcs = used
    if nt == 1:
        plan.w = np.ones(1)
        return float(load.toarray().max())
    scale = float(np.abs(load.data).max())  # HiGHS' tolerances want entries near 1
    a_ub = hstack([load / scale, coo_matrix(-np.ones((len(used), 1)))]).tocsr()
    a_eq = np.hstack([np.ones(nt), [0.0]])[None, :]
    cost = np.zeros(nt + 1)
    cost[-1] = 1.0
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=np.zeros(len(used)),
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(0, None)] * (nt + 1),
        method="highs",
    )
    if res.status != 0:
        plan.w = np.full(nt, 1.0 / nt)
        return float((load @ plan.w).max())
    w = np.maximum(res.x[:nt], 0)
    plan.w = w / w.sum()
    arc_time = load @ plan.w
    plan.busy_arcs = used[arc_time >= arc_time.max() * (1 - 1e-6)]
    return float(arc_time.max())


def balance_phases(plan: HostPlan, fluid: float, slack: float = 1e-4) -> None:
    """Among shares within ``slack`` of the fluid optimum, pick ones whose pipeline fill
    and drain are cheapest: minimise, summed over the first and last ``offsets - 1`` steps
    of an equal-piece pipeline, the busiest arc's load (the bytes that started or still
    have to run). Mirror-image trees (one reducing where another broadcasts) then share
    the arcs, so every arc's load has the same shape in every step."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, csr_matrix, hstack, vstack

    nt, no = len(plan.trees), plan.base_offsets
    if nt == 1:
        return
    bw = plan.ctx.router.bw
    arc, col, off, _, last = plan.arc_entries()
    off = np.where(last, no - 1, off)
    lane_of = np.array([tr.lane for tr in plan.trees] + list(range(len(plan.lanes))))
    tree_lane = csr_matrix(
        (np.ones(nt), ([tr.lane for tr in plan.trees], np.arange(nt))),
        shape=(len(plan.lanes), nt),
    )
    used = np.unique(arc)
    pos = np.searchsorted(used, arc)
    na = len(used)
    net = col < nt
    per_off = []
    for o in range(no):
        sel_n, sel_i = net & (off == o), ~net & (off == o)
        mn = coo_matrix((np.ones(int(sel_n.sum())), (pos[sel_n], col[sel_n])), shape=(na, nt))
        mi = coo_matrix(
            (np.ones(int(sel_i.sum())), (pos[sel_i], lane_of[col[sel_i]])),
            shape=(na, len(plan.lanes)),
        )
        per_off.append(
            csr_matrix((mn.tocsr() + mi.tocsr() @ tree_lane).multiply(1.0 / bw[used][:, None]))
        )
    total = per_off[0]
    prefix = [per_off[0]]
    for o in range(1, no):
        total = total + per_off[o]
        if o < no - 1:
            prefix.append(total)
    blocks = prefix + [total - p for p in prefix]
    nz = len(blocks)
    scale = float(abs(total).max())
    if scale <= 0:
        return
    a_ub = vstack(
        [
            hstack(
                [
                    b / scale,
                    coo_matrix((-np.ones(na), (np.arange(na), np.full(na, k))), shape=(na, nz)),
                ]
            )
            for k, b in enumerate(blocks)
        ]
        + [hstack([total / scale, csr_matrix((na, nz))])]
    ).tocsr()
    b_ub = np.concatenate([np.zeros(na * nz), np.full(na, fluid * (1 + slack) / scale)])
    a_eq = np.concatenate([np.ones(nt), np.zeros(nz)])[None, :]
    cost = np.concatenate([np.zeros(nt), np.ones(nz)])
    res = linprog(
        cost,
        A_ub=a_ub,
        b_ub=b_ub,
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(0, None)] * (nt + nz),
        method="highs",
    )
    if res.status == 0:
        w = np.maximum(res.x[:nt], 0)
        plan.w = w / w.sum()
