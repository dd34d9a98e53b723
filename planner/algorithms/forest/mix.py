"""Per-piece tree mixes for pipelined forests (the host forest's trees, a packing's pairs).

A pipelined forest cuts every tree's share into pieces of the same fractions, so piece p of
every tree starts at step p and the pipeline's first and last steps load the arcs in the
shape of the trees' first and last offsets: a host whose NIC the ramp leaves idle cannot
catch up later. Here each piece gets trees of its own mix: the amount ``x[p, j]`` of piece
p that tree j carries is free, so the first pieces can lean on trees that load the ramp's
idle arcs (a star rooted at the slow host receives in the steps where its NIC would
otherwise only send). One linear program sets every ``x[p, j]`` to minimise the program's
time exactly as the cost model counts it: each step lasts at least every arc's load plus
the largest latency of a path through it (taken over all trees that could use the arc in
that step, so the LP's time is never below the built program's). The program built from
``x`` is then priced by the cost model itself; the forest keeps it only where it is faster.

A *column* is one tree (or reduce/broadcast pair) with its moves at their phase offsets;
columns may share a *group*'s moves per piece (a host-forest lane's merged intra-host
transfers, which carry the bytes of all its trees in the piece).
"""

from __future__ import annotations

import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import highspy
import numpy as np
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.forest.plan import HostPlan
from syncplan.planner.algorithms.forest.settings import FOREST
from syncplan.planner.algorithms.packing import PairSchedule
from syncplan.planner.algorithms.pipeline import round_to_total

Move = tuple[int, int, int, bool, tuple[str, ...]]  # (offset, src, dst, reduce, path)
Profile = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def tree_profiles(plan: HostPlan, trees: list[int]) -> list[Profile]:
    """Per tree of ``trees`` (indices into plan.trees), at the plan's stagger: the arcs its
    piece crosses, at which offset, seconds per byte of buffer, and the largest path latency
    through the arc at that offset, one entry per (arc, offset); its lane's merged intra-host
    transfers are included (they carry the lane's bytes)."""
    nt, no = len(plan.trees), plan.offsets
    bw = plan.ctx.router.bw
    arc, col, off, plat, last = plan.arc_entries()
    by_lane: dict[int, list[int]] = defaultdict(list)
    for k in np.nonzero(col >= nt)[0]:
        by_lane[int(col[k]) - nt].append(int(k))
    out = []
    for j in trees:
        own = np.nonzero(col == j)[0]
        intra = np.asarray(by_lane.get(plan.trees[j].lane, []), dtype=np.int64)
        arcs = np.concatenate([arc[own], arc[intra]])
        offs = np.concatenate([off[own] + plan.shift[j], np.where(last[intra], no - 1, 0)])
        out.append(
            _merged(
                arcs,
                offs.astype(np.int64),
                1.0 / bw[arcs],
                np.concatenate([plat[own], plat[intra]]),
            )
        )
    return out


def pair_profiles(sched: PairSchedule, pairs: list[int]) -> list[Profile]:
    """``tree_profiles`` of a packing's pairs (indices into sched.pairs)."""
    arc, col, off, plat = sched.flat_entries
    bw = sched.ctx.router.bw
    out = []
    for j in pairs:
        own = np.nonzero(col == j)[0]
        out.append(_merged(arc[own], off[own].astype(np.int64), 1.0 / bw[arc[own]], plat[own]))
    return out


def mix_cost(pieces: int, columns: int, ends: int | None = None) -> int:
    """What one mix LP (``mix_lp``'s arguments) takes from FOREST.mix_budget."""
    if ends is None or 2 * ends >= pieces:
        return (pieces * columns) ** 2
    return (2 * ends * columns + pieces - 2 * ends) ** 2


def host_moves(
    plan: HostPlan, trees: list[int]
) -> tuple[list[list[Move]], list[tuple[list[int], list[Move]]]]:
    """The columns' moves and the lanes' groups of a host-forest mix over ``trees``."""
    moves = [plan.phases(j) + plan.tree_intra(j) for j in trees]
    lanes: dict[int, list[int]] = defaultdict(list)
    for k, j in enumerate(trees):
        lanes[plan.trees[j].lane].append(k)
    return moves, [(lanes[li], plan.intra(li)) for li in sorted(lanes)]


