"""How close can a lockstep forest get to the bound on one lane of the scale cluster?

One rail of the planner_scale cluster: ``hosts`` hosts whose NICs move 25 GB/s each way,
every 16th at 12.5 GB/s (``--homogeneous``: none), 1/8 of 256 MiB per host, 4 us per step.
A pool of height-2 host trees (forest's degree-target trees over shuffled hosts, random
two-level trees, hub trees rooted at every slow host, stars) is scheduled as forest
schedules them (a port at depth k sends at offset H + 1 - k and hears at H + k). A linear
program picks the tree shares that minimise the lockstep time for P equal pieces exactly:
the sum over steps of the busiest NIC direction, plus the steps' latency. The result is a
lower estimate of what forest can reach on such a lane (any share mix of the pool), and
shows where the gap to the bound comes from.

    python3 bench/planner_scale/lane_study.py [--hosts 128] [--pieces 12,16,24] [--homogeneous]

Writes bench/results/lane_study[-homogeneous].json and prints a table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

forest = importlib.import_module("syncplan.planner.algorithms.forest.host")
forest_trees = importlib.import_module("syncplan.planner.algorithms.forest.trees")

HEIGHT = 2
OFFSETS = 2 * HEIGHT  # network offsets 1 .. 2 H, stored from 0
STEP_LATENCY_S = 4e-6  # GPU -> PCIe -> NIC -> rail -> NIC -> PCIe -> GPU in planner.builders
LANE_BYTES = 256 * 2**20 / 8


def tree_profile(root: int, parent: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per host and offset, the shares it sends and receives (None if taller than HEIGHT)."""
    _, depth = forest_trees.tree_heights(root, parent)
    if max(depth) > HEIGHT:
        return None
    m = len(parent)
    send = [HEIGHT + 1 - d for d in depth]
    out, into = np.zeros((m, OFFSETS)), np.zeros((m, OFFSETS))
    for c, q in enumerate(parent):
        if q < 0:
            continue
        up, down = send[c] - 1, 2 * HEIGHT - send[c]
        out[c, up] += 1
        into[q, up] += 1
        out[q, down] += 1
        into[c, down] += 1
    return out, into


def tree_pool(cap: np.ndarray, seed: int, random_trees: int) -> list[tuple[int, list[int]]]:
    """Degree-target tree sets over shuffled hosts, random two-level trees, hub trees."""
    rng = np.random.default_rng(seed)
    m = len(cap)
    slow = np.nonzero(cap < cap.max())[0]
    fast = np.nonzero(cap == cap.max())[0]
    pool: list[tuple[int, list[int]]] = []
    for t in sorted({min(t, m) for t in (9, 11, 13, 16, 20)}):
        for rep in range(3):
            perm = rng.permutation(m) if rep else np.arange(m)
            for root, parent in forest_trees.host_trees(cap[perm], [0] * m, t):
                mapped = [-1] * m
                for i, q in enumerate(parent):
                    mapped[perm[i]] = int(perm[q]) if q >= 0 else -1
                pool.append((int(perm[root]), mapped))
    for k in range(random_trees):
        order = rng.permutation(fast)
        count = min(len(order) - 1, int(rng.choice([6, 8, 10, 12, 16, 24])))
        mids = [int(h) for h in order[1 : 1 + count]]
        root = int(order[0])
        parent = [-1] * m
        for h in mids:
            parent[h] = root
        for i, h in enumerate(order[1 + len(mids) :]):
            parent[int(h)] = mids[i % len(mids)]
        for i, h in enumerate(slow):  # slow hosts under the root, under a hub, or mixed
            parent[int(h)] = root if (k % 3 == 0 or (k % 3 == 2 and i % 2)) else mids[i % len(mids)]
        pool.append((root, parent))
    for r in slow:  # hub trees: the slow root hears before it sends
        for c in rng.choice(fast, min(6, len(fast)), replace=False):
            parent = [int(c)] * m
            parent[r], parent[c] = -1, int(r)
            pool.append((int(r), parent))
    for r in rng.choice(fast, min(16, len(fast)), replace=False):
        parent = [int(r)] * m
        parent[r] = -1
        pool.append((int(r), parent))
    return pool


