"""Functions the tests run inside spawned gloo processes (see executor.localrun)."""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.engine import PlanExecutor

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def digest(t: torch.Tensor) -> str:
    """Hash of the exact bits of ``t``."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return hashlib.sha256(t.contiguous().view(ints).numpy().tobytes()).hexdigest()


def inputs(numel: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1000 + dist.get_rank())
    return torch.randn(numel, generator=g).to(dtype)


def compare(y: torch.Tensor, x: torch.Tensor) -> dict[str, Any]:
    """Compare the plan's result ``y`` with torch's all-reduce of the inputs ``x``: within
    the summation-order bound n * eps * sum|x_i| per element, and bitwise equal on all ranks."""
    n = dist.get_world_size()
    ref = x.clone()
    dist.all_reduce(ref)
    absum = x.abs().double()
    dist.all_reduce(absum)
    err = (y.double() - ref.double()).abs()
    tol = n * torch.finfo(x.dtype).eps * absum + torch.finfo(x.dtype).tiny
    digests: list[Any] = [None] * n
    dist.all_gather_object(digests, digest(y))
    return {
        "within_tol": bool((err <= tol).all()),
        "max_abs_err": float(err.max()),
        "identical": len(set(digests)) == 1,
        "changed": not torch.equal(y, x),
    }


Case = tuple[dict[str, Any], int, str, list[int] | None, dict[str, Any] | None]


def check_cases(cases: list[Case]) -> list[dict[str, Any]]:
    """Run each (plan, numel, dtype, rank_map, ExecutorConfig keywords) twice (the second
    run reuses the prepared schedule) and compare with torch's all-reduce."""
    from syncplan.executor.engine import ExecutorConfig

    out = []
    for i, (plan, numel, dtype, rank_map, settings) in enumerate(cases):
        cfg = ExecutorConfig(**(settings or {}))
        ex = PlanExecutor(plan, rank_map=rank_map, config=cfg)
        x = inputs(numel, DTYPES[dtype], seed=i)
        y = ex.all_reduce(x.clone())
        again = ex.all_reduce(x.clone())
        res = compare(y, x)
        res["repeatable"] = torch.equal(y, again)
        res["case"] = (
            f"{plan.get('algorithm')}:{plan['plan_id']} n={numel} {dtype} "
            f"map={rank_map} config={settings}"
        )
        out.append(res)
    return out


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 64)
        self.b = torch.nn.Linear(64, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def train(comm: Any | None, steps: int = 4) -> list[torch.Tensor]:
    """A few SGD steps of a small DDP model (small buckets, so several per step); with
    ``comm`` the plan hook is registered. Returns the final parameters."""
    from syncplan.executor.ddp import plan_allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(_Net(), bucket_cap_mb=0.001)
    if comm is not None:
        model.register_comm_hook(comm, plan_allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    for _ in range(steps):
        x, target = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), target).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp_run(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per plan: train with the plan hook and with plain DDP from the same start, and check
    fused_allreduce on a mixed list of tensors; report agreement."""
    from syncplan.executor.comm import PlanComm
    from syncplan.executor.ddp import TensorFusion, fused_allreduce

    out = []
    for plan in plans:
        comm = PlanComm(PlanExecutor(plan))
        hooked = train(comm)
        plain = train(None)
        digests: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(digests, [digest(p) for p in hooked])
        # Tensor fusion: mixed dtypes, shapes, a non-contiguous view, small buckets.
        g = torch.Generator().manual_seed(dist.get_rank())
        tensors = [
            torch.randn(3, 5, generator=g),
            torch.randn(7, generator=g).half(),
            torch.randn(4, 6, generator=g).t(),
            torch.randn(1000, generator=g),
            torch.randn(2, 2, generator=g).bfloat16(),
            torch.randn(1, generator=g),
        ]
        refs = [t.clone() for t in tensors]
        for r in refs:
            dist.all_reduce(r)
            r.div_(dist.get_world_size())
        fusion = TensorFusion(bucket_bytes=2048)
        for _ in range(2):  # the second round reuses the fusion buffers
            work = [t.clone() for t in tensors]
            fused_allreduce(work, comm, average=True, fusion=fusion)
        fused_err = max(
            float((w.double() - r.double()).abs().max()) for w, r in zip(work, refs, strict=True)
        )
        out.append(
            {
                "identical": all(d == digests[0] for d in digests),
                "max_diff": max(
                    float((a - b).abs().max()) for a, b in zip(hooked, plain, strict=True)
                ),
                "using_plan": comm.using_plan,
                "fused_err": fused_err,
                "fused_shapes_kept": all(
                    w.shape == t.shape for w, t in zip(work, tensors, strict=True)
                ),
                "buckets": len(fusion.buckets(tensors)),
            }
        )
    # A tensor the plan cannot serve: one warning (rank 0), then the native all-reduce.
    handler = _Count()
    logging.getLogger("executor").addHandler(handler)
    ints = [comm.all_reduce(torch.ones(3, dtype=torch.int64)) for _ in range(2)]
    logging.getLogger("executor").removeHandler(handler)
    out.append(
        {
            "ints": [t.tolist() for t in ints],
            "using_plan": comm.using_plan,
            "warnings": [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING],
        }
    )
    return out


def launch_run(jobs: list[tuple[str, str]]) -> dict[str, Any]:
    """For each (server, job id): init_plan_comm and train a few DDP steps with it; report
    whether the plan was used, the training result and what the executor logged."""
    from syncplan.executor.launch import LaunchConfig, init_plan_comm

    out: dict[str, Any] = {}
    logger = logging.getLogger("executor")
    logger.setLevel(logging.INFO)
    for server, job in jobs:
        handler = _Count()
        logger.addHandler(handler)
        try:
            cfg = LaunchConfig.from_env(
                {"SYNCPLAN_JOB_ID": job, "SYNCPLAN_SERVER": server, "SYNCPLAN_JOB_TOKEN": "tok"},
                fetch_timeout_s=2.0,
                retries=1,
                backoff_s=0.05,
            )
            comm = init_plan_comm(cfg)
            params = train(comm)
            plain = train(None)
        finally:
            logger.removeHandler(handler)
        digests: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(digests, [digest(p) for p in params])
        out[job] = {
            "using_plan": comm.using_plan,
            "reason": comm.reason,
            "identical": all(d == digests[0] for d in digests),
            "max_diff": max(float((a - b).abs().max()) for a, b in zip(params, plain, strict=True)),
            "warnings": [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING],
            "infos": [r.getMessage() for r in handler.records if r.levelno == logging.INFO],
        }
    return out


def replan_run(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    """Per scenario (keys ``server``, ``job``, ``token``, ``ranks``, ``calls``, ``until``
    and optionally ``ready``): init_plan_comm following newer plans (checked at every
    all-reduce, polled every 20 ms), rank 0 writes the file ``ready`` once running, then
    all-reduce until the running plan is ``until`` (None: any other than the first) or
    ``calls`` calls. Reports the plan id of every call, whether every sum was right on
    every rank, and what the executor logged."""
    from syncplan.executor.launch import LaunchConfig, init_plan_comm

    out: dict[str, Any] = {}
    logger = logging.getLogger("executor")
    logger.setLevel(logging.INFO)
    rank = dist.get_rank()
    for sc in scenarios:
        handler = _Count()
        logger.addHandler(handler)
        ids: list[str | None] = []
        correct = True
        try:
            cfg = LaunchConfig.from_env(
                {
                    "SYNCPLAN_JOB_ID": sc["job"],
                    "SYNCPLAN_SERVER": sc["server"],
                    "SYNCPLAN_JOB_TOKEN": sc["token"],
                    "SYNCPLAN_ENDPOINT": sc["ranks"][rank],
                    "SYNCPLAN_REFRESH_EVERY": "1",
                    "SYNCPLAN_REFRESH_INTERVAL_S": "0.02",
                },
                fetch_timeout_s=10.0,
                retries=1,
                backoff_s=0.05,
            )
            with init_plan_comm(cfg) as comm:
                if sc.get("ready") and rank == 0:
                    Path(sc["ready"]).write_text("running")
                for i in range(sc["calls"]):
                    x = inputs(1001, torch.float32, seed=i)
                    res = compare(comm.all_reduce(x.clone()), x)
                    correct = correct and res["within_tol"] and res["identical"]
                    ids.append(comm.executor.program.plan_id if comm.executor else None)
                    if (ids[-1] != ids[0]) if sc["until"] is None else (ids[-1] == sc["until"]):
                        break  # every rank switches at the same call, so all stop here
                    time.sleep(0.02)
        finally:
            logger.removeHandler(handler)
        out[sc["job"]] = {
            "ids": ids,
            "correct": correct,
            "warnings": [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING],
            "infos": [r.getMessage() for r in handler.records if r.levelno == logging.INFO],
        }
    return out


def mixed_inputs(numel: int, seed: int) -> torch.Tensor:
    """float32 values of mixed magnitudes (1e8, 1, 1e-3 at random per element and rank), so
    that the order of a sum shows in its bits."""
    g = torch.Generator().manual_seed(seed * 1000 + dist.get_rank())
    scale = torch.tensor([1e8, 1.0, 1e-3])[torch.randint(0, 3, (numel,), generator=g)]
    return torch.randn(numel, generator=g) * scale


def bits_cases(
    cases: list[tuple[dict[str, Any], int, dict[str, Any] | None]],
) -> list[dict[str, Any]]:
    """Run each (plan, numel, ExecutorConfig keywords) on mixed-magnitude float32 inputs;
    report whether all ranks hold the same bits and whether they equal the left fold of the
    inputs in plan-rank order (x0 + x1 + x2 + ...)."""
    from syncplan.executor.engine import ExecutorConfig

    out = []
    n = dist.get_world_size()
    for i, (plan, numel, settings) in enumerate(cases):
        ex = PlanExecutor(plan, config=ExecutorConfig(**(settings or {})))
        x = mixed_inputs(numel, seed=i)
        y = ex.all_reduce(x.clone())
        every = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(every, x)
        fold = every[ex.rank_map[0]].clone()
        for r in range(1, n):
            fold += every[ex.rank_map[r]]
        digests: list[Any] = [None] * n
        dist.all_gather_object(digests, digest(y))
        absum = torch.stack(every).abs().double().sum(0)
        err = (y.double() - torch.stack(every).double().sum(0)).abs()
        out.append(
            {
                "case": f"{plan['plan_id']} n={numel} config={settings}",
                "identical": len(set(digests)) == 1,
                "fold": torch.equal(y, fold),
                "within_tol": bool((err <= n * torch.finfo(x.dtype).eps * absum).all()),
            }
        )
    return out


def sparse_bits_cases(
    cases: list[tuple[dict[str, Any], int, dict[str, Any] | None]],
) -> list[dict[str, Any]]:
    """``bits_cases`` through the block-sparse executor: mixed-magnitude float32 blocks of 8
    elements, about half of each rank's blocks zero."""
    from syncplan.executor.sparse import SparseConfig, SparseExecutor

    out = []
    n = dist.get_world_size()
    for i, (plan, numel, settings) in enumerate(cases):
        ex = SparseExecutor(
            PlanExecutor(plan),
            SparseConfig(**{"max_density": 1.0, "block_elems": 8, **(settings or {})}),
        )
        x = mixed_inputs(numel, seed=i)
        g = torch.Generator().manual_seed(i * 1000 + 17 + dist.get_rank())
        keep = torch.rand(-(-numel // 8), generator=g) < 0.5
        x *= keep.repeat_interleave(8)[:numel]
        y = ex.all_reduce(x.clone())
        every = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(every, x)
        fold = every[0].clone()
        for r in range(1, n):
            fold += every[r]
        digests: list[Any] = [None] * n
        dist.all_gather_object(digests, digest(y + 0.0))  # the sign of a zero may differ
        out.append(
            {
                "case": f"sparse {plan['plan_id']} n={numel} config={settings}",
                "mode": ex.last.mode if ex.last else None,
                "identical": len(set(digests)) == 1,
                "fold": torch.equal(y + 0.0, fold + 0.0),
            }
        )
    return out


def split_case(plan: dict[str, Any], numel: int) -> dict[str, Any]:
    """Run ``plan`` with the default ExecutorConfig on float32 random inputs: how many
    messages this rank sends and whether the result equals torch's all-reduce."""
    ex = PlanExecutor(plan)
    prep = ex.prepare(numel, torch.float32, torch.device("cpu"))
    x = inputs(numel, torch.float32, seed=5)
    y = ex.all_reduce(x.clone())
    return {"sends": len(getattr(prep, "sends", ())), **compare(y, x)}
