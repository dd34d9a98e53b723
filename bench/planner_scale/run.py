"""Planner scale: solve time, peak memory, plan size and quality from 8 to 4,096 ranks.

Each size runs in its own subprocess (peak RSS from getrusage is per process) on a
rail-optimised cluster of 8-GPU hosts with 8 x 25 GB/s NICs, every 16th host at 12.5 GB/s:
``auto`` (all algorithms priced, the fastest built), the verifier on the chosen plan (up to
--verify-max-ranks), the plan document's JSON size and the gap to the lower bound.
Writes bench/results/planner_scale.json and .png and prints a table.

    python3 bench/planner_scale/run.py [--sizes 8,64,256,1024,4096] [--size-bytes 268435456]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from syncplan.core.atomic import AtomicFile, atomic_write_json

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results"
RANK_COUNTS = [8, 64, 256, 1024, 4096]


def topology(ranks: int) -> dict:
    from syncplan.planner.builders import dgx_cluster

    hosts = max(1, ranks // 8)
    slow = {h: 12.5 for h in range(3, hosts, 16)}
    return dgx_cluster(hosts, nics_per_host=8, nic_GBps=25.0, slow=slow)


def one(ranks: int, size: int, verify_max: int, algorithm: str) -> dict:
    """Runs in the child process."""
    sys.path.insert(0, str(ROOT))
    from syncplan.planner.plan import make_plan
    from syncplan.planner.topology import Topology
    from syncplan.planner.verify import verify_plan

    topo = Topology.from_dict(topology(ranks))
    t0 = time.perf_counter()
    doc = make_plan(topo, topo.endpoints(), size, algorithm)
    solve = time.perf_counter() - t0
    text = json.dumps(doc, separators=(",", ":"))  # as the service and CLI write it
    out = {
        "ranks": ranks,
        "hosts": len(topo.hosts()),
        "algorithm": algorithm,
        "chosen": doc["algorithm"],
        "solve_s": solve,
        "predicted_s": doc["predicted_time_s"],
        "bound_s": doc["lower_bound_time_s"],
        "bound_method": doc["lower_bound_method"],
        "candidates": doc["candidates"],
        "details": doc["details"],
        "doc_bytes": len(text),
        "steps": len(doc["program"]["steps"]),
        "transfers": sum(len(s) for s in doc["program"]["steps"]),
        "simulated_s": None,
        "verify_s": None,
    }
    if ranks <= verify_max:
        t0 = time.perf_counter()
        rep = verify_plan(json.loads(text), topo)
        out["verify_s"] = time.perf_counter() - t0
        if not rep.ok:
            raise SystemExit(f"{ranks} ranks: verifier: {rep.error}")
        out["simulated_s"] = rep.simulated_time_s
    out["peak_rss_MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4))
    xs = [r["ranks"] for r in rows]
    a.plot(xs, [r["solve_s"] for r in rows], "o-", label="auto: plan (s)")
    a.plot(xs, [r["verify_s"] or float("nan") for r in rows], "s--", label="verify (s)")
    a.axhline(10, color="gray", ls=":", lw=1)
    a.axhline(60, color="gray", ls=":", lw=1)
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("ranks")
    a.set_ylabel("seconds (2-core machine)")
    a.legend()
    b.plot(xs, [r["peak_rss_MiB"] for r in rows], "o-", label="peak RSS (MiB)")
    b.plot(xs, [r["doc_bytes"] / 2**20 for r in rows], "s--", label="plan document (MiB)")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("ranks")
    b.legend()
    c.plot(xs, [r["predicted_s"] / r["bound_s"] for r in rows], "o-", label="predicted/bound")
    c.plot(
        xs,
        [(r["simulated_s"] or float("nan")) / r["bound_s"] for r in rows],
        "x",
        ms=10,
        label="verifier-simulated/bound",
    )
    c.axhline(1.05, color="gray", ls=":", lw=1)
    c.set_xscale("log", base=2)
    c.set_xlabel("ranks")
    c.set_ylabel("time / lower bound (256 MiB)")
    c.legend()
    fig.tight_layout()
    with AtomicFile(path) as f:
        fig.savefig(f.tmp, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, RANK_COUNTS)))
    ap.add_argument("--size-bytes", type=int, default=256 << 20)
    ap.add_argument("--algorithm", default="auto")
    ap.add_argument("--verify-max-ranks", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=900.0, help="per size, seconds")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one(args.child, args.size_bytes, args.verify_max_ranks, args.algorithm)))
        return
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        print(f"{n} ranks ...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(n),
                "--size-bytes",
                str(args.size_bytes),
                "--algorithm",
                args.algorithm,
                "--verify-max-ranks",
                str(args.verify_max_ranks),
            ],
            capture_output=True,
            text=True,
            timeout=args.timeout,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if proc.returncode != 0:
            raise SystemExit(f"{n} ranks failed:\n{proc.stderr[-2000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    OUT.mkdir(parents=True, exist_ok=True)
    dst = OUT / "planner_scale.json"
    atomic_write_json(dst, {"size_bytes": args.size_bytes, "rows": rows}, indent=1)
    plot(rows, OUT / "planner_scale.png")
    print(
        f"{'ranks':>6s} {'chosen':>12s} {'plan s':>8s} {'verify s':>9s} {'RSS MiB':>8s} "
        f"{'doc MiB':>8s} {'pred/bound':>10s} {'sim/bound':>9s}"
    )
    for r in rows:
        sim = f"{r['simulated_s'] / r['bound_s']:.3f}" if r["simulated_s"] else "-"
        ver = f"{r['verify_s']:.1f}" if r["verify_s"] is not None else "-"
        print(
            f"{r['ranks']:>6d} {r['chosen']:>12s} {r['solve_s']:>8.2f} {ver:>9s} "
            f"{r['peak_rss_MiB']:>8.0f} {r['doc_bytes'] / 2**20:>8.1f} "
            f"{r['predicted_s'] / r['bound_s']:>10.3f} {sim:>9s}"
        )
    print(f"wrote {dst} and {OUT / 'planner_scale.png'}")


if __name__ == "__main__":
    main()
