"""Pipelined lockstep schedules on an arc profile: piece sizes and their cost-model time.

A profile gives, per arc and per phase offset, the seconds per byte of buffer that the phase
puts on the arc and the largest path latency through it. Piece p of every tree runs phase o at
step p + o; ``model_time`` prices a choice of piece fractions exactly as the cost model would
price the program, and ``lp_fractions`` finds the best fractions for a piece count."""

from __future__ import annotations

import numpy as np

Path = tuple[str, ...]


def piece_fractions(pieces: int, ramp: int) -> np.ndarray:
    """Piece sizes as fractions of a share: equal, or halving over ``ramp`` pieces at both
    ends (small first and last pieces shorten the pipeline's fill and drain)."""
    ramp = min(ramp, pieces // 2)
    sizes = np.ones(pieces)
    for i in range(ramp):
        sizes[i] = sizes[pieces - 1 - i] = 0.5 ** (ramp - i)
    return sizes / sizes.sum()


def _intra_steps(pieces: int, group: int, offsets: int) -> tuple[np.ndarray, np.ndarray]:
    """Per piece, the steps of the merged intra-host gather (the first step of its group of
    ``group`` pieces) and hand-back (the last offset of the group's last piece)."""
    first = np.arange(pieces) // group * group
    last = np.minimum(first + group, pieces) - 1 + offsets - 1
    return first, last


def _placements(columns: int, pieces: int, group: int, intra: bool) -> tuple[int, list[np.ndarray]]:
    """Steps, and per profile column a 0/1 (pieces x steps) matrix: where that column's
    bytes of each piece run. Offset o runs piece p at step p + o; with ``intra`` the last two
    columns are the merged intra-host transfers (``_intra_steps``)."""
    no = columns - 2 if intra else columns
    nsteps = pieces + no - 1
    p = np.arange(pieces)
    mats = []
    for o in range(no):
        m = np.zeros((pieces, nsteps))
        m[p, p + o] = 1
        mats.append(m)
    if intra:
        for steps in _intra_steps(pieces, group, no):
            m = np.zeros((pieces, nsteps))
            m[p, steps] = 1
            mats.append(m)
    return nsteps, mats


def model_time(
    load: np.ndarray,
    lat: np.ndarray,
    size: float,
    fracs: np.ndarray,
    group: int = 1,
    intra: bool = False,
    min_step: float = 0.0,
) -> float:
    """Program time under the cost model for pieces of the given fractions, from the arc
    profile (``intra``: its last two columns are the merged intra-host transfers, grouped
    by ``group`` pieces; ``min_step``: the least time of a step)."""
    if not intra:
        return _pipeline_time(load, lat, size, fracs, min_step)
    return model_times(load, lat, size, [fracs], group, min_step)[0]


def model_times(
    load: np.ndarray,
    lat: np.ndarray,
    size: float,
    choices: list[np.ndarray],
    group: int = 1,
    min_step: float = 0.0,
) -> list[float]:
    """``model_time`` with intra-host columns of several fraction vectors of one piece
    count, in one pass: each the same float as its own call (the same operations per
    entry, in the same order)."""
    pieces, no = len(choices[0]), load.shape[1] - 2
    nsteps = pieces + no - 1
    fracs = np.stack(choices)
    step_load = np.zeros((len(choices), load.shape[0], nsteps))
    step_lat = np.full((load.shape[0], nsteps), -np.inf)
    for k in range(no):  # offset k runs piece p at step p + k
        step_load[:, :, k : k + pieces] += load[None, :, k : k + 1] * fracs[:, None, :]
        np.maximum(step_lat[:, k : k + pieces], lat[:, k : k + 1], out=step_lat[:, k : k + pieces])
    p = np.arange(pieces)
    for k, at in zip((no, no + 1), _intra_steps(pieces, group, no), strict=True):
        m = np.zeros((pieces, nsteps))  # the merged intra-host columns
        m[p, at] = 1
        for r, f in enumerate(choices):
            step_load[r] += load[:, k : k + 1] * (f @ m)[None, :]
        present = m.any(axis=0)
        step_lat[:, present] = np.maximum(step_lat[:, present], lat[:, k : k + 1])
    t = step_lat[None] + step_load * size
    per_step = np.where(np.isfinite(t), t, -np.inf).max(axis=1)
    times = []
    for row in per_step:
        busy = np.isfinite(row)
        times.append(float(np.maximum(row[busy], min_step).clip(min=0).sum()))
    return times


def _pipeline_time(
    load: np.ndarray, lat: np.ndarray, size: float, fracs: np.ndarray, min_step: float
) -> float:
    """model_time without intra-host columns: piece p runs column k at step p + k."""
    pieces, cols = len(fracs), load.shape[1]
    nsteps = pieces + cols - 1
    step_load = np.zeros((load.shape[0], nsteps))
    step_lat = np.full((load.shape[0], nsteps), -np.inf)
    row = fracs[None, :] * size
    for k in range(cols):
        step_load[:, k : k + pieces] += load[:, k : k + 1] * row
        np.maximum(step_lat[:, k : k + pieces], lat[:, k : k + 1], out=step_lat[:, k : k + pieces])
    per_step = (step_lat + step_load).max(axis=0)
    busy = np.isfinite(per_step)
    return float(np.maximum(per_step[busy], min_step).clip(min=0).sum())


def lp_fractions(
    load: np.ndarray,
    lat: np.ndarray,
    size: float,
    pieces: int,
    group: int = 1,
    intra: bool = False,
    min_step: float = 0.0,
) -> np.ndarray | None:
    """Piece fractions minimising the program time for ``pieces`` pieces exactly as
    ``model_time`` counts it (a linear program: each step is at least every arc's latency plus
    its load); None if the solver fails."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    na = load.shape[0]
    nsteps, mats = _placements(load.shape[1], pieces, group, intra)
    step_lat = np.full((na, nsteps), -np.inf)
    for k, m in enumerate(mats):
        present = m.any(axis=0)
        step_lat[:, present] = np.maximum(step_lat[:, present], lat[:, k : k + 1])
    live = np.isfinite(step_lat)
    row_of = np.full((na, nsteps), -1, dtype=np.int64)
    nrows = int(live.sum())
    row_of[live] = np.arange(nrows)
    rows, cols, vals = [], [], []
    for k, m in enumerate(mats):
        arcs_k = np.nonzero(load[:, k] > 0)[0]
        p_idx, s_idx = np.nonzero(m)
        rows.append(row_of[arcs_k[:, None], s_idx[None, :]].ravel())
        cols.append(np.tile(p_idx, len(arcs_k)))
        vals.append(np.repeat(load[arcs_k, k] * size, len(p_idx)))
    a_idx, s_idx = np.nonzero(live)
    rows.append(row_of[a_idx, s_idx])
    cols.append(pieces + s_idx)
    vals.append(np.full(nrows, -1.0))
    a_ub = coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(nrows, pieces + nsteps),
    ).tocsr()
    scale = max(float(np.abs(step_lat[live]).max()), 1e-12)  # HiGHS wants entries near 1
    cost = np.concatenate([np.zeros(pieces), np.ones(nsteps)])
    a_eq = np.concatenate([np.ones(pieces), np.zeros(nsteps)])[None, :]
    res = linprog(
        cost,
        A_ub=a_ub / scale,
        b_ub=-step_lat[live] / scale,
        A_eq=a_eq,
        b_eq=[1.0],
        bounds=[(0, None)] * pieces + [(min_step, None)] * nsteps,
        method="highs",
    )
    if res.status != 0:
        return None
    f = np.maximum(res.x[:pieces], 0)
    f = f[f > f.max() * 1e-6]
    return f / f.sum()


def piece_starts(fracs: np.ndarray) -> np.ndarray:
    """Where each piece starts as a fraction of the buffer, then 1 (where the last ends)."""
    cum = np.concatenate([[0.0], np.cumsum(fracs)])
    cum[-1] = 1.0
    return cum


def piece_units(units: np.ndarray, fracs: np.ndarray) -> np.ndarray:
    """Each of ``units`` (integers, one per tree or pair) cut into pieces of ``fracs``, as the
    programs cut them (rounded piece ends): pieces x len(units), summing to ``units``."""
    cum = piece_starts(fracs)[:, None]
    u = np.asarray(units, dtype=np.float64)[None, :]
    return (np.round(u * cum[1:]) - np.round(u * cum[:-1])).astype(np.int64)


def round_to_total(x: np.ndarray, total: int) -> np.ndarray:
    base = np.floor(x).astype(np.int64)
    short = total - int(base.sum())
    if short > 0:
        order = np.argsort(-(x - base), kind="stable")
        base[order[:short]] += 1
    return base
