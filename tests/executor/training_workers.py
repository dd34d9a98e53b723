"""Training loops the schedule tests run inside spawned gloo processes."""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.comm import PlanComm
from syncplan.executor.ddp import plan_allreduce_hook
from syncplan.executor.engine import PlanExecutor
from syncplan.executor.overlap import AsyncPlanComm, async_plan_allreduce_hook
from syncplan.executor.training import ScheduledOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.LayerNorm(32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.Tanh(),
        torch.nn.Linear(32, 4),
    )


def batches(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(100 + dist.get_rank())
    return [(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)) for _ in range(steps)]


def sgd(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def _ddp(hook: Any = None, state: Any = None, steps: int = 50) -> list[torch.Tensor]:
    model = make_model()
    ddp = DDP(model)
    if hook is not None:
        ddp.register_comm_hook(state, hook)
    opt = sgd(list(model.parameters()))
    for x, y in batches(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _scheduled(
    schedule: dict[str, Any] | None, mode: str, steps: int = 50
) -> tuple[list[torch.Tensor], ScheduledOptimizer]:
    model = make_model()
    opt = ScheduledOptimizer(model, sgd, schedule, mode=mode)
    for x, y in batches(steps):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    opt.finish()
    out = [p.detach().clone() for p in model.parameters()]
    opt.close()
    return out, opt


def _adopted(schedule: dict[str, Any], steps: int = 50) -> tuple[list[torch.Tensor], bool]:
    """The all-reduce mode; a refresh that finds the same schedule (kept), one that finds
    other buckets and plans (adopted); then the DeAR mode adopted, in one running job."""
    model = make_model()
    opt = ScheduledOptimizer(model, sgd, schedule, mode="allreduce")
    other = {**schedule, "modes": {"allreduce": schedule["modes"]["dear"]}}
    flags = []
    for k, (x, y) in enumerate(batches(steps)):
        if k == steps // 4:
            flags.append(opt.refresh(lambda: schedule))
        if k == steps // 2:
            flags.append(opt.refresh(lambda: other))
        if k == 3 * steps // 4:
            assert opt.adopt(schedule, mode="dear")
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    opt.finish()
    out = [p.detach().clone() for p in model.parameters()]
    ok = opt.using_plans and opt.mode == "dear" and flags == [False, True]
    opt.close()
    return out, ok


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


def compare_methods(schedule: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """Parameters after 50 iterations of every method vs plain DDP: max abs difference."""
    warn = _Warnings()
    logging.getLogger("executor").addHandler(warn)
    ref = _ddp()
    comm = PlanComm(PlanExecutor(plan))
    results = {"ddp-hook": _ddp(plan_allreduce_hook, comm)}
    state = AsyncPlanComm(PlanComm(PlanExecutor(plan)))
    results["ddp-async-hook"] = _ddp(async_plan_allreduce_hook, state)
    state.close()
    using: dict[str, bool] = {}
    for name, sched, mode in (
        ("schedule-allreduce", schedule, "allreduce"),
        ("dear", schedule, "dear"),
        ("dear-fallback", None, "dear"),
    ):
        results[name], opt = _scheduled(sched, mode)
        using[name] = opt.using_plans
    results["adopted"], using["adopted"] = _adopted(schedule)
    diff = {
        k: max(float((a - b).abs().max()) for a, b in zip(v, ref, strict=True))
        for k, v in results.items()
    }
    moved = max(
        float((a - b).abs().max())
        for a, b in zip(ref, [p.detach() for p in make_model().parameters()], strict=True)
    )
    return {"diff": diff, "using": using, "warnings": warn.seen, "moved": moved}
