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
    segment_bytes: int = 1 << 20  # gloo: cut longer messages into segments (0: never)

    def __post_init__(self) -> None:
        if self.segment_bytes < 0:
            raise ValueError(f"segment_bytes must be >= 0, got {self.segment_bytes}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.max_prepared < 1:
            raise ValueError(f"max_prepared must be >= 1, got {self.max_prepared}")


# Per active step: sends and receives (gloo: ([tensor], group peer, tag) for
# ProcessGroup.send / .recv; NCCL: P2POps) and, per receive, its applies
# (destination view, staged view, reduce).
_Ops = tuple[list[Any], list[Any], list[list[tuple[torch.Tensor, torch.Tensor, bool]]]]


class _Prepared:
    """One rank's schedule for one (element count, dtype, device) with its staging buffer:
    two areas, used by alternate active steps, so a step's receives can be posted while the
    previous step's staged values are still waiting to be applied."""

    def __init__(self, sched: RankSchedule, rank_map: Sequence[int], dtype: torch.dtype,
                 device: torch.device, group: Any) -> None:
        self.numel = sched.numel
        area = sched.staging_numel
        self.staging = torch.empty(2 * area, dtype=dtype, device=device)
        # Per active step: program step index (the message tag), sends (group peer, start,
        # stop) and receives (group peer, start, stop, staging view or None, applies as
        # (start, stop, staging view, reduce)), staging views built once.
        self.steps: list[tuple[int, list[tuple[int, int, int]],
                               list[tuple[int, int, int, torch.Tensor | None,
                                          list[tuple[int, int, torch.Tensor, bool]]]]]] = []
        for i, step in enumerate(sched.steps):
            st = self.staging[(i % 2) * area:(i % 2 + 1) * area]
            self.steps.append((
                step.index,
                [(rank_map[m.peer], m.start, m.stop) for m in step.sends],
                [(rank_map[m.peer], m.start, m.stop,
                  None if m.staged is None else st[m.staged:m.staged + m.stop - m.start],
                  [(a.start, a.stop, st[a.staged:a.staged + a.stop - a.start], a.reduce)
                   for a in m.applies])
                 for m in step.recvs]))
        self._plan_send_waits()
        self.group = group
        self.pg = group if group is not None else dist.group.WORLD
        self._ops_for: int | None = None  # data_ptr of the buffer the cached ops point into
        self._ops: list[_Ops] = []

    def _plan_send_waits(self) -> None:
        """Sends are waited for lazily: only before a receive may land on (or a staged value
        is applied to) elements a send may still be reading, and at the end of the call.
        Decide once which (step, send) pairs to wait for at each point of _run_gloo."""
        out: list[tuple[int, int, int, int]] = []  # (step, send index, start, stop)

        def settle(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
            hit = [o for o in out if any(o[2] < b and a < o[3] for a, b in ranges)]
            for o in hit:
                out.remove(o)
            return [(j, k) for j, k, _, _ in hit]

        steps = self.steps
        self.wait_before_post: list[list[tuple[int, int]]] = [[]]  # step 0: before any send
        self.wait_before_apply: list[list[list[tuple[int, int]]]] = []
        for i, (_, sends, recvs) in enumerate(steps):
            out += [(i, k, a, b) for k, (_, a, b) in enumerate(sends)]
            if i + 1 < len(steps):
                self.wait_before_post.append(
                    settle([(a, b) for _, a, b, v, _ in steps[i + 1][2] if v is None]))
            self.wait_before_apply.append(
                [settle([(a, b) for a, b, _, _ in applies]) for *_, applies in recvs])
        self.wait_at_end = [(j, k) for j, k, _, _ in out]

    def ops(self, flat: torch.Tensor) -> list[_Ops]:
        """Per active step: send ops, receive ops and apply views for ``flat``; cached for
        the last buffer seen (the cached views keep that buffer alive, so its address cannot
        be reused by another tensor while it is cached)."""
        ptr = flat.data_ptr()
        if self._ops_for != ptr:
            self._ops = []
            g = self.group
            glob = [peer if g is None else dist.get_global_rank(g, peer)
                    for peer in range(dist.get_world_size(g))]
            cpu = flat.device.type == "cpu"
            for tag, sends, recvs in self.steps:
                into = [flat[a:b] if v is None else v for _, a, b, v, _ in recvs]
                applied = [[(flat[a:b], v, red) for a, b, v, red in applies]
                           for *_, applies in recvs]
                if cpu:
                    self._ops.append((
                        [([flat[a:b]], peer, tag) for peer, a, b in sends],
                        [([t], peer, tag) for t, (peer, *_) in zip(into, recvs, strict=True)],
                        applied))
                else:
                    self._ops.append((
                        [dist.P2POp(dist.isend, flat[a:b], glob[peer], g, tag)
                         for peer, a, b in sends],
                        [dist.P2POp(dist.irecv, t, glob[peer], g, tag)
                         for t, (peer, *_) in zip(into, recvs, strict=True)],
                        applied))
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
        seg = self.config.segment_bytes // torch.empty(0, dtype=dtype).element_size()
        sched = build_schedule(self.program, self.plan_rank, numel,
                               segment=seg if device.type == "cpu" and seg > 0 else None)
        prep = _Prepared(sched, self.rank_map, dtype, device, self.group)
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
        steps = prep.ops(flat)
        if not steps:
            return
        try:
            if flat.device.type == "cpu":
                self._run_gloo(prep, steps)
            else:
                # NCCL runs a group's kernels in stream order: early receives could deadlock.
                for sends, recvs, applies in steps:
                    for w in dist.batch_isend_irecv(sends + recvs):
                        w.wait(self._timeout)
                    for a in applies:
                        _apply(a)
        except RuntimeError as exc:
            raise ExecutorError(f"plan {self.program.plan_id}: a step failed on rank "
                                f"{dist.get_rank()}: {exc}") from exc

    def _run_gloo(self, prep: _Prepared, steps: list[_Ops]) -> None:
        """gloo: a step's batch is its sends and receives posted back to back through the
        ProcessGroup (what batch_isend_irecv does on gloo, without its per-op Python
        checks). Receives are posted one step early, so the receiver-ready handshake overlaps
        the previous step; each received segment is applied as soon as it is in, once the
        sends that still read its elements are done; other sends are waited for lazily."""
        timeout = self._timeout
        send, recv = prep.pg.send, prep.pg.recv
        sent: list[list[Any]] = []
        pending = [recv(t, p, tag) for t, p, tag in steps[0][1]]
        last = len(steps) - 1
        for i, (sends, _, applies) in enumerate(steps):
            sent.append([send(t, p, tag) for t, p, tag in sends])
            ahead: list[Any] = []
            if i < last:
                for j, k in prep.wait_before_post[i + 1]:
                    sent[j][k].wait(timeout)
                ahead = [recv(t, p, tag) for t, p, tag in steps[i + 1][1]]
            for w, todo, waits in zip(pending, applies, prep.wait_before_apply[i],
                                      strict=True):
                w.wait(timeout)
                for j, k in waits:
                    sent[j][k].wait(timeout)
                _apply(todo)
            pending = ahead
        for j, k in prep.wait_at_end:
            sent[j][k].wait(timeout)


def _apply(applies: list[tuple[torch.Tensor, torch.Tensor, bool]]) -> None:
    for dst, staged, reduce in applies:
        if reduce:
            dst.add_(staged)
        else:
            dst.copy_(staged)
