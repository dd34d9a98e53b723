"""How far the pipeline fill of a tree packing can fall when every piece has trees of its own.

A study, not a planner path: on a graph whose packing pipelines with a large fill (a 2D mesh:
`forest` was 1.043x its bound on examples/mesh-4x4.json at 256 MiB before session 21, whose
orbit LP gives it 1.022x; 1.049x on the degraded one, which has no symmetry), it solves the
pieced step-priced LP of ``planner.algorithms.packing.window`` with every piece free and many
pieces, which the planner cannot afford without a symmetry group. Each piece starts from one
*composite* column (the best packing's pairs at their fluid shares) and gets in- and
out-trees priced at its own steps (``layered_trees`` on the duals of the (step, arc) rows),
at most --topk per piece and direction a round; columns without share for two rounds go; the
master is HiGHS' interior point without crossover (its central duals price these degenerate
LPs in far fewer rounds than a simplex vertex). The program is built, priced by the cost model
and checked by the verifier. With --hats K each tree's share is piecewise linear over the
pieces instead (K hat functions: K columns per tree, not one per piece). Writes
bench/results/planner_fill_study.{json,png} (--out, --out-dir): the LP's value per round and
the piece sizes (of the buffer) of the solution.

    python3 bench/planner_quality/fill_study.py [--topology examples/mesh-4x4.json]
        [--size 256MiB] [--pieces 64] [--rounds 14] [--topk 16] [--hats K] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import highspy
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.core.program import Program, Step, Transfer, program_to_doc  # noqa: E402
from syncplan.planner.algorithms.base import PlanContext  # noqa: E402
from syncplan.planner.algorithms.forest import general as forest_any  # noqa: E402
from syncplan.planner.algorithms.packing import PACKING  # noqa: E402
from syncplan.planner.algorithms.packing import sets as packing_sets  # noqa: E402
from syncplan.planner.algorithms.packing import window as pw  # noqa: E402
from syncplan.planner.algorithms.packing.arborescence import layered_trees  # noqa: E402
from syncplan.planner.algorithms.packing.lp import Packing, TreeColumn, tree_column  # noqa: E402
from syncplan.planner.algorithms.packing.master import Master  # noqa: E402
from syncplan.planner.algorithms.packing.routes import QuickRoutes  # noqa: E402
from syncplan.planner.algorithms.packing.schedule import Pair, PairSchedule, pair_trees  # noqa: E402
from syncplan.planner.algorithms.pipeline import round_to_total  # noqa: E402
from syncplan.planner.bound import lower_bound  # noqa: E402
from syncplan.planner.plan import with_routes  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import load_topology  # noqa: E402
from syncplan.planner.verify import verify_plan  # noqa: E402

OUT = ROOT / "bench" / "results"
IDLE_SHARE = 1e-4  # of the largest tree share: below it a column counts as idle
IDLE_ROUNDS = 2  # idle rounds after which a column goes


class FreePieces(pw.WindowLP):
    """The pieced step-priced LP over a basis of piece profiles: column (tree, k) runs the
    tree in every piece p with weight ``phi[k, p]`` (rows of ``phi`` sum to one). The
    identity basis gives every piece trees of its own; K hat functions over the pieces give
    each tree a piecewise-linear share across them (K x fewer columns per tree)."""

    def __init__(
        self,
        ctx: PlanContext,
        routes,
        slack: int,
        pairs: list[Pair],
        shares: np.ndarray,
        phi: np.ndarray,
        topk: int,
    ) -> None:
        super().__init__(ctx, routes, slack, [], 1)
        fit = [
            pair for pair in pairs if max(pair.reduce.height, pair.broadcast.height) <= self.height
        ]
        if len(fit) < len(pairs):  # deeper than this LP's steps: the rest, at their fluid shares
            pairs, shares = fit, PairSchedule(ctx, fit).fluid_shares()[0]
        self.pairs, self.shares, self.topk = pairs, shares, topk
        self.phi = phi / phi.sum(axis=1, keepdims=True)
        self.basis, self.npieces = phi.shape
        self.master = Master(self.bw, self.n * self.basis, steps=2 * self.height + self.npieces - 1)
        self.master.go_interior()
        for k in range(self.basis):  # the composites are the first ``basis`` columns
            rows, vals = [], []
            for pair, x in zip(pairs, shares, strict=True):
                for col in (pair.reduce, pair.broadcast):
                    r, v = self.arc_entries(col, k)
                    rows.append(r)
                    vals.append(v * x)
            self.tree_column(np.concatenate(rows), np.concatenate(vals), None, True)

    def arc_entries(self, col: TreeColumn, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and values (seconds per byte, unscaled) of ``col`` run with profile k."""
        narcs = self.master.narcs
        ps = np.nonzero(self.phi[k] > 0)[0]
        offs = self.column_steps(col, 0)
        rows = ((offs[:, None] + ps[None, :]) * narcs + col.arcs[:, None]).ravel()
        vals = (1.0 / self.bw[col.arcs][:, None] * self.phi[k, ps][None, :]).ravel()
        return rows, vals

    def tree_column(
        self, rows: np.ndarray, vals: np.ndarray, root_row: int | None, inward: bool
    ) -> None:
        """A column of these crossings, +1 (in-tree) or -1 in its root row (none for a
        composite, whose in- and out-trees balance every root), +1 in the total row for an
        in-tree or a composite."""
        m = self.master
        ids, inv = np.unique(rows, return_inverse=True)
        idx = list(ids)
        val = list(np.bincount(inv, weights=vals) * m.scale)
        if root_row is not None:
            idx.append(m.load_rows + root_row)
            val.append(1.0 if inward else -1.0)
        if inward:
            idx.append(m.load_rows + m.n)
            val.append(1.0)
        status = m.h.addCol(
            0.0,
            0.0,
            highspy.kHighsInf,
            len(idx),
            np.asarray(idx, dtype=np.int32),
            np.asarray(val, dtype=float),
        )
        if status == highspy.HighsStatus.kError:  # kWarning: entries below 1e-9 dropped
            raise RuntimeError("HiGHS refused a column")
        m.cols += 1
        m.col_nnz.append(len(idx))

    def _add(self, col: TreeColumn, k: int = 0) -> bool:
        key = (
            (b"i" if col.inward else b"o")
            + k.to_bytes(4, "little")
            + col.parent.tobytes()
            + b"".join("|".join(p).encode() for p in col.paths)
        )
        if key in self.seen_keys:
            return False
        self.seen_keys.add(key)
        for name, x in (("trees", col), ("offsets", k), ("keys", key), ("idle", 0)):
            getattr(self, name).append(x)
        self.tree_column(*self.arc_entries(col, k), k * self.n + col.root, col.inward)
        return True

    def price_columns(
        self, prices: np.ndarray, duals: np.ndarray, threshold: float
    ) -> list[tuple[TreeColumn, int]]:
        """Per profile and direction the ``topk`` trees of least negative reduced cost: the
        price of an edge at phase offset o under profile k is phi[k] . prices[o + p]."""
        n, h = self.n, self.height
        total = duals[n * self.basis]
        step_in = np.concatenate([[0], h - np.arange(1, h + 1)])
        step_out = np.concatenate([[0], h + np.arange(1, h + 1) - 1])
        out: list[tuple[TreeColumn, int]] = []
        cache: dict = {}
        for k in range(self.basis):
            eff = np.stack([self.phi[k] @ prices[o : o + self.npieces] for o in range(2 * h)])
            costs, preds = zip(*(self.routes.solve(w) for w in eff), strict=True)
            cost = np.stack(costs)
            for inward, parents, steps in (
                (True, layered_trees(cost.transpose(0, 2, 1), step_in, self.limits[0]), step_in),
                (False, layered_trees(cost, step_out, self.limits[1]), step_out),
            ):
                found = []
                for r in range(n):
                    if isinstance(self.routes, QuickRoutes):
                        col = tree_column(
                            self.routes, self.ctx.router, None, parents[r], r, inward, cache
                        )
                    else:
                        col = pw.layered_column(
                            self.routes, self.ctx.router, preds, parents[r], r, inward, steps
                        )
                    red = float(eff[self.column_steps(col, 0), col.arcs].sum())
                    red += -duals[k * n + r] - total if inward else duals[k * n + r]
                    if red < -threshold:
                        found.append((red, r, col))
                out += [(col, k) for _, _, col in sorted(found, key=lambda f: f[:2])[: self.topk]]
        return out

    def _drop_idle(self, share: np.ndarray) -> None:
        trees = share[self.basis :]
        if not len(trees):
            return
        self.idle = [
            0 if x > IDLE_SHARE * trees.max() else k + 1
            for x, k in zip(trees, self.idle, strict=True)
        ]
        drop = [j for j, k in enumerate(self.idle) if k >= IDLE_ROUNDS]
        if drop:
            gone = set(drop)
            self.seen_keys.difference_update(self.keys[j] for j in drop)
            self.master.delete([self.basis + j for j in drop])
            for name in ("trees", "offsets", "keys", "idle"):
                setattr(self, name, [x for j, x in enumerate(getattr(self, name)) if j not in gone])

    def run(self, rounds: int, say, size: float) -> tuple[np.ndarray, list[float]]:
        """Column generation: (shares of every column, the LP's s/byte after each solve)."""
        t0 = time.perf_counter()
        theta, obj, share, prices, duals = self.solve_master(pw.Budget(np.inf))
        values = [theta]
        for k in range(rounds):
            cols = self.price_columns(prices, duals, PACKING.tolerance * obj)
            if not cols:
                break
            self._drop_idle(share)
            if not sum(self._add(c, j) for c, j in cols):
                break
            theta, obj, share, prices, duals = self.solve_master(pw.Budget(np.inf))
            values.append(theta)
            say(
                f"round {k + 1}: {len(self.trees)} trees, LP bandwidth time "
                f"{theta * size * 1e3:.4f} ms, {time.perf_counter() - t0:.1f} s"
            )
        return share, values

    def program(self, share: np.ndarray, units: int) -> tuple[Program, np.ndarray]:
        """The lockstep program of the solution, and each piece's part of the buffer."""
        comp, trees = share[: self.basis], share[self.basis :]
        trees = np.where(trees > IDLE_SHARE * trees.max(initial=0.0), trees, 0.0)
        profile = np.asarray(self.offsets)
        items: list[tuple[int, Pair, float]] = []
        for k in range(self.basis):
            if comp[k] > 1e-12:
                items += [
                    (k, pair, comp[k] * x)
                    for pair, x in zip(self.pairs, self.shares, strict=True)
                    if x > 0
                ]
            mine = (profile == k) & (trees > 0)
            if mine.any():
                cols = [t for t, m in zip(self.trees, mine, strict=True) if m]
                weight = float(sum(x for t, x in zip(cols, trees[mine], strict=True) if t.inward))
                items += [
                    (k, pair, pair.share * weight)
                    for pair in pair_trees(Packing(cols, trees[mine], 0.0, None))
                ]
        weights = np.array([x for _, _, x in items])
        per = round_to_total(weights * units / weights.sum(), units)
        sizes = np.zeros(self.npieces)
        h = self.height
        steps: list[Step] = [[] for _ in range(self.npieces + 2 * h)]
        base = 0
        for (k, pair, _), u in zip(items, per, strict=True):
            for p, part in enumerate(round_to_total(self.phi[k] * int(u), int(u))):
                a, b = base, base + int(part)
                base = b
                sizes[p] += (b - a) / units
                if a == b:
                    continue
                for v, q in enumerate(pair.reduce.parent):
                    if q >= 0:
                        steps[p + h - int(pair.reduce.depth[v])].append(
                            Transfer(v, int(q), a, b, True, pair.reduce.paths[v])
                        )
                for v, q in enumerate(pair.broadcast.parent):
                    if q >= 0:
                        steps[p + h + int(pair.broadcast.depth[v]) - 1].append(
                            Transfer(int(q), v, a, b, False, pair.broadcast.paths[v])
                        )
        return Program(units, [s for s in steps if s]), sizes


