"""Run a job schedule (planner.schedule, GET /v1/jobs/{id}/schedule) in a training loop.

``ScheduledOptimizer`` replaces DDP and the optimizer: it hooks every parameter's gradient
accumulation, packs each bucket of the schedule (gradients in backward order) as soon as its
last gradient is ready, and runs the bucket's communication on a ``CommThread`` while
backward goes on:

- ``mode="allreduce"``: the bucket's all-reduce plan; ``step()`` waits for every bucket and
  applies the optimizer;
- ``mode="dear"`` (DeAR): the bucket's reduce-scatter plan in backward; ``step()`` queues the
  all-gathers in forward order and returns; a forward pre-hook on each module waits for the
  all-gather of the buckets holding its parameters, then applies their optimizer step, so the
  all-gathers overlap the next forward.

Gradients are averaged as DDP does (divide by the world size, then sum); each bucket has
its own optimizer (``make_optimizer(params)``), which for per-parameter optimizers (SGD,
Adam, ...) is the same update as one optimizer over all parameters. When anything is off
(no schedule, a plan that does not fit, another world size) rank 0 logs one warning and the
buckets are all-reduced with ``torch.distributed.all_reduce`` (DDP's behaviour), still on the
communication thread.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from syncplan.core.document import PlanError
from syncplan.executor.engine import ExecutorConfig, PlanExecutor
from syncplan.executor.overlap import CommThread
from syncplan.executor.training_profile import Profile

log = logging.getLogger("executor")

DEFAULT_BUCKET_BYTES = 25 << 20  # DDP's default


def gradients_of(model: torch.nn.Module) -> list[dict[str, Any]]:
    """The job's ``gradients`` (PUT /v1/jobs/{id}): trainable parameters in backward order
    (the reverse of ``model.parameters()``, as DDP assumes)."""
    names = {
        torch.float32: "float32",
        torch.float16: "float16",
        torch.bfloat16: "bfloat16",
        torch.float64: "float64",
    }
    return [{"numel": p.numel(), "dtype": names[p.dtype]} for p in _backward_order(model)]


def _backward_order(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad][::-1]


def fixed_buckets(params: Sequence[torch.Tensor], bucket_bytes: int) -> list[tuple[int, int]]:
    """Contiguous buckets of at most ``bucket_bytes`` (at least one tensor; dtype-pure)."""
    out, lo, filled = [], 0, 0
    for i, p in enumerate(params):
        nbytes = p.numel() * p.element_size()
        if i > lo and (filled + nbytes > bucket_bytes or p.dtype != params[lo].dtype):
            out.append((lo, i))
            lo, filled = i, 0
        filled += nbytes
    out.append((lo, len(params)))
    return out


def schedule_key(schedule: Mapping[str, Any] | None, mode: str) -> str | None:
    """What a ScheduledOptimizer in ``mode`` takes from ``schedule``: its buckets and plan
    ids (None: no such mode). Equal keys: adopting would change nothing."""
    entry = (schedule or {}).get("modes", {}).get(mode)
    if not isinstance(entry, Mapping):
        return None
    try:
        return json.dumps(
            [
                [b["tensors"], {k: d.get("plan_id") for k, d in sorted(b["plans"].items())}]
                for b in entry["buckets"]
            ],
            sort_keys=True,
        )
    except (KeyError, TypeError, AttributeError):
        return None


@dataclass
class _Bucket:
    params: list[torch.nn.Parameter]
    flat: torch.Tensor
    offsets: list[int]
    optimizer: Any
    plans: dict[str, PlanExecutor]
    ready: int = 0
    pending: torch.futures.Future[Any] | None = None
    gathered: torch.futures.Future[Any] | None = None


class ScheduledOptimizer:
    """See the module doc. Call ``step()`` after each ``backward()`` and ``finish()`` before
    reading parameters (it applies the last all-gathers and steps); there is no zero_grad:
    gradients are consumed into the buckets as they are produced."""

    def __init__(
        self,
        model: torch.nn.Module,
        make_optimizer: Callable[[list[torch.nn.Parameter]], Any],
        schedule: Mapping[str, Any] | None = None,
        *,
        mode: str = "dear",
        group: Any = None,
        config: ExecutorConfig | None = None,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    ) -> None:
        if mode not in ("allreduce", "dear"):
            raise ValueError(f"mode must be 'allreduce' or 'dear', got {mode!r}")
        self.model, self.mode = model, mode
        self.world = dist.get_world_size(group)
        # a group of its own: the thread's messages never interleave with the caller's
        self.group = dist.new_group(
            list(range(self.world)) if group is None else dist.get_process_group_ranks(group)
        )
        self.thread = CommThread()
        self._make_optimizer, self._config = make_optimizer, config
        self._caller_group = group
        params = _backward_order(model)
        self._install(schedule, params)
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params]
        self.profile = Profile(len(params))
        self._handles.append(
            model.register_forward_pre_hook(lambda _m, _a: self.profile.forward_start())
        )
        self._handles.append(
            model.register_forward_hook(lambda _m, _a, _o: self.profile.forward_end())
        )

    def _install(
        self, schedule: Mapping[str, Any] | None, params: list[torch.nn.Parameter]
    ) -> None:
        """Buckets, their plans and optimizers, and (dear) the forward pre-hooks."""
        self.reason: str | None = None
        self.schedule_key = schedule_key(schedule, self.mode)
        buckets, plans = self._from_schedule(schedule, params, self._config)
        self.buckets = [
            self._bucket(params[lo:hi], self._make_optimizer, p)
            for (lo, hi), p in zip(buckets, plans, strict=True)
        ]
        self._where = {
            id(p): (k, i) for k, b in enumerate(self.buckets) for i, p in enumerate(b.params)
        }
        self._module_handles: list[Any] = []
        if self.mode == "dear":
            for m in self.model.modules():
                mine = sorted(
                    {
                        self._where[id(p)][0]
                        for p in m.parameters(recurse=False)
                        if id(p) in self._where
                    }
                )
                if mine:
                    self._module_handles.append(
                        m.register_forward_pre_hook(
                            lambda _m, _a, ks=tuple(mine): self._before_forward(ks)
                        )
                    )

    def adopt(self, schedule: Mapping[str, Any] | None, *, mode: str | None = None) -> bool:
        """Switch to another schedule (one re-planned after the profile or the fabric
        changed), and optionally to another mode, between iterations: after ``step()``,
        before the next forward. Pending all-gathers and updates are applied first; the
        optimizer state (momentum, Adam moments, ...) moves with each parameter to its new
        bucket. Every rank must adopt the same schedule at the same iteration. Returns
        whether the new schedule's plans are used (else DDP's behaviour, one warning)."""
        mode = mode or self.mode
        if mode not in ("allreduce", "dear"):
            raise ValueError(f"mode must be 'allreduce' or 'dear', got {mode!r}")
        self.finish()
        if any(b.pending is not None for b in self.buckets):
            raise RuntimeError("adopt() between iterations: after step(), before the next backward")
        state: dict[int, tuple[Any, dict[str, Any]]] = {}
        for b in self.buckets:
            opt = b.optimizer
            for group in getattr(opt, "param_groups", []):
                hyper = {k: v for k, v in group.items() if k != "params"}
                for p in group["params"]:
                    if p in opt.state:
                        state[id(p)] = (opt.state[p], hyper)
                    else:
                        state[id(p)] = ({}, hyper)
        for h in self._module_handles:
            h.remove()
        self.mode = mode
        self._install(schedule, _backward_order(self.model))
        for b in self.buckets:
            opt = b.optimizer
            for group in getattr(opt, "param_groups", []):
                for p in group["params"]:
                    old, hyper = state.get(id(p), ({}, {}))
                    if old:
                        opt.state[p] = old
                    group.update(hyper)  # e.g. a learning rate changed by a scheduler
        return self.using_plans

    # ---- set-up ---------------------------------------------------------------------------
    def _from_schedule(
        self,
        schedule: Mapping[str, Any] | None,
        params: list[torch.nn.Parameter],
        config: ExecutorConfig | None,
    ) -> tuple[list[tuple[int, int]], list[dict[str, PlanExecutor]]]:
        fallback = fixed_buckets(params, DEFAULT_BUCKET_BYTES)
        try:
            if schedule is None:
                raise PlanError("no schedule")
            entry = schedule.get("modes", {}).get(self.mode)
            if entry is None:
                raise PlanError(f"the schedule has no {self.mode!r} mode")
            buckets = [tuple(b["tensors"]) for b in entry["buckets"]]
            if [i for lo, hi in buckets for i in range(lo, hi)] != list(range(len(params))):
                raise PlanError(
                    f"the schedule's buckets do not cover the model's "
                    f"{len(params)} gradients in order"
                )
            plans = []
            for (lo, hi), b in zip(buckets, entry["buckets"], strict=True):
                nbytes = sum(p.numel() * p.element_size() for p in params[lo:hi])
                if nbytes != b["size_bytes"]:
                    raise PlanError(
                        f"bucket [{lo}, {hi}) holds {nbytes} bytes here, "
                        f"{b['size_bytes']} in the schedule"
                    )
                plans.append(
                    {
                        k: PlanExecutor(doc, self.group, config=config)
                        for k, doc in b["plans"].items()
                    }
                )
            return buckets, plans
        except (PlanError, KeyError, TypeError, ValueError) as exc:
            self._fall_back(str(exc))
            return fallback, [{} for _ in fallback]

    def _fall_back(self, reason: str) -> None:
        self.reason = reason
        level = logging.WARNING if dist.get_rank() == 0 else logging.INFO
        log.log(
            level,
            "syncplan schedule: %s; using torch.distributed.all_reduce per bucket instead",
            reason,
        )

    @staticmethod
    def _bucket(
        params: list[torch.nn.Parameter],
        make_optimizer: Callable[..., Any],
        plans: dict[str, PlanExecutor],
    ) -> _Bucket:
        offsets = [0]
        for p in params:
            offsets.append(offsets[-1] + p.numel())
        flat = torch.zeros(offsets[-1], dtype=params[0].dtype, device=params[0].device)
        return _Bucket(params, flat, offsets, make_optimizer(params), plans)

    # ---- backward -------------------------------------------------------------------------
    def _grad_ready(self, p: torch.Tensor) -> None:
        k, i = self._where[id(p)]
        b = self.buckets[k]
        self.profile.grad_ready(self._index(k, i))
        assert p.grad is not None
        b.flat[b.offsets[i] : b.offsets[i + 1]].copy_(p.grad.reshape(-1)).div_(self.world)
        p.grad = None
        b.ready += 1
        if b.ready == len(b.params):
            b.ready = 0
            op = (
                "reducescatter"
                if self.mode == "dear" and "reducescatter" in b.plans
                else "allreduce"
            )
            b.pending = self.thread.submit(
                self.profile.traced(op, k, self._first_half(b)), b.flat.device
            )

    def _index(self, k: int, i: int) -> int:
        return sum(len(b.params) for b in self.buckets[:k]) + i

    def _first_half(self, b: _Bucket) -> Callable[[], object]:
        if "reducescatter" in b.plans and self.mode == "dear":
            return lambda: b.plans["reducescatter"].run(b.flat)
        if "allreduce" in b.plans:
            return lambda: b.plans["allreduce"].all_reduce(b.flat)
        return lambda: dist.all_reduce(b.flat, group=self.group)

    # ---- step -----------------------------------------------------------------------------
    def step(self) -> None:
        """After backward: apply the update (allreduce) or queue the all-gathers (dear)."""
        missing = [k for k, b in enumerate(self.buckets) if b.pending is None]
        if missing:
            raise RuntimeError(
                f"buckets {missing[:8]} got no gradients in this backward "
                "(unused parameters are not supported)"
            )
        self.profile.backward_done()
        if self.mode == "allreduce":
            for k in range(len(self.buckets)):
                self._apply(k)
            return
        for k in range(len(self.buckets) - 1, -1, -1):  # forward order: last bucket first
            b = self.buckets[k]
            ag = b.plans.get("allgather")
            fn = (lambda b=b, ag=ag: ag.run(b.flat)) if ag else (lambda: None)
            b.gathered = self.thread.submit(self.profile.traced("allgather", k, fn), b.flat.device)

    def _apply(self, k: int) -> None:
        b = self.buckets[k]
        assert b.pending is not None
        b.pending.wait()
        if b.gathered is not None:
            b.gathered.wait()
        b.pending = b.gathered = None
        for i, p in enumerate(b.params):
            p.grad = b.flat[b.offsets[i] : b.offsets[i + 1]].view_as(p)
        b.optimizer.step()
        for p in b.params:
            p.grad = None

    def _before_forward(self, ks: tuple[int, ...]) -> None:
        t0 = time.perf_counter()
        for k in ks:
            if self.buckets[k].gathered is not None:
                self._apply(k)
        self.profile.waited(time.perf_counter() - t0)

    def finish(self) -> None:
        """Apply every pending all-gather and update (dear); a no-op otherwise."""
        for k, b in enumerate(self.buckets):
            if b.gathered is not None:
                self._apply(k)

    def close(self) -> None:
        self.finish()
        for h in self._handles + self._module_handles:
            h.remove()
        self.thread.close()

    def refresh(self, fetch: Callable[[], Mapping[str, Any] | None]) -> bool:
        """The closed loop in a running job: call on every rank between iterations (after
        ``step()``). Rank 0 calls ``fetch()`` (e.g. ``report_profile`` then
        ``fetch_schedule``; an exception or None keeps the schedule in use), the answer is
        broadcast, and when its buckets or plans differ from those in use every rank adopts
        it. Returns whether it adopted."""
        box: list[Any] = [None]
        group = self._caller_group  # not self.group: the thread may be using it now
        if dist.get_rank(group) == 0:
            try:
                box[0] = fetch()
            except Exception as exc:  # any failure keeps the schedule in use
                log.warning(
                    "syncplan schedule: refresh failed (%s); keeping the schedule in use", exc
                )
        src = 0 if group is None else dist.get_global_rank(group, 0)
        dist.broadcast_object_list(box, src=src, group=group)
        new = box[0]
        if new is None or schedule_key(new, self.mode) in (None, self.schedule_key):
            return False
        self.adopt(new)
        return True

    @property
    def using_plans(self) -> bool:
        return self.reason is None


def run_iterations(
    model: torch.nn.Module,
    opt: ScheduledOptimizer,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    loss_fn: Callable[..., torch.Tensor],
) -> None:
    """The training loop: forward, backward, step; then finish."""
    for x, y in batches:
        loss_fn(model(x), y).backward()
        opt.step()
    opt.finish()
