"""One rank of the training benchmark (run by bench/training/run.py through run_local)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.comm import PlanComm
from syncplan.executor.ddp import plan_allreduce_hook
from syncplan.executor.engine import PlanExecutor
from syncplan.executor.overlap import AsyncPlanComm, async_plan_allreduce_hook
from syncplan.executor.training import ScheduledOptimizer, gradients_of
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.training.models import MODELS

METHODS = ("ddp", "ddp+hook", "ddp+async-hook", "schedule-allreduce", "schedule-dear")


def _sgd(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9)


def calibrate(reps: int = 3) -> dict[str, float]:
    """gloo all-reduce of 4 KiB and 16 MiB: the per-step cost and the loopback rate."""
    n = dist.get_world_size()
    out = {}
    for name, numel in (("small", 1024), ("large", 4 << 20)):
        out[name] = _median_time(dist.all_reduce, torch.ones(numel), reps)
    steps = 2 * (n - 1)
    step_s = out["small"] / steps
    moved = 2 * (n - 1) / n * (16 << 20)  # bytes each rank sends in a ring
    rate = moved / max(out["large"] - out["small"], 1e-6)
    return {
        "allreduce_4KiB_s": out["small"],
        "allreduce_16MiB_s": out["large"],
        "min_step_s": step_s,
        "link_GBps": rate / 1e9,
    }


def plan_times(plans: dict[str, dict[str, Any]], reps: int = 3) -> dict[str, Any]:
    """Each plan (all-reduce documents, the same on every rank) run by the executor: its
    median time, the cost model's, and the excess per message end the cost model charges
    (``message_ends``: a ring step is one send and one receive per rank)."""
    out: dict[str, Any] = {}
    for name, doc in plans.items():
        ex = PlanExecutor(doc)
        meas = _median_time(ex.all_reduce, torch.ones(doc["size_bytes"] // 4), reps)
        steps = sum(1 for s in doc["program"]["steps"] if s)
        ends = message_ends(doc)
        out[name] = {
            "measured_s": meas,
            "predicted_s": doc["predicted_time_s"],
            "steps": steps,
            "message_ends": ends,
            "excess_per_message_s": (meas - doc["predicted_time_s"]) / ends,
        }
    return out


def _median_time(op: Any, t: Any, reps: int) -> float:
    """Median seconds of ``op(t)`` over ``reps`` calls, each after a barrier; one untimed
    call first (it prepares plans and connections)."""
    import torch.distributed as dist

    op(t)
    samples = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        op(t)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def message_ends(doc: dict[str, Any]) -> float:
    """The message ends the cost model's per-message overhead is paid for over the plan's
    steps (planner.cost.CostModel.message_ends; one CPU per rank)."""
    from syncplan.core.program import program_from_doc
    from syncplan.planner.cost import message_ends as ends

    return sum(ends(step) for step in program_from_doc(doc["program"]).steps)


def _timed(
    model_name: str,
    method: str,
    schedule: dict[str, Any] | None,
    plan: dict[str, Any] | None,
    iters: int,
    warmup: int,
) -> dict[str, Any]:
    make, batch = MODELS[model_name]
    model = make()
    rank = dist.get_rank()
    loss_fn = torch.nn.functional.mse_loss
    sched_opt: ScheduledOptimizer | None = None
    closers: list[Any] = []
    if method.startswith("ddp"):
        ddp = DDP(model, bucket_cap_mb=25)
        if method == "ddp+hook":
            ddp.register_comm_hook(PlanComm(PlanExecutor(plan)), plan_allreduce_hook)
        elif method == "ddp+async-hook":
            state = AsyncPlanComm(PlanComm(PlanExecutor(plan)))
            ddp.register_comm_hook(state, async_plan_allreduce_hook)
            closers.append(state)
        opt = _sgd(list(model.parameters()))

        def step(i: int) -> None:
            opt.zero_grad()
            x, y = batch(i, rank)
            loss_fn(ddp(x), y).backward()
            opt.step()
    else:
        mode = "dear" if method.endswith("dear") else "allreduce"
        sched_opt = ScheduledOptimizer(model, _sgd, schedule, mode=mode)

        def step(i: int) -> None:
            x, y = batch(i, rank)
            loss_fn(model(x), y).backward()
            sched_opt.step()

    for i in range(warmup):
        step(i)
    if sched_opt is not None:
        sched_opt.finish()
        sched_opt.profile.reset()  # the first iterations set up groups and buffers
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(warmup, warmup + iters):
        step(i)
    if sched_opt is not None:
        sched_opt.finish()
    dist.barrier()
    elapsed = (time.perf_counter() - t0) / iters
    out: dict[str, Any] = {"iteration_s": elapsed}
    if sched_opt is not None:
        out["using_plans"] = sched_opt.using_plans
        out["buckets"] = len(sched_opt.buckets)
        out["profile"] = sched_opt.profile.report()
        out["timeline"] = sched_opt.profile.timeline()
        sched_opt.close()
    for c in closers:
        c.close()
    return out


def measure_profile(model_name: str, iters: int = 4) -> dict[str, Any]:
    """Compute times measured by the executor (schedule fallback: DDP-like all-reduce)."""
    return _timed(model_name, "schedule-allreduce", None, None, iters, 1)["profile"]


def run(
    model_name: str,
    schedule: dict[str, Any],
    plan: dict[str, Any],
    rounds: int,
    iters: int,
    warmup: int,
) -> dict[str, Any]:
    """Every method ``rounds`` times, interleaved; per method the per-round times."""
    times: dict[str, list[float]] = {m: [] for m in METHODS}
    info: dict[str, Any] = {}
    for _ in range(rounds):
        for m in METHODS:
            res = _timed(model_name, m, schedule, plan, iters, warmup)
            times[m].append(res["iteration_s"])
            info[m] = {k: v for k, v in res.items() if k != "iteration_s"}
    return {"times": times, "info": info}


def describe(model_name: str) -> list[dict[str, Any]]:
    make, _ = MODELS[model_name]
    return gradients_of(make())