def mix_lp(
    profiles: list[Profile],
    w: np.ndarray,
    offsets: int,
    narcs: int,
    pieces: int,
    size: float,
    min_step: float = 0.0,
    ends: int | None = None,
    max_columns: int = FOREST.mix_max_columns,
) -> np.ndarray | None:
    """Fractions ``x[p, k]`` of the buffer (summing to 1) that piece p sends by column k
    (of ``profiles``; ``w`` are the columns' pipelined shares; the phase offsets run
    0..``offsets`` - 1; ``narcs`` arcs), minimising the lockstep program's time; None where
    the solver fails or the LP has more than ``max_columns`` columns. With
    ``ends``, only the first and last ``ends`` pieces mix freely (the fill and the drain);
    the others keep the shares ``w`` and only their sizes are free (far fewer columns: a
    long pipeline's middle is steady anyway).

    Rows are the (arc, step) pairs some column loads, all in the one solve (leaving lightly
    loaded arcs out and adding the rows a solution broke took a second interior-point solve
    of nearly the same size on most members: a 16-rank torus's two mixes 8.9 s -> 3.7 s)."""
    from scipy.sparse import coo_matrix

    nsteps = pieces + offsets - 1
    ncols = len(profiles)
    lat = np.full(narcs * nsteps, -np.inf)
    cells, cols, vals = [], [], []
    p = np.arange(pieces)[:, None]
    for k, (arcs, offs, coef, plat) in enumerate(profiles):
        cell = (arcs * nsteps + offs)[None, :] + p  # pieces x entries
        np.maximum.at(lat, cell.ravel(), np.tile(plat, pieces))
        cells.append(cell.ravel())
        cols.append(np.repeat(p[:, 0] * ncols + k, len(arcs)))
        vals.append(np.tile(coef * size, pieces))
    present = np.nonzero(np.isfinite(lat))[0]
    row_of = np.full(narcs * nsteps, -1, dtype=np.int64)
    row_of[present] = np.arange(len(present))
    nrows = len(present)
    w = w / w.sum()
    # LP columns: (piece, column) where the piece mixes freely, else one per piece (w)
    free = np.ones(pieces, dtype=bool)
    if ends is not None and 2 * ends < pieces:
        free[ends : pieces - ends] = False
    pick = np.repeat(free, ncols)
    var = np.cumsum(np.where(pick, 1, np.tile(np.arange(ncols) == 0, pieces))) - 1
    spread = coo_matrix(
        (np.where(pick, 1.0, np.tile(w, pieces)), (np.arange(pieces * ncols), var)),
        shape=(pieces * ncols, int(var[-1]) + 1),
    ).tocsr()
    full = (
        coo_matrix(
            (np.concatenate(vals), (row_of[np.concatenate(cells)], np.concatenate(cols))),
            shape=(nrows, pieces * ncols),
        ).tocsr()
        @ spread
    ).tocsr()
    step = present % nsteps
    floor = np.full(nsteps, min_step)
    np.maximum.at(floor, step, lat[present])
    scale = max(float(floor.max()), 1e-12)  # HiGHS wants entries near 1
    if full.shape[1] > max_columns:
        return None
    y = _solve_ipm(full / scale, step, -lat[present] / scale, floor / scale)
    if y is None:
        return None
    x = (spread @ y).reshape(pieces, ncols)
    x[x < x.max() * 1e-7] = 0.0
    return x / x.sum()


