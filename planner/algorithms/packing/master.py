"""The packing LP's master problem, kept in one HiGHS model between column-generation rounds.

Rows: one per arc (the trees' time on it minus theta <= 0, entries scaled by the slowest
arc's bandwidth so they lie in (0, crossings]), one per root (in-tree shares - out-tree
shares = 0) and one for the total (in-tree shares = 1). Columns: theta, then one per tree.
New trees are added as columns and dropped ones deleted, so HiGHS re-solves from the last
basis (warm start) instead of from scratch: at 64 ranks the master goes from seconds per
round to milliseconds. New columns enter at zero, so the last basis stays primal feasible:
with ``primal`` the primal simplex re-solves it (about 3x faster than HiGHS's default dual
simplex on 64-rank masters, but its duals price the degenerate LPs of full meshes worse:
the packing uses it above 32 ranks only). With ``steps`` (``packing.window``) the load rows
are per (step, arc) and theta is a time column per step, whose sum is minimised.
"""

from __future__ import annotations

import os
import sys
import threading

import highspy
import numpy as np
from syncplan.core.errors import InfeasibleError

PRIMAL_SIMPLEX = 4  # HiGHS simplex_strategy
_banner_lock = threading.Lock()
_banner_shown = False


def quiet_highs() -> highspy.Highs:
    """A silent HiGHS instance. The first one in a process prints a licence banner on the C
    stdout before any option can be set; it goes to /dev/null, so CLI output stays clean."""
    global _banner_shown
    with _banner_lock:
        if not _banner_shown:
            sys.stdout.flush()
            saved = os.dup(1)
            try:
                with open(os.devnull, "wb") as null:
                    os.dup2(null.fileno(), 1)
                    h = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
            _banner_shown = True
        else:
            h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


