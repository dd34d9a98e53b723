"""Per-call time of the executor running a plain ring plan versus torch's own all-reduce,
N gloo processes on loopback, 64 KiB to 64 MiB. Writes bench/results/executor.json and
bench/results/executor.png.

    python bench/executor/run.py [--nprocs 4] [--max-size 64MiB] [--repeat 60]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.core.atomic import AtomicFile, atomic_write_json  # noqa: E402
from syncplan.executor.bench import BenchCase, run_bench  # noqa: E402
from syncplan.executor.engine import ExecutorConfig  # noqa: E402
from syncplan.planner.plan import make_plan  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import Topology  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TARGET = 1.2  # plan within 20% of native at >= 1 MiB


def ring_plan(nprocs: int) -> dict[str, Any]:
    """The planner's ring on one host whose CPU endpoints share a switch (loopback)."""
    ranks = [f"lo/cpu{i}" for i in range(nprocs)]
    topo = Topology.from_dict(
        {
            "nodes": [{"id": r, "kind": "cpu", "host": "lo"} for r in ranks]
            + [{"id": "lo/sw", "kind": "switch", "host": "lo"}],
            "links": [
                {"src": r, "dst": "lo/sw", "bandwidth_GBps": 10.0, "latency_us": 5.0} for r in ranks
            ],
        }
    )
    return make_plan(topo, ranks, 64 << 20, algorithm="ring")


def pool(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's results over all rounds: medians of the pooled samples."""
    out = {k: v for k, v in parts[0].items() if k != "samples"}
    samples = {k: [x for p in parts for x in p["samples"][k]] for k in parts[0]["samples"]}
    med = {k: statistics.median(v) for k, v in samples.items()}
    out.update(med)
    out["ratio"] = med["plan_s"] / med["native_s"]
    out["paired_ratio"] = statistics.median(
        p / q for p, q in zip(samples["plan_s"], samples["native_s"], strict=True)
    )
    out["repeat"] = len(samples["plan_s"])
    out["correct"] = all(p["correct"] for p in parts)
    out["identical_on_all_ranks"] = all(p["identical_on_all_ranks"] for p in parts)
    out["max_abs_err"] = max(p["max_abs_err"] for p in parts)
    out["round_ratios"] = [p["ratio"] for p in parts]
    return out


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["results"]
    sizes = [r["bytes"] / 1024 for r in rows]
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(7, 7), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    ax.loglog(sizes, [r["plan_s"] * 1e3 for r in rows], "o-", label="executor (ring plan)")
    ax.loglog(sizes, [r["native_s"] * 1e3 for r in rows], "s--", label="torch all_reduce")
    ax.set_ylabel("median time per call (ms)")
    ax.set_title(f"all-reduce, {doc['nprocs']} gloo processes on loopback ({doc['dtype']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    ax2.semilogx(sizes, [r["ratio"] for r in rows], "o-")
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.axhline(TARGET, color="red", ls=":", label=f"target {TARGET} (>= 1 MiB)")
    ax2.set_xlabel("buffer size (KiB)")
    ax2.set_ylabel("executor / native")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend()
    fig.tight_layout()
    with AtomicFile(path) as f:
        fig.savefig(f.tmp, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--min-size", default="64KiB")
    ap.add_argument("--max-size", default="64MiB")
    ap.add_argument(
        "--repeat",
        type=int,
        default=60,
        help="timed calls per size up to 4 MiB over all rounds, fewer above (default 60)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="sweeps over all sizes (default 3)")
    ap.add_argument(
        "--segment-bytes",
        type=int,
        default=None,
        help="executor message segment size (default: ExecutorConfig's)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "executor.json")
    args = ap.parse_args()
    lo, hi = parse_size(args.min_size), parse_size(args.max_size)
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= 4
    # Several rounds over all sizes, so a burst of load on this shared machine does not
    # land on one size only; samples of all rounds are pooled per size.
    rounds = args.rounds
    cases = [
        BenchCase(
            numel=b // 4, warmup=1, repeat=max(4, args.repeat // rounds // max(1, b // (4 << 20)))
        )
        for _ in range(rounds)
        for b in sizes
    ]
    plan = ring_plan(args.nprocs)
    print(
        f"executor bench: ring plan {plan['plan_id']}, {args.nprocs} processes, "
        f"{len(sizes)} sizes x {rounds} rounds",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    raw = run_bench(
        plan, args.nprocs, cases, dtype="float32", timeout_s=1200, segment_bytes=args.segment_bytes
    )
    rows = [pool([r for r in raw if r["bytes"] == b]) for b in sizes]
    big = [r for r in rows if r["bytes"] >= 1 << 20]
    doc = {
        "bench": "executor",
        "what": "median per-call time, executor running a plain ring "
        "plan vs torch.distributed.all_reduce, same inputs, gloo over loopback",
        "nprocs": args.nprocs,
        "dtype": "float32",
        "plan_id": plan["plan_id"],
        "segment_bytes": args.segment_bytes or ExecutorConfig().segment_bytes,
        "plan_units": plan["program"]["units"],
        "plan_steps": len(plan["program"]["steps"]),
        "target_ratio_at_1MiB_and_above": TARGET,
        "max_ratio_at_1MiB_and_above": max((r["ratio"] for r in big), default=None),
        "meets_target": all(r["ratio"] <= TARGET for r in big),
        "all_correct": all(r["correct"] for r in rows),
        "host": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_avg_1m": os.getloadavg()[0],
        },
        "wall_s": time.perf_counter() - t0,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, doc)
    plot(doc, args.out.with_suffix(".png"))
    print(
        f"wrote {args.out} and {args.out.with_suffix('.png')}; max ratio at >= 1 MiB: "
        f"{doc['max_ratio_at_1MiB_and_above']:.3f} (target {TARGET})",
        file=sys.stderr,
    )
    return 0 if doc["all_correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