def hats(pieces: int, count: int) -> np.ndarray:
    """``count`` hat functions over ``pieces`` pieces (knots evenly spaced, ends included)."""
    knots = np.linspace(0, pieces - 1, count)
    return np.maximum(
        0.0, 1 - np.abs(np.arange(pieces)[None, :] - knots[:, None]) / (knots[1] - knots[0])
    )


def study(path: Path, size: int, pieces: int, rounds: int, topk: int, hat_count: int = 0) -> dict:
    topo = load_topology(path)
    ranks = topo.endpoints()
    ctx = PlanContext.create(topo, ranks, size)

    def say(line: str) -> None:
        print(f"  {path.stem}: {line}", flush=True)

    t0 = time.perf_counter()
    forest = forest_any.forest_any(ctx)
    say(
        f"forest (any topology) {forest.predicted_time_s * 1e3:.4f} ms "
        f"({forest.details.get('packing')})"
    )
    table = packing_sets.packings(ctx)
    key = min(table, key=lambda k: (table[k].theta, str(k)))
    pairs = pair_trees(table[key])
    shares, _ = PairSchedule(ctx, pairs).fluid_shares()
    phi = np.eye(pieces) if hat_count == 0 else hats(pieces, hat_count)
    lp = FreePieces(ctx, ctx.memo["packing_routes"][key[0]], key[1] or 0, pairs, shares, phi, topk)
    share, values = lp.run(rounds, say, float(size))
    program, sizes = lp.program(share, min(1 << 20, size))
    t = ctx.cost.program_time(ranks, program, float(size))
    doc = {
        "ranks": ranks,
        "size_bytes": size,
        "program": program_to_doc(with_routes(program, ranks, ctx.router)),
    }
    rep = verify_plan(doc, topo)
    if not rep.ok:
        raise SystemExit(f"{path.stem}: verifier: {rep.error}")
    bound = lower_bound(ctx).time_s
    say(
        f"{'free pieces' if hat_count == 0 else f'{hat_count} hats'} {t * 1e3:.4f} ms = "
        f"{t / bound:.4f}x the bound "
        f"(forest {forest.predicted_time_s / bound:.4f}x), {time.perf_counter() - t0:.0f} s"
    )
    return {
        "topology": path.stem,
        "size_bytes": size,
        "pieces": pieces,
        "topk": topk,
        "basis": "free pieces" if hat_count == 0 else f"{hat_count} hats",
        "bound_s": bound,
        "forest_s": forest.predicted_time_s,
        "free_pieces_s": t,
        "simulated_s": rep.simulated_time_s,
        "lp_s_per_round": [v * size for v in values],
        "trees": len(lp.trees),
        "piece_sizes": sizes.tolist(),
        "seconds": time.perf_counter() - t0,
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for r in rows:
        a.plot(np.array(r["lp_s_per_round"]) / r["bound_s"], marker=".", label=r["topology"])
        b.plot(np.array(r["piece_sizes"]) * 100, label=r["topology"])
    a.axhline(1.03, color="grey", lw=0.8, ls="--")
    a.set(
        xlabel="column-generation round",
        ylabel="LP bandwidth time / bound (no latency)",
        title="free-pieces LP",
    )
    b.set(xlabel="piece", ylabel="% of the buffer", title="piece sizes of the solution")
    a.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--topology",
        action="append",
        type=Path,
        help="topology file (repeatable; default the two 4x4 meshes)",
    )
    ap.add_argument("--size", type=parse_size, default=256 << 20)
    ap.add_argument("--pieces", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=14)
    ap.add_argument("--topk", type=int, default=16)
    ap.add_argument(
        "--hats",
        type=int,
        default=0,
        help="K >= 2: each tree's share is piecewise linear over the pieces (K hat "
        "functions) instead of free per piece",
    )
    ap.add_argument("--out", default="planner_fill_study")
    ap.add_argument("--out-dir", type=Path, default=OUT)
    args = ap.parse_args()
    if (
        args.pieces < 2
        or args.rounds < 0
        or args.topk < 1
        or args.hats in (1,)
        or not 0 <= args.hats <= args.pieces
    ):
        ap.error("--pieces must be >= 2, --rounds >= 0, --topk >= 1, --hats 0 or 2..pieces")
    paths = args.topology or [
        ROOT / "examples" / "mesh-4x4.json",
        ROOT / "examples" / "mesh-4x4-degraded.json",
    ]
    rows = [study(p, args.size, args.pieces, args.rounds, args.topk, args.hats) for p in paths]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.out}.json").write_text(json.dumps(rows, indent=1) + "\n")
    plot(rows, args.out_dir / f"{args.out}.png")
    print(f"{'topology':24s} {'forest/bound':>12s} {'study/bound':>11s} {'seconds':>8s}")
    for r in rows:
        print(
            f"{r['topology']:24s} {r['forest_s'] / r['bound_s']:12.4f} "
            f"{r['free_pieces_s'] / r['bound_s']:11.4f} {r['seconds']:8.0f}"
        )


if __name__ == "__main__":
    main()
