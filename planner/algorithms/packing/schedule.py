"""Lockstep programs from a tree packing: pair reduce and broadcast trees, pipeline pieces.

Each *pair* is a share of the buffer reduced along an in-tree to a root and broadcast along an
out-tree from it. With H_in and H_out the tallest in- and out-trees, a rank at depth k of an
in-tree sends its partial sum of piece p at step p + H_in - k (as late as its parent can use
it: the roots hold piece p after step p + H_in - 1), and a rank at depth k of an out-tree
hears the result at step p + H_in + k - 1. The reduce of later pieces overlaps the broadcast of
earlier ones; ``syncplan.planner.algorithms.pipeline`` prices piece counts and sizes on the per-arc
profile exactly as the cost model prices the program.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from syncplan.core.program import Program, Step, Transfer
from syncplan.planner.algorithms.base import PlanContext
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn
from syncplan.planner.algorithms.pipeline import piece_units, round_to_total

Path = tuple[str, ...]


@dataclass
class Pair:
    share: float
    reduce: TreeColumn
    broadcast: TreeColumn


def pair_trees(packing: Packing) -> list[Pair]:
    """Match each root's in-trees with its out-trees by share (their totals are equal)."""
    ins: dict[int, list[tuple[float, TreeColumn]]] = defaultdict(list)
    outs: dict[int, list[tuple[float, TreeColumn]]] = defaultdict(list)
    for tree, x in zip(packing.trees, packing.share, strict=True):
        if x > 1e-12:
            (ins if tree.inward else outs)[tree.root].append((float(x), tree))
    pairs = []
    for root, a in ins.items():
        b = outs.get(root, [])
        i = j = 0
        ra = a[0][0] if a else 0.0
        rb = b[0][0] if b else 0.0
        while i < len(a) and j < len(b):
            take = min(ra, rb)
            if take > 1e-12:
                pairs.append(Pair(take, a[i][1], b[j][1]))
            ra -= take
            rb -= take
            if ra <= 1e-12:
                i += 1
                ra = a[i][0] if i < len(a) else 0.0
            if rb <= 1e-12:
                j += 1
                rb = b[j][0] if j < len(b) else 0.0
    total = sum(p.share for p in pairs)
    for p in pairs:
        p.share /= total
    return pairs


