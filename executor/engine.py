"""Run an all-reduce program on a tensor with torch.distributed point-to-point operations.

docs/formats.md semantics: every transfer carries the value its source held at the start of its
step. Sends read the live buffer; a received value that its step could still read (or that
must be added) lands in a staging buffer and is applied once the sends reading those
elements are done. NCCL (CUDA tensors) runs one ``batch_isend_irecv`` per step. gloo (CPU
tensors) runs a data-flow order of the same messages, cut into segments, so consecutive
steps overlap wherever the data allows (see ``syncplan.executor.dataflow.dataflow``).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from syncplan.core.document import PlanDocument, PlanError
from syncplan.core.slice import check_slice, is_slice
from syncplan.executor.dataflow import APPLY, POST_RECV, POST_SEND, WAIT_RECV, dataflow
from syncplan.executor.schedule import Apply, RankSchedule, build_schedule

log = logging.getLogger(__name__)

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class ExecutorError(RuntimeError):
    """Running a plan failed part-way (a peer died or timed out); the group may be unusable."""


@dataclass(frozen=True)
class ExecutorConfig:
    """Settings of a PlanExecutor."""

    timeout_s: float = 300.0  # bound on each wait for a step's messages
    verify: bool = True  # check the program is a correct all-reduce before use
    max_prepared: int = 32  # prepared (element count, dtype, device) entries kept
    segment_bytes: int = 1 << 20  # gloo: cut longer messages into segments (0: never)
    # gloo: cut a message of at least split_pieces x split_min_bytes into at least
    # split_pieces segments, so the receiver forwards the first while the next arrives
    # (a 1 MiB ring over 8 ranks: 128 KiB messages; 1: never); see docs/executor.md
    split_pieces: int = 2
    split_min_bytes: int = 64 << 10
    # "auto": data-flow order on gloo, one batch_isend_irecv per step on NCCL;
    # "steps": one batch per step everywhere.
    schedule: str = "auto"
    # gloo: stage every receive and post all of them before any send, so that each
    # receiver-ready notice leaves ahead of the payload queued on its pair (see
    # docs/executor.md), while the staging stays within this many times the buffer; 0: never.
    eager_recv_factor: float = 4.0
    # gloo: hold a send of step s until this rank's receives of the steps before
    # s - lookahead_steps are done (None: no limit); see executor.dataflow.dataflow.
    lookahead_steps: int | None = 4
    # write a timeline trace of every run here (None: $SYNCPLAN_TRACE, unset: none) and
    # predict its steps on this topology (a planner Topology or a file; None:
    # $SYNCPLAN_TRACE_TOPOLOGY); see docs/executor.md, "Timeline trace"
    trace: str | None = None
    trace_topology: Any = None

    def __post_init__(self) -> None:
        if self.schedule not in ("auto", "steps"):
            raise ValueError(f"schedule must be 'auto' or 'steps', got {self.schedule!r}")
        if self.segment_bytes < 0:
            raise ValueError(f"segment_bytes must be >= 0, got {self.segment_bytes}")
        if self.split_pieces < 1 or self.split_min_bytes < 1:
            raise ValueError(
                "split_pieces and split_min_bytes must be >= 1, got "
                f"{self.split_pieces}, {self.split_min_bytes}"
            )
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.eager_recv_factor < 0:
            raise ValueError(f"eager_recv_factor must be >= 0, got {self.eager_recv_factor}")
        if self.lookahead_steps is not None and self.lookahead_steps < 0:
            raise ValueError(f"lookahead_steps must be >= 0 or None, got {self.lookahead_steps}")
        if self.max_prepared < 1:
            raise ValueError(f"max_prepared must be >= 1, got {self.max_prepared}")


class _GlooPrepared:
    """gloo: one rank's data-flow program (executor.dataflow.dataflow) for one (element
    count, dtype) with its staging buffer. Messages go through the ProcessGroup's own send
    and recv, which is what batch_isend_irecv does on gloo, minus its per-op Python checks."""

    def __init__(
        self,
        sched: RankSchedule,
        rank_map: Sequence[int],
        dtype: torch.dtype,
        group: Any,
        lookahead: int | None = None,
    ) -> None:
        flow = dataflow(sched, lookahead)
        self.flow, self.sched = flow, sched
        self.staging = torch.empty(flow.staging_numel, dtype=dtype)
        pg = group if group is not None else dist.group.WORLD
        assert pg is not None  # the engine checked that torch.distributed is initialised
        self.pg = pg
        self.sends = [(rank_map[p], a, b, tag) for p, a, b, tag in flow.sends]
        self.recvs = [(rank_map[p], a, b, tag) for p, a, b, tag in flow.recvs]
        self.code = list(flow.instructions)
        self._for: int | None = None  # data_ptr of the buffer the cached views point into
        self._views: tuple[
            list[list[torch.Tensor]],
            list[list[torch.Tensor]],
            list[list[tuple[torch.Tensor, torch.Tensor, bool]]],
        ] = ([], [], [])

    def views(
        self, flat: torch.Tensor
    ) -> tuple[
        list[list[torch.Tensor]],
        list[list[torch.Tensor]],
        list[list[tuple[torch.Tensor, torch.Tensor, bool]]],
    ]:
        """Send buffers, receive buffers and applies for ``flat``, cached for the last
        buffer seen (the cached views keep it alive, so no other tensor can take its
        address while it is cached)."""
        ptr = flat.data_ptr()
        if self._for != ptr:
            st, flow = self.staging, self.flow
            self._views = (
                [[flat[a:b]] for _, a, b, _ in self.sends],
                [
                    [flat[a:b] if off is None else st[off : off + b - a]]
                    for (_, a, b, _), off in zip(self.recvs, flow.staged, strict=True)
                ],
                [[_apply_views(flat, st, x) for x in applies] for applies in flow.recv_applies],
            )
            self._for = ptr
        return self._views

    def run(self, flat: torch.Tensor, timeout: timedelta) -> None:
        send_bufs, recv_bufs, applies = self.views(flat)
        send, recv = self.pg.send, self.pg.recv
        sends, recvs = self.sends, self.recvs
        sent: list[Any] = [None] * len(sends)
        got: list[Any] = [None] * len(recvs)
        for op, i in self.code:
            if op == WAIT_RECV:
                got[i].wait(timeout)
            elif op == POST_SEND:
                peer, _, _, tag = sends[i]
                sent[i] = send(send_bufs[i], peer, tag)
            elif op == POST_RECV:
                peer, _, _, tag = recvs[i]
                got[i] = recv(recv_bufs[i], peer, tag)
            elif op == APPLY:
                _apply(applies[i])
            else:
                sent[i].wait(timeout)


class _StepPrepared:
    """One batch_isend_irecv per step, staged values applied after the step. Used for NCCL,
    which runs a group's kernels in stream order, so steps are not overlapped."""

    def __init__(
        self,
        sched: RankSchedule,
        rank_map: Sequence[int],
        dtype: torch.dtype,
        device: torch.device,
        group: Any,
    ) -> None:
        self.staging = torch.empty(sched.staging_numel, dtype=dtype, device=device)
        self.sched = sched
        self.group = group
        g = group
        self.glob = [dist.get_global_rank(g, r) if g is not None else r for r in rank_map]
        self._for: int | None = None
        self._ops: list[tuple[list[dist.P2POp], list[tuple[torch.Tensor, torch.Tensor, bool]]]] = []

    def ops(
        self, flat: torch.Tensor
    ) -> list[tuple[list[dist.P2POp], list[tuple[torch.Tensor, torch.Tensor, bool]]]]:
        ptr = flat.data_ptr()
        if self._for != ptr:
            st, g, glob = self.staging, self.group, self.glob
            self._ops = []
            for step in self.sched.steps:
                ops = [
                    dist.P2POp(dist.isend, flat[m.start : m.stop], glob[m.peer], g)
                    for m in step.sends
                ]
                ops += [
                    dist.P2POp(
                        dist.irecv,
                        flat[m.start : m.stop]
                        if m.staged is None
                        else st[m.staged : m.staged + m.stop - m.start],
                        glob[m.peer],
                        g,
                    )
                    for m in step.recvs
                ]
                applies = [_apply_views(flat, st, x) for m in step.recvs for x in m.applies]
                self._ops.append((ops, applies))
            self._for = ptr
        return self._ops

    def run(self, flat: torch.Tensor, timeout: timedelta) -> None:
        for ops, applies in self.ops(flat):
            for w in dist.batch_isend_irecv(ops):
                w.wait(timeout)
            _apply(applies)


