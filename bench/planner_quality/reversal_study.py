"""The pieced step-priced LP reduced by time reversal, doubled to 64 pieces without a budget.

A study, not a planner path (docs/status.md, session 21). Where every link has the same
bandwidth and latency both ways, time reversal maps the pieced LP of
``planner.algorithms.packing_window`` to itself: an in-tree T in piece p sends a rank's edge
at depth k at step p + H - k, and T reversed, as an out-tree in piece P - 1 - p, sends it
at step S - 1 - (p + H - k) on the reversed arc (S = 2H + P - 1 steps). The LP then has a
time-symmetric optimum, and this LP is over in-trees only (each standing for itself and its
reversed out-tree), with load rows per pair {(s, a), (S - 1 - s, reverse of a)}, root rows
in(r, q) - in(r, P - 1 - q) = 0 for q < P / 2, and time columns per pair of steps (weight
2; 1 for a middle step, whose arcs pair with their reverses). Each piece count's LP starts
from the trees of the one before (each in the two pieces its piece splits into) and runs
--rounds rounds of column generation. The program is built, priced by the cost model and
checked by the verifier. Writes bench/results/planner_reversal_study.{json,png} (--out,
--out-dir).

    python3 bench/planner_quality/reversal_study.py [--topology examples/mesh-4x4-degraded.json]
        [--size 256MiB] [--pieces 2,4,8,16,32,64] [--rounds 30] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import highspy
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from atomic import save_figure, write_json  # noqa: E402

from planner.algorithms import packing_window as pw  # noqa: E402
from planner.algorithms.arborescence import layered_trees_costed  # noqa: E402
from planner.algorithms.base import PlanContext  # noqa: E402
from planner.algorithms.packing import Packing, QuickRoutes, TreeColumn, _column  # noqa: E402
from planner.algorithms.packing_master import Master  # noqa: E402
from planner.algorithms.packing_sets import packings  # noqa: E402
from planner.bound import lower_bound  # noqa: E402
from planner.plan import with_routes  # noqa: E402
from planner.program import program_to_doc  # noqa: E402
from planner.sizes import parse_size  # noqa: E402
from planner.topology import load_topology  # noqa: E402
from planner.verify import verify_plan  # noqa: E402

OUT = ROOT / "bench" / "results"


class ReversedLP(pw.WindowLP):
    """``WindowLP`` with pieces, over the orbits of time reversal (see the module text)."""

    def __init__(self, ctx: PlanContext, routes, slack: int, start: list[TreeColumn],
                 pieces: int = 1, start_pieces: list[list[int]] | None = None) -> None:
        super().__init__(ctx, routes, slack, [], pieces)
        router = ctx.router
        name = {k: arc for arc, k in router.arc_id.items()}
        self.rev = np.array([router.arc_id[(name[a][1], name[a][0])]
                             for a in range(len(router.bw))])
        if not np.allclose(router.bw[self.rev], router.bw):
            raise SystemExit("time reversal needs every link at one bandwidth both ways")
        groups = (self.steps + 1) // 2
        self.master = Master(self.bw, self.n * (pieces // 2), primal=True, steps=groups)
        self.weight = np.full(groups, 2.0)
        if self.steps % 2:
            self.weight[-1] = 1.0  # the middle step pairs with itself
        for s in range(groups):
            self.master.h.changeColCost(s, float(self.weight[s]))
        self._add_start(start, start_pieces)

    def _reversed(self, col: TreeColumn, inward: bool) -> TreeColumn:
        paths = [tuple(reversed(p)) if p else () for p in col.paths]
        arcs = [a for p in paths if p for a in self.ctx.router.arcs(p)]
        return TreeColumn(inward, col.root, col.parent, paths,
                          np.asarray(arcs, dtype=np.int64), col.depth)

    def _canonical(self, col: TreeColumn, piece: int) -> tuple[TreeColumn, int]:
        """Out-trees enter as the in-trees they reverse, in the mirrored piece."""
        if col.inward:
            return col, piece
        return self._reversed(col, True), self.pieces - 1 - piece

    def _add_columns(self, cols: list[tuple[TreeColumn, int]]) -> None:
        m, last, n = self.master, self.steps - 1, self.n
        for col, p in cols:
            step = self._steps(col, p)
            low, high = step < last - step, step > last - step
            steps = np.where(low, step, last - step)
            arcs = np.where(high, self.rev[col.arcs], col.arcs)
            mid = ~low & ~high  # a middle step's crossing loads both arcs of its pair
            steps = np.concatenate([steps, step[mid]])
            arcs = np.concatenate([arcs, self.rev[col.arcs[mid]]])
            ids, inv = np.unique(steps * m.narcs + arcs, return_inverse=True)
            idx = list(ids)
            val = list(np.bincount(inv) * (m.scale / m.bw[ids % m.narcs]))
            if p != self.pieces - 1 - p:
                q = min(p, self.pieces - 1 - p)
                idx.append(m.load_rows + q * n + col.root)
                val.append(1.0 if p == q else -1.0)
            idx.append(m.load_rows + m.n)
            val.append(1.0)
            m.h.addCol(0.0, 0.0, highspy.kHighsInf, len(idx), np.asarray(idx, dtype=np.int32),
                       np.asarray(val, dtype=float))
            m.cols += 1
            m.col_nnz.append(len(idx))

    def _solve(self, budget: pw.Budget):
        """The weighted objective, prices per (step, arc) and duals per (piece, root) of the
        full LP's time-symmetric optimum."""
        _, _, share, prices, duals = super()._solve(budget)
        x = np.asarray(self.master.h.getSolution().col_value)[:len(self.weight)]
        obj = float((x * self.weight).sum())
        last, n, pieces = self.steps - 1, self.n, self.pieces
        full = np.zeros((self.steps, len(self.bw)))
        for s in range(self.steps):
            q = min(s, last - s)
            full[s] = prices[q] if s < last - s else prices[q][self.rev] if s > last - s \
                else prices[q] + prices[q][self.rev]
        root = np.zeros(pieces * n + 1)
        for p in range(pieces):
            q = min(p, pieces - 1 - p)
            if p != pieces - 1 - p:
                root[p * n:(p + 1) * n] = (1 if p == q else -1) * duals[q * n:(q + 1) * n]
        root[-1] = duals[-1]
        return obj / self.master.scale, obj, share, full, root

    def _price(self, prices: np.ndarray, duals: np.ndarray, threshold: float):
        """In-trees of every root and piece whose reduced cost is below ``-threshold``."""
        n, h = self.n, self.height
        costs, preds = zip(*(self.routes.solve(w) for w in prices), strict=True)
        total = duals[n * self.pieces]
        steps_in = np.arange(self.pieces)[:, None] + np.concatenate(
            [[0], h - np.arange(1, h + 1)])
        parents, tree_cost = layered_trees_costed(np.stack(costs).transpose(0, 2, 1), steps_in,
                                                  self.limits[0])
        out, cache = [], {}
        for p in range(self.pieces):
            for r in range(n):
                if tree_cost[p][r] - duals[p * n + r] - total >= -threshold:
                    continue
                if isinstance(self.routes, QuickRoutes):
                    col = _column(self.routes, self.ctx.router, None, parents[p][r], r, True,
                                  cache)
                else:
                    col = pw._layered_column(self.routes, self.ctx.router, preds,
                                             parents[p][r], r, True, steps_in[p])
                red = float(prices[self._steps(col, p), col.arcs].sum())
                if red - duals[p * n + r] - total < -threshold:
                    out.append((col, p))
        return out

    def program_trees(self, found: Packing) -> tuple[Packing, np.ndarray]:
        """Every in-tree and its reversed out-tree in the mirrored piece."""
        trees, shares, pieces = [], [], []
        for t, x, p in zip(found.trees, found.share, self.live_offsets.tolist(), strict=True):
            trees += [t, self._reversed(t, False)]
            shares += [x, x]
            pieces += [p, self.pieces - 1 - p]
        return Packing(trees, np.array(shares), found.theta, found.prices), np.array(pieces)