class PairSchedule:
    """The phase offsets of a set of pairs and their per-arc profile."""

    def __init__(self, ctx: PlanContext, pairs: list[Pair]) -> None:
        self.ctx = ctx
        self.pairs = pairs
        self.h_in = max(p.reduce.height for p in pairs)
        self.h_out = max(p.broadcast.height for p in pairs)
        self.columns = self.h_in + self.h_out
        router = ctx.router
        self.transfers: list[list[tuple[int, int, int, bool, Path]]] = []
        arc_l, meta = [], []
        seen: dict[Path, tuple[np.ndarray, float]] = {}  # per path: its arcs and latency
        for j, pair in enumerate(pairs):
            items = []
            red, bc = pair.reduce, pair.broadcast
            for v, q in enumerate(red.parent):
                if q >= 0:
                    items.append((self.h_in - int(red.depth[v]), v, int(q), True, red.paths[v]))
            for v, q in enumerate(bc.parent):
                if q >= 0:
                    items.append((self.h_in + int(bc.depth[v]) - 1, int(q), v, False, bc.paths[v]))
            self.transfers.append(items)
            for off, _, _, _, path in items:
                hit = seen.get(path)
                if hit is None:
                    ids = np.asarray(router.arcs(path), dtype=np.int64)
                    hit = seen[path] = (ids, float(router.lat[ids].sum()))
                arc_l.append(hit[0])
                meta.append((j, off, hit[1]))
        counts = np.fromiter((len(a) for a in arc_l), dtype=np.int64, count=len(arc_l))
        cols, offs, lats = (np.repeat(np.asarray(x), counts) for x in zip(*meta, strict=True))
        self.flat_entries = (np.concatenate(arc_l), cols, offs, lats)
        # see _groups
        self._grouped: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def transfers_per_piece(self) -> int:
        return sum(len(t) for t in self.transfers)

    def profile(self, shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct arc: seconds per byte of buffer in each offset, and the largest path
        latency through it (-inf where unused)."""
        arc, col, off, plat = self.flat_entries
        bw = self.ctx.router.bw
        no = self.columns
        narcs = len(bw)
        idx = arc * no + off
        load: np.ndarray = np.bincount(idx, weights=shares[col], minlength=narcs * no)
        lat: np.ndarray = np.full(narcs * no, -np.inf)
        np.maximum.at(lat, idx, plat)
        load = load.reshape(narcs, no) / bw[:, None]
        lat = lat.reshape(narcs, no)
        keep = np.isfinite(lat).any(axis=1)
        table = np.unique(np.round(np.hstack([load[keep], lat[keep]]), 15), axis=0)
        return table[:, :no], table[:, no:]

    def fluid_shares(self) -> tuple[np.ndarray, float]:
        """Shares of these pairs that make the busiest arc as light as possible, and its
        time per byte."""
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix, hstack

        arc, col, _, _ = self.flat_entries
        bw = self.ctx.router.bw
        npairs = len(self.pairs)
        use = coo_matrix((1.0 / bw[arc], (arc, col)), shape=(len(bw), npairs)).tocsr()
        used = np.unique(arc)
        use = use[used]
        if npairs == 1:
            return np.ones(1), float(use.toarray().max())
        scale = float(use.max())
        a_ub = hstack([use / scale, coo_matrix(-np.ones((len(used), 1)))]).tocsr()
        cost = np.zeros(npairs + 1)
        cost[-1] = 1.0
        res = linprog(
            cost,
            A_ub=a_ub,
            b_ub=np.zeros(len(used)),
            A_eq=np.concatenate([np.ones(npairs), [0.0]])[None, :],
            b_eq=[1.0],
            bounds=[(0, None)] * (npairs + 1),
            method="highs",
        )
        w = (
            np.maximum(res.x[:npairs], 0)
            if res.status == 0
            else np.array([p.share for p in self.pairs])
        )
        w = w / w.sum()
        return w, float((use @ w).max())

    def piece_units(self, shares: np.ndarray, fracs: np.ndarray, units: int) -> np.ndarray:
        """Units of every pair in every piece of ``build`` (pieces x pairs)."""
        live = np.nonzero(shares > 0)[0]
        per_pair = round_to_total(shares[live] * units / shares[live].sum(), units)
        out = np.zeros((len(fracs), len(self.pairs)), dtype=np.int64)
        out[:, live] = piece_units(per_pair, fracs)
        return out

    def program_time(
        self, shares: np.ndarray, fracs: np.ndarray, units: int, size: float
    ) -> float | None:
        """The cost model's time of ``build(shares, fracs, units)`` without building it
        (hundreds of thousands of transfers at 64 ranks): every crossing of every piece's
        transfers, loads per (step, arc), each step's slowest crossing plus its path's
        latency. The same figure up to the order of the loads' sums; None where the cost
        model prices more than wires and latency (message, exchange or switch overheads)."""
        cost = self.ctx.cost
        if cost.message_overhead_s or cost.exchange_overhead_s or cost.switch_overhead:
            return None
        arc_of, off_of, count, lat = self._groups()
        sizes = self.piece_units(shares, fracs, units)  # pieces x pairs
        units_of = sizes.astype(np.float64) @ count  # per piece and (arc, offset) group
        # each group's slowest path latency among the pairs a piece carries (pieces differ
        # only where a pair's share rounds to no units in some of them)
        patterns, which = np.unique(sizes > 0, axis=0, return_inverse=True)
        lat_of = np.stack(
            [
                lat[row].max(axis=0) if row.any() else np.full(lat.shape[1], -np.inf)
                for row in patterns
            ]
        )
        lat_of = lat_of[which.ravel()]
        pieces, bw = len(fracs), self.ctx.router.bw
        steps = pieces + self.columns - 1
        step_units = np.zeros((steps, len(bw)))  # integers: their sums are exact
        step_lat = np.full((steps, len(bw)), -np.inf)
        for k in range(self.columns):  # piece p runs offset k at step p + k
            mine = np.flatnonzero(off_of == k)
            arcs = arc_of[mine]  # distinct: one group per (arc, offset)
            step_units[k : k + pieces, arcs] += units_of[:, mine]
            step_lat[k : k + pieces, arcs] = np.maximum(
                step_lat[k : k + pieces, arcs], lat_of[:, mine]
            )
        finish = step_units * (size / units) / bw[None, :] + step_lat
        per_step = finish.max(axis=1)
        busy = per_step[np.isfinite(per_step)]
        return float(np.maximum(busy, cost.min_step_s).sum()) if len(busy) else 0.0

    def _groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The crossings grouped by (arc, offset): each group's arc and offset, per pair its
        crossings in the group (pairs x groups) and their slowest path latency (-inf:
        none)."""
        if self._grouped is None:
            arc, col, off, plat = self.flat_entries
            keys, group = np.unique(arc * self.columns + off, return_inverse=True)
            shape = (len(self.pairs), len(keys))
            flat = col * len(keys) + group
            count = np.bincount(flat, minlength=shape[0] * shape[1]).reshape(shape)
            lat = np.full(shape[0] * shape[1], -np.inf)
            np.maximum.at(lat, flat, plat)
            self._grouped = (
                keys // self.columns,
                keys % self.columns,
                count.astype(np.float64),
                lat.reshape(shape),
            )
        return self._grouped

    def build(self, shares: np.ndarray, fracs: np.ndarray, units: int) -> Program:
        """Per piece, per pair a contiguous range of units; transfers at piece + offset."""
        sizes = self.piece_units(shares, fracs, units).tolist()
        live = np.nonzero(shares > 0)[0].tolist()
        steps: list[Step] = [[] for _ in range(len(fracs) + self.columns - 1)]
        add = [s.append for s in steps]
        make = tuple.__new__  # Transfer(...) without its keyword handling: 40 % faster
        base = 0
        for p, row in enumerate(sizes):
            for j in live:
                a, b = base, base + row[j]
                if a == b:
                    continue
                base = b
                for off, src, dst, red, path in self.transfers[j]:
                    add[p + off](make(Transfer, (src, dst, a, b, red, path)))
        return Program(units, [s for s in steps if s])