def mix_lps(calls: list[tuple]) -> list[np.ndarray | None]:
    """``mix_lp(*args)`` of every tuple of arguments, side by side in threads (the interior
    point runs in HiGHS without the GIL, and each LP is its own): the same fractions, in
    order."""
    if len(calls) < 2:
        return [mix_lp(*args) for args in calls]
    workers = min(len(calls), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mix") as pool:
        return list(pool.map(lambda args: mix_lp(*args), calls))


def _solve_ipm(loads, steps: np.ndarray, rhs: np.ndarray, floor: np.ndarray) -> np.ndarray | None:
    """min sum(t) s.t. loads @ x - t[steps] <= rhs, sum(x) = 1, x >= 0, t >= floor, by
    HiGHS' interior point without crossover (its vertex can take 10^5 simplex iterations
    where the interior point takes a few dozen) within FOREST.mix_ipm_iterations: x, or None."""
    from scipy.sparse import coo_matrix, hstack, vstack
    from syncplan.planner.algorithms.packing import quiet_highs

    nx, nt, nr = loads.shape[1], len(floor), loads.shape[0]
    tau = coo_matrix((-np.ones(nr), (np.arange(nr), steps)), shape=(nr, nt))
    total = coo_matrix(np.concatenate([np.ones(nx), np.zeros(nt)])[None, :])
    a = vstack([hstack([loads, tau]), total]).tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nx + nt, nr + 1
    lp.col_cost_ = np.concatenate([np.zeros(nx), np.ones(nt)])
    lp.col_lower_ = np.concatenate([np.zeros(nx), floor])
    lp.col_upper_ = np.full(nx + nt, highspy.kHighsInf)
    lp.row_lower_ = np.concatenate([np.full(nr, -highspy.kHighsInf), [1.0]])
    lp.row_upper_ = np.concatenate([rhs, [1.0]])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    h = quiet_highs()
    h.setOptionValue("solver", "ipm")
    h.setOptionValue("run_crossover", "off")
    h.setOptionValue("ipm_iteration_limit", FOREST.mix_ipm_iterations)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    col = np.asarray(h.getSolution().col_value)
    return np.maximum(col[:nx], 0.0)


def _merged(arcs: np.ndarray, offs: np.ndarray, coef: np.ndarray, plat: np.ndarray) -> Profile:
    """One entry per (arc, offset): coefficients summed, the largest latency."""
    key = arcs * (int(offs.max(initial=0)) + 1) + offs
    uniq, inv = np.unique(key, return_inverse=True)
    c = np.bincount(inv, weights=coef, minlength=len(uniq))
    lt = np.full(len(uniq), -np.inf)
    np.maximum.at(lt, inv, plat)
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    return arcs[first], offs[first], c, lt


def mix_transfers(
    moves: list[list[Move]], groups: list[tuple[list[int], list[Move]]], x: np.ndarray, units: int
) -> int:
    """Transfers of ``build_mix`` for these fractions (before building it)."""
    u = round_to_total(x.ravel() * units, units).reshape(x.shape)
    per_col = np.array([len(m) for m in moves])
    shared = sum(len(g) * int((u[:, cols].sum(axis=1) > 0).sum()) for cols, g in groups if g)
    return int(((u > 0) * per_col[None, :]).sum()) + shared


def build_mix(
    moves: list[list[Move]],
    groups: list[tuple[list[int], list[Move]]],
    x: np.ndarray,
    units: int,
    offsets: int,
) -> Program:
    """The program: per group, per piece, per column of the group a contiguous range of
    units (``x[p, k]`` of them, rounded to whole units) moved at piece p plus each move's
    offset; the group's shared moves cover the group's units of the piece."""
    pieces = x.shape[0]
    u = round_to_total(x.ravel() * units, units).reshape(x.shape)
    steps: list[Step] = [[] for _ in range(pieces + offsets - 1)]
    base = 0
    for cols, shared in groups:
        for p in range(pieces):
            start = base
            for k in cols:
                lo, base = base, base + int(u[p, k])
                if lo == base:
                    continue
                for off, src, dst, red, path in moves[k]:
                    steps[p + off].append(Transfer(src, dst, lo, base, red, path))
            if base > start:
                for off, src, dst, red, path in shared:
                    steps[p + off].append(Transfer(src, dst, start, base, red, path))
    return Program(units, [s for s in steps if s])