def study(path: Path, size: int, counts: list[int], rounds: int) -> dict:
    topo = load_topology(path)
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, size)
    bound = lower_bound(ctx).time_s
    table = packings(ctx)
    key = min(table, key=lambda k: (table[k].theta, str(k)))
    slack = len(ranks) if key[1] is None else key[1]
    routes = ctx.memo["packing_routes"][key[0]]
    start, split = table[key].pool, None
    levels = []
    t0 = time.perf_counter()
    for pieces in counts:
        t1 = time.perf_counter()
        lp = ReversedLP(ctx, routes, slack, start, pieces, split)
        found = lp.solve(rounds=rounds)
        if found is None:
            raise SystemExit(f"{path.stem}: the LP of {pieces} pieces failed")
        trees, offsets = lp.program_trees(found)
        program = pw.window_program(trees, offsets, lp.height, min(1 << 20, size))
        t = ctx.cost.program_time(ranks, program, float(size))
        levels.append({"pieces": pieces, "lp_over_bound": found.theta * size / bound,
                       "program_over_bound": t / bound, "rounds": len(lp.values),
                       "columns": len(lp.trees), "seconds": time.perf_counter() - t1})
        print(f"  {path.stem}: {pieces} pieces: LP {found.theta * size / bound:.4f}x, program "
              f"{t / bound:.4f}x the bound, {len(lp.values)} rounds, {len(lp.trees)} columns, "
              f"{time.perf_counter() - t1:.1f} s", flush=True)
        start, split = found.trees, [[2 * p, 2 * p + 1] for p in lp.live_offsets.tolist()]
    doc = {"ranks": ranks, "size_bytes": size,
           "program": program_to_doc(with_routes(program, ranks, ctx.router))}
    rep = verify_plan(doc, topo)
    if not rep.ok:
        raise SystemExit(f"{path.stem}: verifier: {rep.error}")
    return {"topology": path.stem, "size_bytes": size, "bound_s": bound, "rounds": rounds,
            "levels": levels, "program_s": t, "simulated_s": rep.simulated_time_s,
            "seconds": time.perf_counter() - t0}


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_xscale("log")
    for r in rows:
        xs = [lv["pieces"] for lv in r["levels"]]
        ax.plot(xs, [lv["program_over_bound"] for lv in r["levels"]], marker="o",
                label=f"{r['topology']} ({r['seconds']:.0f} s)")
        ax.set_xticks(xs, [str(x) for x in xs])
    ax.axhline(1.03, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="pieces", ylabel="program / lower bound",
           title="pieced LP by time reversal, no budget")
    ax.minorticks_off()
    ax.legend()
    save_figure(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", action="append", type=Path,
                    help="topology file (repeatable; default examples/mesh-4x4-degraded.json)")
    ap.add_argument("--size", type=parse_size, default=256 << 20)
    ap.add_argument("--pieces", default="2,4,8,16,32,64", help="piece counts, in order")
    ap.add_argument("--rounds", type=int, default=30, help="column-generation rounds a count")
    ap.add_argument("--out", default="planner_reversal_study")
    ap.add_argument("--out-dir", type=Path, default=OUT)
    args = ap.parse_args()
    try:
        counts = [int(c) for c in args.pieces.split(",")]
    except ValueError:
        ap.error(f"--pieces: not a comma-separated list of integers: {args.pieces!r}")
    if not counts or min(counts) < 1 or args.rounds < 0:
        ap.error("--pieces must be counts >= 1 and --rounds >= 0")
    paths = args.topology or [ROOT / "examples" / "mesh-4x4-degraded.json"]
    for p in paths:
        if not p.is_file():
            ap.error(f"--topology: no such file: {p}")
    rows = [study(p, args.size, counts, args.rounds) for p in paths]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.out_dir / f"{args.out}.json", rows)
    plot(rows, args.out_dir / f"{args.out}.png")


if __name__ == "__main__":
    main()