def through_contiguous(
    tensor: torch.Tensor, reduce: Callable[[torch.Tensor], object]
) -> torch.Tensor:
    """Run ``reduce`` (in place) on a contiguous flat copy of ``tensor``, copy the result
    back and return ``tensor``."""
    flat = tensor.contiguous().view(-1)
    reduce(flat)
    tensor.copy_(flat.view_as(tensor))
    return tensor


class PlanExecutor:
    """Runs one plan's all-reduce program on the tensors of this process.

    ``rank_map[i]`` is the rank in ``group`` that plays plan rank i (identity by default).
    """

    def __init__(
        self,
        plan: PlanDocument | Mapping[str, Any],
        group: Any = None,
        *,
        rank_map: Sequence[int] | None = None,
        config: ExecutorConfig | None = None,
    ) -> None:
        self.config = config or ExecutorConfig()
        if isinstance(plan, Mapping) and is_slice(plan):  # one rank's transfers: no whole to check
            self.program = check_slice(plan)
            self.config = replace(self.config, verify=False)
        else:
            self.program = plan if isinstance(plan, PlanDocument) else PlanDocument.from_plan(plan)
        # the plan's "sparse" object (planner.sparse), read by executor.sparse
        info = None if isinstance(plan, PlanDocument) else plan.get("sparse")
        self.sparse_info: dict[str, Any] = dict(info) if isinstance(info, Mapping) else {}
        if self.config.verify:
            self.program.check()
        if not dist.is_initialized():
            raise PlanError("torch.distributed is not initialised: call init_process_group first")
        self.group = group
        world = dist.get_world_size(group)
        n = self.program.nranks
        if n != world:
            raise PlanError(f"the plan has {n} ranks but the process group has {world}")
        rmap = list(range(n)) if rank_map is None else [int(r) for r in rank_map]
        if sorted(rmap) != list(range(n)):
            raise PlanError(f"rank_map must be a permutation of 0..{n - 1}, got {rmap}")
        self.rank_map = tuple(rmap)
        me = dist.get_rank(group)
        self.plan_rank = rmap.index(me)
        self.backend = str(dist.get_backend(group))
        self._timeout = timedelta(seconds=self.config.timeout_s)
        self._prepared: dict[
            tuple[int, torch.dtype, torch.device], _GlooPrepared | _StepPrepared
        ] = {}
        self._warmed: set[torch.device] = set()
        trace = self.config.trace or os.environ.get("SYNCPLAN_TRACE")
        self._tracer = None if not trace else _tracer(trace, plan, self, self.config)

    @property
    def world_size(self) -> int:
        return self.program.nranks

    def prepare(
        self, numel: int, dtype: torch.dtype, device: torch.device | str
    ) -> _GlooPrepared | _StepPrepared:
        """Build (or fetch) this rank's schedule and staging buffer for one tensor shape."""
        device = torch.device(device)
        key = (numel, dtype, device)
        prep = self._prepared.get(key)
        if prep is not None:
            return prep
        if dtype not in FLOAT_DTYPES:
            raise PlanError(
                f"dtype {dtype} is not supported; use one of "
                f"{', '.join(str(d) for d in FLOAT_DTYPES)}"
            )
        if device.type == "cuda" and "nccl" not in self.backend:
            raise PlanError(f"CUDA tensors need an NCCL process group, not {self.backend!r}")
        if device.type == "cpu" and "gloo" not in self.backend:
            raise PlanError(f"CPU tensors need a gloo process group, not {self.backend!r}")
        if device.type == "cpu" and self.config.schedule == "auto":
            esize = torch.empty(0, dtype=dtype).element_size()
            build = functools.partial(
                build_schedule,
                self.program,
                self.plan_rank,
                numel,
                segment=self.config.segment_bytes // esize or None,
                pieces=self.config.split_pieces,
                piece_min=max(self.config.split_min_bytes // esize, 1),
            )
            eager = self.config.eager_recv_factor > 0
            sched = build(stage_all=eager)
            if eager and sched.total_recv_numel > self.config.eager_recv_factor * numel:
                sched = build()
            prep = _GlooPrepared(
                sched, self.rank_map, dtype, self.group, self.config.lookahead_steps
            )
        else:
            sched = build_schedule(self.program, self.plan_rank, numel)
            prep = _StepPrepared(sched, self.rank_map, dtype, device, self.group)
        if len(self._prepared) >= self.config.max_prepared:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = prep
        log.debug(
            "prepared plan %s for %d x %s on %s: %d steps, %d messages",
            self.program.plan_id,
            numel,
            dtype,
            device,
            len(sched.steps),
            sched.messages,
        )
        return prep

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over all ranks in place (every rank must call it with the same
        element count and dtype) and return it."""
        if not tensor.is_contiguous():
            return through_contiguous(tensor, self.all_reduce)
        flat = tensor.view(-1)
        if flat.device.type == "cuda" and flat.device not in self._warmed:
            # NCCL point-to-point in a group needs communicators that all ranks set up together.
            dist.all_reduce(torch.zeros(1, device=flat.device), group=self.group)
            self._warmed.add(flat.device)
        prep = self.prepare(flat.numel(), flat.dtype, flat.device)
        self._run(prep, flat)
        return tensor

    def run(self, tensor: torch.Tensor) -> torch.Tensor:
        """Run the plan's program on contiguous ``tensor`` in place, whatever its collective:
        after a reduce-scatter each rank's shard (``program.shards``) holds the sum, after an
        all-gather every rank holds every owner's shard."""
        flat = tensor.view(-1)
        if flat.device.type == "cuda" and flat.device not in self._warmed:
            dist.all_reduce(torch.zeros(1, device=flat.device), group=self.group)
            self._warmed.add(flat.device)
        self._run(self.prepare(flat.numel(), flat.dtype, flat.device), flat)
        return tensor

    def _run(self, prep: _GlooPrepared | _StepPrepared, flat: torch.Tensor) -> None:
        try:
            if self._tracer is None:
                prep.run(flat, self._timeout)
            else:
                self._tracer.run(prep, flat, self._timeout)
        except RuntimeError as exc:
            raise ExecutorError(
                f"plan {self.program.plan_id}: a transfer failed on rank {dist.get_rank()}: {exc}"
            ) from exc


def _tracer(path: str, plan: Any, ex: PlanExecutor, config: ExecutorConfig) -> Any:
    """The PlanTracer of ``ex`` writing to ``path`` (executor.trace)."""
    from syncplan.executor.trace import TOPOLOGY_ENV, PlanTracer, recorder

    topo = config.trace_topology or os.environ.get(TOPOLOGY_ENV) or None
    doc = None if isinstance(plan, PlanDocument) else plan
    return PlanTracer(recorder(path, dist.get_rank()), doc, ex.program, topo)


def _apply_views(
    flat: torch.Tensor, staging: torch.Tensor, x: Apply
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(destination, staged value, reduce) of one apply: the destination is the buffer, or
    the staging of a partial sum (``Apply.target``)."""
    n = x.stop - x.start
    dst = flat[x.start : x.stop] if x.target is None else staging[x.target : x.target + n]
    return dst, staging[x.staged : x.staged + n], x.reduce


def _apply(applies: list[tuple[torch.Tensor, torch.Tensor, bool]]) -> None:
    for dst, staged, reduce in applies:
        if reduce:
            dst.add_(staged)
        else:
            dst.copy_(staged)
