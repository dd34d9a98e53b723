"""What the sliced-launch tests run inside spawned gloo processes (see executor.localrun)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist

from tests.executor.workers import inputs


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def sliced_run(server: str, jobs: list[str], numel: int) -> dict[str, Any]:
    """Per job: init_plan_comm in sliced mode (SYNCPLAN_PLAN_SLICES=1) and from the whole
    document, sum the same inputs with both; report whether each used the plan, the sliced
    comm's reason and warnings, and whether both sums are bitwise equal."""
    from syncplan.executor.engine import PlanExecutor
    from syncplan.executor.launch import LaunchConfig, fetch_plan_if_changed, init_plan_comm

    out: dict[str, Any] = {}
    logger = logging.getLogger("executor")
    for job in jobs:
        env = {
            "SYNCPLAN_JOB_ID": job,
            "SYNCPLAN_SERVER": server,
            "SYNCPLAN_JOB_TOKEN": "tok",
            "SYNCPLAN_PLAN_SLICES": "1",
        }
        cfg = LaunchConfig.from_env(env, fetch_timeout_s=5.0, retries=1, backoff_s=0.05)
        handler = _Records()
        logger.addHandler(handler)
        try:
            sliced = init_plan_comm(cfg)
        finally:
            logger.removeHandler(handler)
        whole = init_plan_comm(replace(cfg, sliced=False))
        x = inputs(numel, torch.float32, seed=3)
        a, b, ref = x.clone(), x.clone(), x.clone()
        sliced.all_reduce(a)
        whole.all_reduce(b)
        dist.all_reduce(ref)
        direct = None
        if sliced.using_plan and job == "forest":  # plan rank r is process r
            doc = fetch_plan_if_changed(cfg, None, rank=f"{cfg_host()}/cpu{dist.get_rank()}")[0]
            assert doc is not None
            c = x.clone()
            PlanExecutor(doc).all_reduce(c)  # a slice, read and run by the engine itself
            direct = torch.equal(c, b)
        out[job] = {
            "direct": direct,
            "sliced": cfg.sliced,
            "using_plan": sliced.using_plan,
            "whole_using_plan": whole.using_plan,
            "reason": sliced.reason,
            "equal": torch.equal(a, b),
            "close": bool(torch.allclose(a, ref, rtol=1e-4, atol=1e-4)),
            "warnings": [r.getMessage() for r in handler.records if r.levelno >= logging.WARNING],
        }
    return out


def cfg_host() -> str:
    import socket

    return socket.gethostname()
