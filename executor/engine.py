"""Run an all-reduce program on a tensor with torch.distributed point-to-point operations.

Each step is one ``batch_isend_irecv`` per rank. Sends read the live buffer; a received value
that the step could still read (or that must be added) lands in a staging buffer and is
applied after the whole step completed, which gives the CONTRACTS semantics: every transfer
carries the value its source held at the start of the step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from executor.program import PlanError, Program
from executor.schedule import RankSchedule, build_schedule

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

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.max_prepared < 1:
            raise ValueError(f"max_prepared must be >= 1, got {self.max_prepared}")


class _Prepared:
    """One rank's schedule for one (element count, dtype, device) with its staging buffer."""

    def __init__(self, sched: RankSchedule, peers: Sequence[int], dtype: torch.dtype,
                 device: torch.device, group: Any) -> None:
        self.numel = sched.numel
        self.staging = torch.empty(sched.staging_numel, dtype=dtype, device=device)
        st = self.staging
        # Per step: (sends, recvs, applies) with peers already translated to global ranks
        # and staging views built once.
        self.steps: list[tuple[list[tuple[int, int, int]],
                               list[tuple[int, int, int, torch.Tensor | None]],
                               list[tuple[int, int, torch.Tensor, bool]]]] = []
        for step in sched.steps:
            sends = [(peers[m.peer], m.start, m.stop) for m in step.sends]
            recvs = [(peers[m.peer], m.start, m.stop,
                      None if m.staged is None else st[m.staged:m.staged + m.stop - m.start])
                     for m in step.recvs]
            applies = [(a.start, a.stop, st[a.staged:a.staged + a.stop - a.start], a.reduce)
                       for a in step.applies]
            self.steps.append((sends, recvs, applies))
        self.group = group
        self._ops_for: int | None = None  # data_ptr of the buffer the cached ops point into
        self._ops: list[list[dist.P2POp]] = []

    def ops(self, flat: torch.Tensor) -> list[list[dist.P2POp]]:
        """The P2POps of every step for ``flat``; cached for the last buffer seen (the cached
        views keep that buffer alive, so its address cannot be reused by another tensor)."""
        ptr = flat.data_ptr()
        if self._ops_for != ptr:
            self._ops = []
            g = self.group
            for sends, recvs, _ in self.steps:
                ops = [dist.P2POp(dist.isend, flat[a:b], peer, g) for peer, a, b in sends]
                ops += [dist.P2POp(dist.irecv, flat[a:b] if v is None else v, peer, g)
                        for peer, a, b, v in recvs]
                self._ops.append(ops)
            self._ops_for = ptr
        return self._ops


class PlanExecutor:
    """Runs one plan's all-reduce program on the tensors of this process.

    ``rank_map[i]`` is the rank in ``group`` that plays plan rank i (identity by default).
    """

    def __init__(self, plan: Program | Mapping[str, Any], group: Any = None, *,
                 rank_map: Sequence[int] | None = None,
                 config: ExecutorConfig | None = None) -> None:
        self.config = config or ExecutorConfig()
        self.program = plan if isinstance(plan, Program) else Program.from_plan(plan)
        if self.config.verify:
            self.program.check_allreduce()
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
        # Peer ids as P2POp wants them: global ranks.
        self._peers = [r if group is None else dist.get_global_rank(group, r) for r in rmap]
        self.backend = str(dist.get_backend(group))
        self._timeout = timedelta(seconds=self.config.timeout_s)
        self._prepared: dict[tuple[int, torch.dtype, torch.device], _Prepared] = {}
        self._warmed: set[torch.device] = set()

    @property
    def world_size(self) -> int:
        return self.program.nranks

    def prepare(self, numel: int, dtype: torch.dtype, device: torch.device | str) -> _Prepared:
        """Build (or fetch) this rank's schedule and staging buffer for one tensor shape."""
        device = torch.device(device)
        key = (numel, dtype, device)
        prep = self._prepared.get(key)
        if prep is not None:
            return prep
        if dtype not in FLOAT_DTYPES:
            raise PlanError(f"dtype {dtype} is not supported; use one of "
                            f"{', '.join(str(d) for d in FLOAT_DTYPES)}")
        if device.type == "cuda" and "nccl" not in self.backend:
            raise PlanError(f"CUDA tensors need an NCCL process group, not {self.backend!r}")
        if device.type == "cpu" and "gloo" not in self.backend:
            raise PlanError(f"CPU tensors need a gloo process group, not {self.backend!r}")
        sched = build_schedule(self.program, self.plan_rank, numel)
        prep = _Prepared(sched, self._peers, dtype, device, self.group)
        if len(self._prepared) >= self.config.max_prepared:
            self._prepared.pop(next(iter(self._prepared)))
        self._prepared[key] = prep
        log.debug("prepared plan %s for %d x %s on %s: %d steps, %d messages",
                  self.program.plan_id, numel, dtype, device, len(sched.steps), sched.messages)
        return prep

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over all ranks in place (every rank must call it with the same
        element count and dtype) and return it."""
        if not tensor.is_contiguous():
            flat = tensor.contiguous().view(-1)
            self.all_reduce(flat)
            tensor.copy_(flat.view_as(tensor))
            return tensor
        flat = tensor.view(-1)
        if flat.device.type == "cuda" and flat.device not in self._warmed:
            # NCCL point-to-point in a group needs communicators that all ranks set up together.
            dist.all_reduce(torch.zeros(1, device=flat.device), group=self.group)
            self._warmed.add(flat.device)
        prep = self.prepare(flat.numel(), flat.dtype, flat.device)
        self._run(prep, flat)
        return tensor

    def _run(self, prep: _Prepared, flat: torch.Tensor) -> None:
        timeout = self._timeout
        for (_, _, applies), ops in zip(prep.steps, prep.ops(flat), strict=True):
            try:
                works = dist.batch_isend_irecv(ops)
                for w in works:
                    w.wait(timeout)
            except RuntimeError as exc:
                raise ExecutorError(f"plan {self.program.plan_id}: a step failed on rank "
                                    f"{dist.get_rank()}: {exc}") from exc
            for a, b, staged, reduce in applies:
                if reduce:
                    flat[a:b].add_(staged)
                else:
                    flat[a:b].copy_(staged)