class Master:
    """Incremental LP: ``add_trees`` columns, ``delete`` some, ``solve`` for shares and duals."""

    def __init__(
        self, bw: np.ndarray, n: int, primal: bool = False, interior: bool = False, steps: int = 1
    ) -> None:
        self.bw = bw
        self.n = n
        self.steps = steps  # > 1: a row per (step, arc) and a time column per step
        self.scale = float(bw.min())  # coefficient of a crossing: min bw / bw (<= 1)
        self.narcs = len(bw)
        h = quiet_highs()
        if primal:
            h.setOptionValue("simplex_strategy", PRIMAL_SIMPLEX)
        self.h = h
        self.interior = False
        if interior:
            self.go_interior()
        inf = highspy.kHighsInf
        load_rows = steps * self.narcs
        m = load_rows + n + 1
        lower = np.concatenate([np.full(load_rows, -inf), np.zeros(n), [1.0]])
        upper = np.concatenate([np.zeros(load_rows + n), [1.0]])
        h.addRows(
            m,
            lower,
            upper,
            0,
            np.zeros(0, dtype=np.int32),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
        )
        for s in range(steps):
            h.addCol(
                1.0,
                0.0,
                inf,
                self.narcs,
                np.arange(s * self.narcs, (s + 1) * self.narcs, dtype=np.int32),
                -np.ones(self.narcs),
            )
        self.load_rows = load_rows
        self.cols = 0
        self.col_nnz: list[int] = []  # nonzeros of every tree column

    def add_trees(
        self,
        trees: list[tuple[np.ndarray, int, bool]],
        steps: list[np.ndarray] | None = None,
        weights: list[np.ndarray] | None = None,
    ) -> None:
        """Tree columns (arcs, root, inward), in one call to HiGHS: each its arc crossings
        (at ``steps[k]``, one per crossing, when the LP has steps; each counting
        ``weights[k]`` of a crossing, default one), +1 in its root's row (-1 for an
        out-tree), +1 in the total row for an in-tree."""
        if not trees:
            return
        rows = [
            t[0] if steps is None else steps[k] * self.narcs + t[0] for k, t in enumerate(trees)
        ]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        owner = np.repeat(np.arange(len(trees)), lengths)
        keys, inv = np.unique(owner * self.load_rows + np.concatenate(rows), return_inverse=True)
        counts = np.bincount(
            inv, weights=None if weights is None else np.concatenate(weights), minlength=len(keys)
        )
        ids = keys % self.load_rows
        vals = counts * (self.scale / self.bw[ids % self.narcs])
        cuts = np.searchsorted(keys // self.load_rows, np.arange(len(trees) + 1)).tolist()
        base = self.load_rows
        index: list[np.ndarray] = []
        value: list[np.ndarray] = []
        starts = np.zeros(len(trees), dtype=np.int32)
        size = 0
        for k, (_, root, inward) in enumerate(trees):
            lo, hi = cuts[k], cuts[k + 1]
            extra = [base + root, base + self.n] if inward else [base + root]
            index += [ids[lo:hi], np.asarray(extra)]
            value += [vals[lo:hi], np.asarray([1.0, 1.0] if inward else [-1.0])]
            starts[k] = size
            size += hi - lo + len(extra)
            self.col_nnz.append(hi - lo + len(extra))
        inf = highspy.kHighsInf
        k = len(trees)
        self.h.addCols(
            k,
            np.zeros(k),
            np.zeros(k),
            np.full(k, inf),
            size,
            starts,
            np.concatenate(index).astype(np.int32),
            np.concatenate(value).astype(float),
        )
        self.cols += k

    def delete(self, columns: list[int]) -> None:
        """Drop tree columns by their index among the trees (0-based, theta excluded)."""
        if columns:
            idx = np.asarray(columns, dtype=np.int32) + self.steps
            self.h.deleteCols(len(idx), idx)
            self.cols -= len(idx)
            gone = set(columns)
            self.col_nnz = [k for j, k in enumerate(self.col_nnz) if j not in gone]

    def nonzeros(self) -> int:
        """Nonzeros of the constraint matrix (the time columns' and the trees')."""
        return self.steps * self.narcs + sum(self.col_nnz)

    def limit_iterations(self, count: int) -> None:
        """Stop the next solves after ``count`` simplex iterations (``solve`` then raises)."""
        self.h.setOptionValue("simplex_iteration_limit", int(count))

    def iterations(self) -> int:
        """Simplex iterations of the last solve."""
        return int(self.h.getInfo().simplex_iteration_count)

    def at_limit(self) -> bool:
        """Whether the last solve stopped at the iteration limit (``limit_iterations``)."""
        return self.h.getModelStatus() == highspy.HighsModelStatus.kIterationLimit

    def go_interior(self) -> None:
        """Solve by the interior-point method from now on (see ``solve``)."""
        self.h.setOptionValue("solver", "ipm")
        self.h.setOptionValue("run_crossover", "off")
        self.interior = True

    def vertex(self) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        """``solve`` by the simplex method: a basic optimum, whose shares sit on few trees
        (an interior optimum spreads them over every column)."""
        if self.interior:
            self.h.setOptionValue("solver", "simplex")
            self.interior = False
        return self.solve()

    def solve(self) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray]:
        """(theta in s/byte, theta in the LP's scaled units, shares, arc prices per crossing
        in scaled units per second-per-byte of bandwidth (per step and arc when the LP has
        steps; theta is then the sum of the steps' times), root and total duals). With
        ``interior`` the interior-point method without crossover: central duals, which price
        the degenerate LPs of meshes in far fewer rounds than a simplex vertex's."""
        self.h.run()
        if self.h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            status = self.h.modelStatusToString(self.h.getModelStatus())
            raise InfeasibleError(f"packing LP failed: {status}")
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value)
        dual = np.asarray(sol.row_dual)
        k, rows = self.steps, self.load_rows
        prices = np.maximum(-dual[:rows], 0).reshape(k, self.narcs) * self.scale / self.bw
        objective = float(x[:k].sum())
        return (
            objective / self.scale,
            objective,
            np.maximum(x[k:], 0),
            prices[0] if k == 1 else prices,
            dual[rows:],
        )
