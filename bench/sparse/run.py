"""Block-sparse all-reduce (syncplan sparse) against the dense plan, gloo's dense all_reduce
and torch's sparse all_reduce (all-gather of indices and values), one run, by density, on
loopback or on the emulated testbed. Writes bench/results/sparse-WHERE.json and .png.

    python bench/sparse/run.py loopback [--nprocs 4] [--size 64MiB] [--repeat 3]
    python bench/sparse/run.py testbed one-slow [--size 64MiB] [--repeat 2]

Every call of every method is checked bit for bit (integer-valued float32 data). The dense
plan and gloo are timed in a baseline before and after the sparse cases (they do not depend
on the density); speed-ups divide the pooled baseline median by the sparse median.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.executor.sparse_bench import SparseCase, run_sparse_bench  # noqa: E402
from syncplan.planner.plan import make_plan  # noqa: E402
from syncplan.planner.sizes import parse_size  # noqa: E402
from syncplan.planner.topology import Topology  # noqa: E402

RESULTS = ROOT / "bench" / "results"
DENSITIES = (0.001, 0.01, 0.05, 0.2, 0.5, 1.0)
TARGET_SPEEDUP = 5.0  # vs gloo at 1 % on one-slow, 64 MiB
TARGET_DENSE_SLOWDOWN = 1.05  # at 100 %: sparse (auto picks dense) vs the dense plan


def loopback_topology(n: int) -> tuple[Topology, list[str]]:
    ranks = [f"lo/cpu{i}" for i in range(n)]
    topo = Topology.from_dict(
        {
            "nodes": [{"id": r, "kind": "cpu", "host": "lo"} for r in ranks]
            + [{"id": "lo/sw", "kind": "switch", "host": "lo"}],
            "links": [
                {"src": r, "dst": "lo/sw", "bandwidth_GBps": 10.0, "latency_us": 5.0} for r in ranks
            ],
        }
    )
    return topo, ranks


def build(
    topo: Topology,
    ranks: list[str],
    size: int,
    densities: list[float],
    repeat: int,
    warmup: int,
    torch_sparse_max: float,
) -> tuple[list[dict], list[SparseCase]]:
    """Plans (0: dense auto; one per density and overlap) and the cases that use them."""
    numel = size // 4
    plans = [make_plan(topo, ranks, size)]
    base = SparseCase(numel, 0.0, repeat=repeat, warmup=warmup, methods=("plan", "gloo"))
    cases = [base]
    for d in densities:
        for overlap in (False, True):
            plans.append(make_plan(topo, ranks, size, density=d, density_overlap=overlap))
            methods = ("sparse", "torch_sparse") if d <= torch_sparse_max else ("sparse",)
            cases.append(SparseCase(numel, d, overlap, repeat, warmup, len(plans) - 1, methods))
    cases.append(base)
    return plans, cases


def run_testbed(
    scenario_name: str, plans: list[dict], cases: list[SparseCase], timeout_s: float
) -> list[dict]:
    from syncplan.testbed.emulator import kill_recorded, spawn
    from syncplan.testbed.loop import running_testbed
    from syncplan.testbed.scenario import load_scenario

    scenario = load_scenario(scenario_name)
    state_dir = Path(os.environ.get("SYNCPLAN_TESTBED_STATE", "/run/syncplan-testbed"))
    with running_testbed(scenario, state_dir, print) as state:
        work = state_dir / f"{state.prefix}-sparse"
        work.mkdir(parents=True, exist_ok=True)
        spec = work / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "plans": plans,
                    "cases": [
                        {
                            k: getattr(c, k)
                            for k in ("numel", "density", "overlap", "repeat", "warmup", "plan")
                        }
                        | {"methods": list(c.methods)}
                        for c in cases
                    ],
                }
            )
        )
        out = work / "rank0.json"
        master = f"{state.hosts[0].addr}:{20000 + secrets.randbelow(30000)}"
        procs = []
        for h in state.hosts:
            argv = [
                sys.executable,
                "-u",
                str(ROOT / "bench" / "sparse" / "tb_worker.py"),
                "--rank",
                str(h.rank),
                "--world",
                str(len(state.hosts)),
                "--master",
                master,
                "--spec",
                str(spec),
                "--timeout",
                str(int(timeout_s)),
            ]
            if h.rank == 0:
                argv += ["--out", str(out)]
            procs.append(
                spawn(
                    state,
                    h.netns,
                    argv,
                    "worker",
                    work / f"rank{h.rank}.log",
                    env={
                        "GLOO_SOCKET_IFNAME": h.iface,
                        "OMP_NUM_THREADS": "1",
                        "TORCH_CPP_LOG_LEVEL": "ERROR",
                    },
                )
            )
        t0, seen = time.monotonic(), 0
        try:
            while any(p.poll() is None for p in procs):
                if any(p.poll() not in (None, 0) for p in procs):
                    break
                if time.monotonic() - t0 > timeout_s:
                    print(f"testbed run exceeded {timeout_s:.0f} s", flush=True)
                    break
                lines = (work / "rank0.log").read_text().splitlines()
                for line in lines[seen:]:
                    print(f"[{scenario.name}] {line}", flush=True)
                seen = len(lines)
                time.sleep(1)
        finally:
            kill_recorded(state, "worker")
        bad = [i for i, p in enumerate(procs) if p.returncode not in (0, None)]
        if bad:
            print((work / f"rank{bad[0]}.log").read_text()[-3000:], flush=True)
        return json.loads(out.read_text()) if out.exists() else []


def summarise(results: list[dict]) -> list[dict]:
    """One row per density and overlap: medians and speed-ups over the pooled baseline."""
    base = [r for r in results if "gloo" in r.get("methods", ())]
    pool = {m: [t for r in base for t in r["samples"][f"{m}_s"]] for m in ("plan", "gloo")}
    gloo = statistics.median(pool["gloo"]) if pool["gloo"] else float("nan")
    plan = statistics.median(pool["plan"]) if pool["plan"] else float("nan")
    rows = []
    for r in results:
        if "sparse" not in r.get("methods", ()):
            continue
        row = {
            "density": r["density"],
            "overlap": r["overlap"],
            "sparse_s": r["sparse_s"],
            "plan_s": plan,
            "gloo_s": gloo,
            "speedup_vs_gloo": gloo / r["sparse_s"],
            "speedup_vs_plan": plan / r["sparse_s"],
            "modes": r["sparse_modes"],
            "plan_mode": r.get("plan_mode"),
            "algorithm": r.get("plan_algorithm"),
            "measured_density": r["measured_density"],
            "traffic": r["traffic_fraction"],
            "correct": r["correct"],
        }
        if "torch_sparse_s" in r:
            row["torch_sparse_s"] = r["torch_sparse_s"]
            row["torch_sparse_speedup_vs_gloo"] = gloo / r["torch_sparse_s"]
        rows.append(row)
    return rows


def plot(rows: list[dict], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for overlap, style in ((False, "-"), (True, "--")):
        sel = [r for r in rows if r["overlap"] == overlap]
        tag = "overlapping" if overlap else "independent"
        xs = [r["density"] * 100 for r in sel]
        ax.plot(
            xs,
            [r["speedup_vs_gloo"] for r in sel],
            "o" + style,
            color="C0",
            label=f"syncplan sparse vs gloo ({tag})",
        )
        ax.plot(
            xs,
            [r["speedup_vs_plan"] for r in sel],
            "s" + style,
            color="C1",
            label=f"syncplan sparse vs dense plan ({tag})",
        )
        ts = [r for r in sel if "torch_sparse_s" in r]
        if ts:
            ax.plot(
                [r["density"] * 100 for r in ts],
                [r["torch_sparse_speedup_vs_gloo"] for r in ts],
                "^" + style,
                color="C2",
                label=f"torch sparse all_reduce vs gloo ({tag})",
            )
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("non-zero blocks (%)")
    ax.set_ylabel("speed-up (baseline time / time)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("where", choices=("loopback", "testbed"))
    ap.add_argument("scenario", nargs="?", default="one-slow", help="testbed scenario")
    ap.add_argument("--nprocs", type=int, default=4, help="loopback processes")
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--densities", default=",".join(map(str, DENSITIES)))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument(
        "--torch-sparse-max",
        type=float,
        default=None,
        help="time torch's sparse all_reduce only up to this density (default: "
        "0.2 on loopback, where it takes 27 s per call at 100%% at 4 MiB, "
        "0.05 on the testbed, where its all-gather grows with the ranks)",
    )
    ap.add_argument("--timeout", type=float, default=1500)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    size = parse_size(args.size)
    densities = [float(x) for x in args.densities.split(",")]
    if args.where == "loopback":
        from syncplan.executor.localrun import free_port  # noqa: F401  (fail early without torch)

        topo, ranks = loopback_topology(args.nprocs)
        tmax = 0.2 if args.torch_sparse_max is None else args.torch_sparse_max
    else:
        from syncplan.testbed.scenario import load_scenario

        sc = load_scenario(args.scenario)
        topo = Topology.from_dict(sc.ground_truth_topology())
        ranks = [f"{h.name}/cpu0" for h in sc.hosts]
        tmax = 0.05 if args.torch_sparse_max is None else args.torch_sparse_max
    t0 = time.time()
    plans, cases = build(topo, ranks, size, densities, args.repeat, args.warmup, tmax)
    print(f"planned {len(plans)} plans in {time.time() - t0:.1f} s", flush=True)
    load = list(os.getloadavg())
    if args.where == "loopback":
        results = run_sparse_bench(plans, args.nprocs, cases, timeout_s=args.timeout)
        name = f"loopback, {args.nprocs} gloo processes"
    else:
        results = run_testbed(args.scenario, plans, cases, args.timeout)
        name = f"testbed {args.scenario}, {len(ranks)} hosts"
    rows = summarise(results)
    tag = "loopback" if args.where == "loopback" else f"testbed-{args.scenario}"
    out = args.out or RESULTS / f"sparse-{tag}.json"
    doc = {
        "where": name,
        "size_bytes": size,
        "created": datetime.now(UTC).isoformat(),
        "load_before": load,
        "load_after": list(os.getloadavg()),
        "targets": {
            "speedup_vs_gloo_at_1pct": TARGET_SPEEDUP,
            "max_slowdown_vs_plan_at_100pct": TARGET_DENSE_SLOWDOWN,
        },
        "summary": rows,
        "results": results,
        "plans": [
            {
                "algorithm": p["algorithm"],
                "sparse": p.get("sparse"),
                "predicted_time_s": p["predicted_time_s"],
            }
            for p in plans
        ],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1))
    for r in rows:
        print(
            f"d={r['density']:<6} overlap={r['overlap']!s:<5} sparse {r['sparse_s']:.4f} s "
            f"x{r['speedup_vs_gloo']:.2f} vs gloo ({r['gloo_s']:.4f}) "
            f"x{r['speedup_vs_plan']:.2f} vs plan ({r['plan_s']:.4f}) "
            f"torch_sparse {r.get('torch_sparse_s', float('nan')):.4f} "
            f"modes {r['modes']} correct {r['correct']}",
            flush=True,
        )
    if rows:
        plot(rows, f"block-sparse all-reduce, {size >> 20} MiB, {name}", out.with_suffix(".png"))
    print(f"wrote {out}", flush=True)
    return 0 if rows and all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