def best_time(
    cap: np.ndarray, profiles: list[tuple[np.ndarray, np.ndarray]], pieces: int
) -> tuple[float, int]:
    """(lockstep seconds, trees used) of the best share mix for ``pieces`` equal pieces."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix, csr_matrix, hstack

    nt, m = len(profiles), len(cap)
    steps = pieces + OFFSETS - 1
    blocks = []
    for k in (0, 1):  # sends, then receives
        coef = np.zeros((nt, m, steps))
        for o in range(OFFSETS):
            col = np.stack([p[k][:, o] for p in profiles])
            coef[:, :, o : o + pieces] += col[:, :, None] / pieces
        coef *= LANE_BYTES / (cap[None, :, None] * 1e9)
        blocks.append(coef.reshape(nt, m * steps).T)
    a = np.vstack(blocks)
    step_of = np.tile(np.tile(np.arange(steps), m), 2)
    keep = np.abs(a).sum(axis=1) > 0
    a, step_of = a[keep], step_of[keep]
    rows = len(step_of)
    z = coo_matrix((-np.ones(rows), (np.arange(rows), step_of)), shape=(rows, steps))
    scale = 1e3  # HiGHS wants entries near 1
    res = linprog(
        np.concatenate([np.zeros(nt), np.ones(steps)]),
        A_ub=hstack([csr_matrix(a * scale), z * scale]).tocsr(),
        b_ub=np.zeros(rows),
        A_eq=np.concatenate([np.ones(nt), np.zeros(steps)])[None],
        b_eq=[1.0],
        bounds=[(0, None)] * (nt + steps),
        method="highs",
    )
    if res.status != 0:
        raise SystemExit(f"LP failed: {res.message}")
    return float(res.fun) + steps * STEP_LATENCY_S, int((res.x[:nt] > 1e-6).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=128)
    ap.add_argument("--pieces", default="12,16,24")
    ap.add_argument("--random-trees", type=int, default=600)
    ap.add_argument("--homogeneous", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cap = np.full(args.hosts, 25.0)
    if not args.homogeneous:
        cap[3::16] = 12.5
    profiles = [
        p
        for p in (tree_profile(r, par) for r, par in tree_pool(cap, args.seed, args.random_trees))
        if p
    ]
    bound = 2 * (args.hosts - 1) * LANE_BYTES / (cap.sum() * 1e9) + 2 * STEP_LATENCY_S
    rows = []
    print(
        f"{args.hosts} hosts, {int((cap < 25).sum())} at half rate, {len(profiles)} trees; "
        f"bound {bound * 1e3:.4f} ms (aggregate NIC bytes + 2 steps' latency)"
    )
    print("pieces  steps  time ms  x bound  latency share  trees used  LP s")
    for pieces in (int(p) for p in args.pieces.split(",")):
        t0 = time.perf_counter()
        seconds, used = best_time(cap, profiles, pieces)
        steps = pieces + OFFSETS - 1
        rows.append(
            {
                "pieces": pieces,
                "steps": steps,
                "time_s": seconds,
                "ratio": seconds / bound,
                "trees_used": used,
                "lp_s": time.perf_counter() - t0,
            }
        )
        print(
            f"{pieces:6d}  {steps:5d}  {seconds * 1e3:7.4f}  {seconds / bound:7.4f}  "
            f"{steps * STEP_LATENCY_S / bound:13.3f}  {used:10d}  {rows[-1]['lp_s']:4.1f}"
        )
    name = "lane_study-homogeneous.json" if args.homogeneous else "lane_study.json"
    out = ROOT / "bench" / "results" / name
    out.write_text(
        json.dumps(
            {
                "hosts": args.hosts,
                "half_rate_hosts": int((cap < 25).sum()),
                "trees": len(profiles),
                "bound_s": bound,
                "rows": rows,
            },
            indent=1,
        )
    )
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
