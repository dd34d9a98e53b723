"""Training iterations on N gloo processes over loopback: torch DDP (25 MB buckets), DDP with
syncplan's hook (synchronous, and on the communication thread), syncplan's schedule with
all-reduce, and syncplan's DeAR schedule, interleaved in the same run. Writes
bench/results/training-loopback.json and .png.

    flock /tmp/syncplan-bench.lock python bench/training/run.py [--nprocs 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from syncplan.core.options import PlanOptions  # noqa: E402
from syncplan.executor.localrun import LocalRunConfig, run_local  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def rank_main(
    model_name: str,
    rounds: int,
    iters: int,
    warmup: int,
    rates_GBps: list[float] | None = None,
    algorithms: list[str] | None = None,
    message_overhead: float | None = None,
) -> dict[str, Any]:
    """One rank: calibrate, plan the schedule on rank 0 (a star of the measured loopback
    rate, or of ``rates_GBps``), then time every method. ``message_overhead``: the
    schedule's cost per message on top of the cost model (None: measured together with a
    rate efficiency from ring all-reduce plans at 1 and 4 MiB run by the executor)."""
    import torch.distributed as dist
    from syncplan.planner.builders import star
    from syncplan.planner.plan import make_plan
    from syncplan.planner.schedule import TensorSpec, make_schedule
    from syncplan.planner.topology import Topology

    from bench.training import worker
    from bench.training.models import declared_times

    n = dist.get_world_size()
    cal = worker.calibrate()
    times = declared_times(model_name)
    prof = worker.measure_profile(model_name) if times is None else None
    rates = rates_GBps or [cal["link_GBps"]] * n
    topo = Topology.from_dict(star(rates, latency_us=1.0))
    ranks = topo.endpoints()
    box: list[Any] = [None]
    if message_overhead is None:
        # ring all-reduces at 1 and 4 MiB run by the executor: time = messages x overhead +
        # (cost-model time) / efficiency; the schedule is planned on the rates x efficiency
        if dist.get_rank() == 0:
            box[0] = {
                f"ring-{mib}MiB": make_plan(
                    topo,
                    ranks,
                    mib << 20,
                    "ring",
                    options=PlanOptions(min_step_s=cal["min_step_s"]),
                )
                for mib in (1, 4)
            }
        dist.broadcast_object_list(box, src=0)
        cal["plans"] = fit = worker.plan_times(box[0])
        small, large = fit["ring-1MiB"], fit["ring-4MiB"]
        eff = (large["predicted_s"] - small["predicted_s"]) / max(
            large["measured_s"] - small["measured_s"], 1e-9
        )
        eff = min(max(eff, 0.3), 1.0)
        message_overhead = max(
            0.0, (small["measured_s"] - small["predicted_s"] / eff) / small["message_ends"]
        )
        cal["rate_efficiency"] = eff
        topo = Topology.from_dict(star([r * eff for r in rates], latency_us=1.0))
    cal["message_overhead_s"] = message_overhead
    if dist.get_rank() == 0:
        grads = worker.describe(model_name)
        if times is not None:
            tensors = [
                TensorSpec(g["numel"], g["dtype"], f, b)
                for g, (f, b) in zip(grads, times, strict=True)
            ]
        else:
            tensors = [
                TensorSpec(g["numel"], g["dtype"], f, b)
                for g, f, b in zip(grads, prof["forward_s"], prof["backward_s"], strict=True)
            ]
        t0 = time.perf_counter()
        sched = make_schedule(
            topo,
            ranks,
            tensors,
            anchors=3,
            algorithms=algorithms,
            options=PlanOptions(min_step_s=cal["min_step_s"], message_overhead_s=message_overhead),
        )
        solve_s = time.perf_counter() - t0
        # the hooks run the plan a job would fetch: the service's `auto` for one 25 MB bucket
        plan = make_plan(
            topo,
            ranks,
            25 << 20,
            "auto",
            options=PlanOptions(min_step_s=cal["min_step_s"], message_overhead_s=message_overhead),
        )
        box[0] = (sched, plan, solve_s)
    dist.broadcast_object_list(box, src=0)
    sched, plan, solve_s = box[0]
    res = worker.run(model_name, sched, plan, rounds, iters, warmup)
    res.update(
        hook_plan=plan["algorithm"],
        calibration=cal,
        profile=prof,
        solve_s=solve_s,
        predicted={
            m: {
                "overlap_s": d["predicted_iteration_s"],
                "no_overlap_s": d["predicted_iteration_no_overlap_s"],
                "buckets": len(d["buckets"]),
                "algorithms": sorted(
                    {p["algorithm"] for b in d["buckets"] for p in b["plans"].values()}
                ),
                "bucket_plans": [
                    {
                        "size_bytes": b["size_bytes"],
                        **{k: p["algorithm"] for k, p in b["plans"].items()},
                    }
                    for b in d["buckets"]
                ],
                "partition": d["partition"],
                "timeline": d["timeline"],
                "forward_s": d["forward_s"],
                "backward_s": d["backward_s"],
            }
            for m, d in sched["modes"].items()
        },
    )
    return res


PREDICTED = {"schedule-allreduce": "allreduce", "schedule-dear": "dear"}


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    med = {m: statistics.median(v) for m, v in res["times"].items()}
    pred = {
        m: res["predicted"][k]["overlap_s"] for m, k in PREDICTED.items() if k in res["predicted"]
    }
    return {
        "median_iteration_s": med,
        "speedup_vs_ddp": {m: med["ddp"] / t for m, t in med.items()},
        "predicted_iteration_s": pred,
        "predicted_vs_measured": {m: p / med[m] for m, p in pred.items()},
    }


def table(results: dict[str, Any]) -> str:
    """Method x scenario (or model): measured iteration time, speed-up vs DDP, the
    schedule's prediction and prediction / measurement."""
    lines = [
        f"{'scenario':<14} {'method':<20} {'iter ms':>9} {'vs DDP':>7} "
        f"{'pred ms':>9} {'pred/meas':>9}"
    ]
    for name, r in results.items():
        s = r["summary"]
        for m, t in s["median_iteration_s"].items():
            p = s["predicted_iteration_s"].get(m)
            lines.append(
                f"{name:<14} {m:<20} {t * 1e3:>9.1f} {s['speedup_vs_ddp'][m]:>6.2f}x "
                + (f"{p * 1e3:>9.1f} {p / t:>9.2f}" if p is not None else f"{'-':>9} {'-':>9}")
            )
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path, network: str = "loopback") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(results)
    fig, axes = plt.subplots(1, len(models) + 1, figsize=(6 * (len(models) + 1), 4.5))
    for ax, name in zip(axes, models, strict=False):
        r = results[name]
        med = r["summary"]["median_iteration_s"]
        methods = list(med)
        ax.bar(methods, [med[m] * 1e3 for m in methods], color="tab:blue", label="measured")
        for i, m in enumerate(methods):
            ax.text(
                i,
                med[m] * 1e3,
                f"{r['summary']['speedup_vs_ddp'][m]:.2f}x",
                ha="center",
                va="bottom",
                fontsize=8,
            )
        for m, key in (("schedule-allreduce", "allreduce"), ("schedule-dear", "dear")):
            ax.plot(
                [methods.index(m)],
                [r["predicted"][key]["overlap_s"] * 1e3],
                "r_",
                markersize=30,
                mew=3,
                label="predicted" if key == "allreduce" else None,
            )
        ax.set_ylabel("iteration time (ms)")
        ax.set_title(f"{name}: {r['nprocs']} gloo ranks, {network}")
        ax.tick_params(axis="x", rotation=30)
        ax.legend()
    ax = axes[-1]
    r = results[models[0]]
    colors = {
        "allreduce": "tab:blue",
        "reducescatter": "tab:orange",
        "allgather": "tab:purple",
        "forward": "tab:green",
        "backward": "tab:olive",
    }
    rows = []
    for method, key in PREDICTED.items():
        pred = r["predicted"][key]
        fwd, bwd = pred["forward_s"], pred["backward_s"]
        compute = [
            {"op": "forward", "start_s": 0.0, "end_s": fwd},
            {"op": "backward", "start_s": fwd, "end_s": fwd + bwd},
        ]
        rows.append((f"{method}\npredicted", compute + pred["timeline"]))
        measured = r["info"].get(method, {}).get("timeline") or []
        rows.append((f"{method}\nmeasured", measured))
    for y, (_, events) in enumerate(rows):
        for ev in events:
            comm = ev["op"] not in ("forward", "backward")
            ax.barh(
                [y + (0.2 if comm else -0.2)],
                [(ev["end_s"] - ev["start_s"]) * 1e3],
                left=[ev["start_s"] * 1e3],
                height=0.38,
                color=colors[ev["op"]],
                edgecolor="k",
                linewidth=0.3,
            )
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    ax.invert_yaxis()
    for op, c in colors.items():
        ax.barh([0], [0], color=c, label=op)
    ax.set_xlabel("ms from the forward start (compute below, communication above)")
    ax.set_title(f"{models[0]}: one iteration, predicted and measured")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--models", default="emulated,transformer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default="training-loopback")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name in args.models.split(","):
        t0 = time.perf_counter()
        per_rank = run_local(
            rank_main,
            (name, args.rounds, args.iters, args.warmup),
            LocalRunConfig(args.nprocs, timeout_s=1500, pg_timeout_s=600),
        )
        res = per_rank[0]
        res["nprocs"] = args.nprocs
        res["wall_s"] = time.perf_counter() - t0
        res["summary"] = summarize(res)
        results[name] = res
        print(name, json.dumps(res["summary"], indent=1), flush=True)
    doc = {
        "benchmark": "training",
        "network": "loopback",
        "host": platform.node(),
        "command": " ".join(sys.argv),
        "settings": vars(args),
        "models": results,
        "note": "emulated: per-layer compute is a timed wait (bench/training/models.py "
        "states the derivation); transformer: real CPU compute on a shared "
        "2-core machine",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(doc, indent=1))
    plot(results, RESULTS / f"{args.out}.png")
    print(table(results))
    print(f"wrote {RESULTS / (args.out + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
