"""Block-sparse all-reduce along a plan's program (lossless; OmniReduce's idea on any plan).

The buffer is cut into blocks of ``block_elems`` elements (the last one zero-padded) and the
program's units map to whole blocks (``boundary(u) = u * nblocks // units``). Each call:

1. every rank computes the bitmap of its non-zero blocks and all ranks all-gather them
   (``nblocks / 8`` bytes per rank: the index overhead);
2. every rank measures the density from the bitmaps (the same number on every rank) and
   runs the dense plan instead when it exceeds ``max_density``;
3. every rank replays the program on the bitmaps (``executor.blockflow``), so each message's
   block list is known on both ends; a message carries only the values of its non-zero
   blocks, packed, and a message with none is not sent at all; a reduce adds the packed
   blocks into the union (``index_add_``), a replace copies them and zeroes the blocks the
   sender holds as zero.

gloo runs the dense engine's data-flow order (``syncplan.executor.dataflow.dataflow``) of the same
messages with block ranges; NCCL (or ``schedule="steps"``) one ``batch_isend_irecv`` per step.
A step's reduces into one block are added in rank order, as the dense engine adds them
(``syncplan.executor.blockflow.fold_blocks``), so a direct exchange leaves the same bits everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from syncplan.core.document import PlanError
from syncplan.executor.blockflow import BlockFlow, block_flow, block_ranges
from syncplan.executor.dataflow import APPLY, POST_RECV, POST_SEND, WAIT_RECV, Flow, dataflow
from syncplan.executor.engine import ExecutorError, PlanExecutor, through_contiguous
from syncplan.executor.schedule import RankSchedule, build_schedule

log = logging.getLogger(__name__)

SPARSE_DTYPES = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int32,
    torch.int64,
)
DEFAULT_MAX_DENSITY = 0.5


@dataclass(frozen=True)
class SparseConfig:
    """Settings of a SparseExecutor. ``max_density`` None: the plan's ``sparse.max_density``
    (the planner's break-even density), else DEFAULT_MAX_DENSITY."""

    block_elems: int | None = None  # None: the plan's sparse.block_elems, else 256
    max_density: float | None = None
    schedule: str = "auto"  # "auto": data-flow on gloo, steps on NCCL; "steps": steps
    segment_bytes: int = 1 << 20  # gloo: messages cut at this many bytes of blocks (0: never)
    lookahead_steps: int | None = 4

    def __post_init__(self) -> None:
        if self.block_elems is not None and not 1 <= self.block_elems <= 1 << 20:
            raise ValueError(f"block_elems must be in 1..{1 << 20}, got {self.block_elems}")
        if self.max_density is not None and not 0 <= self.max_density <= 1:
            raise ValueError(f"max_density must be in [0, 1], got {self.max_density}")
        if self.schedule not in ("auto", "steps"):
            raise ValueError(f"schedule must be 'auto' or 'steps', got {self.schedule!r}")
        if self.segment_bytes < 0:
            raise ValueError(f"segment_bytes must be >= 0, got {self.segment_bytes}")
        if self.lookahead_steps is not None and self.lookahead_steps < 0:
            raise ValueError(f"lookahead_steps must be >= 0 or None, got {self.lookahead_steps}")


@dataclass(frozen=True)
class SparseStats:
    """What the last call did: ``mode`` is "sparse", "dense" (density above max_density)
    or "native" (the dense plan cannot serve the tensor: torch's all_reduce)."""

    mode: str
    density: float  # non-zero blocks / blocks, mean over ranks
    rank_density: tuple[float, ...]
    union_density: float  # blocks non-zero on any rank
    traffic_fraction: float  # blocks the program moved, sparse / dense (1.0 when dense)
    max_density: float


class _Prepared:
    """One (block count, block size, dtype, device): schedule and data-flow order."""

    def __init__(
        self, ex: SparseExecutor, nblocks: int, block: int, dtype: torch.dtype, steps: bool
    ) -> None:
        cfg = ex.config
        seg = None
        if cfg.segment_bytes and not steps:
            esize = torch.empty(0, dtype=dtype).element_size()
            seg = max(cfg.segment_bytes // (block * esize), 1)
        self.sched: RankSchedule = build_schedule(
            ex.program, ex.plan_rank, nblocks, segment=seg, stage_all=True, canonical=False
        )
        self.flow: Flow = dataflow(self.sched, None if steps else cfg.lookahead_steps)
        self.ranges = block_ranges(ex.program, nblocks)


class SparseExecutor:
    """Block-sparse all-reduce over the program of ``dense`` (a PlanExecutor), which it runs
    instead when the data is denser than ``max_density``."""

    def __init__(
        self,
        dense: PlanExecutor,
        config: SparseConfig | None = None,
        plan: Mapping[str, Any] | None = None,
    ) -> None:
        self.dense = dense
        self.program = dense.program
        self.plan_rank = dense.plan_rank
        self.rank_map = dense.rank_map
        self.group = dense.group
        cfg = config or SparseConfig()
        info = plan.get("sparse") if isinstance(plan, Mapping) else dense.sparse_info
        info = info if isinstance(info, Mapping) else {}
        self.block_elems = int(cfg.block_elems or info.get("block_elems") or 256)
        if cfg.max_density is not None:
            self.max_density = cfg.max_density
        else:
            self.max_density = float(info.get("max_density", DEFAULT_MAX_DENSITY))
        self.config = cfg
        self._timeout = timedelta(seconds=dense.config.timeout_s)
        self._prepared: dict[tuple[int, int, torch.dtype, bool], _Prepared] = {}
        self.last: SparseStats | None = None

    def prepare(self, nblocks: int, dtype: torch.dtype, device: torch.device | str = "cpu") -> None:
        """Build this rank's schedule for ``nblocks`` blocks ahead of the first call."""
        dev = torch.device(device)
        self._prepare(nblocks, dtype, self.config.schedule == "steps" or dev.type == "cuda")

    def _prepare(self, nblocks: int, dtype: torch.dtype, steps: bool) -> _Prepared:
        key = (nblocks, self.block_elems, dtype, steps)
        prep = self._prepared.get(key)
        if prep is None:
            if len(self._prepared) >= self.dense.config.max_prepared:
                self._prepared.pop(next(iter(self._prepared)))
            prep = self._prepared[key] = _Prepared(self, nblocks, self.block_elems, dtype, steps)
        return prep

    def bitmaps(self, blocks: torch.Tensor) -> np.ndarray:
        """All ranks' non-zero-block bitmaps (plan rank order), all-gathered packed. A block
        holding only zeros of either sign is zero: a -0.0 there may stay -0.0 on its rank
        while the others hold +0.0 (equal values; the sign of a zero may differ)."""
        mine = blocks.ne(0).any(dim=1)
        packed = torch.from_numpy(np.packbits(mine.cpu().numpy())).to(blocks.device)
        world = dist.get_world_size(self.group)
        got = [torch.empty_like(packed) for _ in range(world)]
        dist.all_gather(got, packed, group=self.group)
        rows = np.stack([t.cpu().numpy() for t in got])
        bits = np.unpackbits(rows, axis=1, count=blocks.shape[0]).astype(bool)
        return bits[list(self.rank_map)]

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over all ranks in place, sending only non-zero blocks (collective:
        every rank calls it with the same element count and dtype); return it."""
        if not tensor.is_contiguous():
            return through_contiguous(tensor, self.all_reduce)
        flat = tensor.view(-1)
        if flat.dtype not in SPARSE_DTYPES:
            raise PlanError(f"dtype {flat.dtype} is not supported by the sparse path")
        self._check_device(flat.device)
        if flat.numel() == 0:
            return tensor
        b = self.block_elems
        nblocks = -(-flat.numel() // b)
        probe = self._probe(flat, b)
        if probe > self.max_density:  # surely denser: skip the bitmap pass and all-gather
            mode = self._run_dense(flat)
            self.last = SparseStats(mode, probe, (), float("nan"), 1.0, self.max_density)
            return tensor
        if flat.numel() % b:
            work = torch.zeros(nblocks * b, dtype=flat.dtype, device=flat.device)
            work[: flat.numel()] = flat
        else:
            work = flat
        blocks = work.view(nblocks, b)
        bits = self.bitmaps(blocks)
        rank_density = tuple(float(r.mean()) if nblocks else 0.0 for r in bits)
        density = float(np.mean(rank_density)) if nblocks else 0.0
        union = float(bits.any(axis=0).mean()) if nblocks else 0.0
        if density > self.max_density:
            mode = self._run_dense(flat)
            self.last = SparseStats(mode, density, rank_density, union, 1.0, self.max_density)
            return tensor
        steps = self.config.schedule == "steps" or flat.device.type == "cuda"
        prep = self._prepare(nblocks, flat.dtype, steps)
        bf = block_flow(self.program, self.plan_rank, bits, prep.flow, prep.sched, prep.ranges)
        try:
            if steps:
                self._run_steps(prep, bf, blocks)
            else:
                self._run_flow(prep, bf, blocks)
        except RuntimeError as exc:
            raise ExecutorError(
                f"plan {self.program.plan_id}: a sparse transfer failed on "
                f"rank {dist.get_rank()}: {exc}"
            ) from exc
        if work is not flat:
            flat.copy_(work[: flat.numel()])
        self.last = SparseStats(
            "sparse", density, rank_density, union, bf.traffic_fraction, self.max_density
        )
        return tensor

    def _probe(self, flat: torch.Tensor, b: int) -> float:
        """A cheap lower bound on the density, the same on every rank: the fraction of
        blocks whose first element is non-zero, averaged over the ranks (one small
        all-reduce). Dense data is sent to the dense plan without the full bitmap pass."""
        nfull = flat.numel() // b
        first = flat[: nfull * b].view(nfull, b)[:, 0] if nfull else flat[:0]
        hits = torch.tensor(
            [float(first.ne(0).sum()) if nfull else 0.0, float(max(nfull, 1))],
            dtype=torch.float64,
            device=flat.device,
        )
        dist.all_reduce(hits, group=self.group)
        return float(hits[0] / hits[1])

    def _check_device(self, device: torch.device) -> None:
        backend = self.dense.backend
        if device.type == "cuda" and "nccl" not in backend:
            raise PlanError(f"CUDA tensors need an NCCL process group, not {backend!r}")
        if device.type == "cpu" and "gloo" not in backend:
            raise PlanError(f"CPU tensors need a gloo process group, not {backend!r}")

    def _run_dense(self, flat: torch.Tensor) -> str:
        """The dense plan, or torch's all_reduce where the plan cannot serve this tensor
        (decided before any message, identically on every rank)."""
        try:
            self.dense.prepare(flat.numel(), flat.dtype, flat.device)
        except PlanError:
            dist.all_reduce(flat, group=self.group)
            return "native"
        self.dense.all_reduce(flat)
        return "dense"

    def _buffers(
        self, bf: BlockFlow, blocks: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """Packed send and receive buffers (rows of blocks), the send index tensors and the
        whole receive buffer."""
        b, dev = blocks.shape[1], blocks.device
        ns = [len(x) for x in bf.send_blocks]
        nr = [len(x) for x in bf.recv_blocks]
        sbuf = torch.empty(sum(ns), b, dtype=blocks.dtype, device=dev)
        rbuf = torch.empty(sum(nr), b, dtype=blocks.dtype, device=dev)
        sends, recvs, off = [], [], 0
        for k in ns:
            sends.append(sbuf[off : off + k])
            off += k
        off = 0
        for k in nr:
            recvs.append(rbuf[off : off + k])
            off += k
        sidx = [torch.from_numpy(x).to(dev) for x in bf.send_blocks]
        return sends, recvs, sidx, rbuf

    def _apply(
        self, blocks: torch.Tensor, bf: BlockFlow, j: int, rows: torch.Tensor, whole: torch.Tensor
    ) -> None:
        dev = blocks.device

        def t(x: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(x).to(dev)

        fold = bf.recv_folds[j] if bf.recv_folds else None
        if fold is not None and len(fold.acc_src):  # partial sums of lower ranks' rows
            whole.index_add_(0, t(fold.acc_dst), whole[t(fold.acc_src)])
        for part in bf.recv_parts[j]:
            if len(part.blocks):
                idx = t(part.blocks)
                src = rows[part.lo : part.hi] if part.rows is None else rows[t(part.rows)]
                if part.reduce:
                    blocks.index_add_(0, idx, src)
                else:
                    blocks.index_copy_(0, idx, src)
            if len(part.zero):
                blocks.index_fill_(0, t(part.zero), 0)
        if fold is not None and len(fold.fin_rows):
            blocks.index_add_(0, t(fold.fin_blocks), whole[t(fold.fin_rows)])

    def _run_flow(self, prep: _Prepared, bf: BlockFlow, blocks: torch.Tensor) -> None:
        flow = prep.flow
        pg = self.group if self.group is not None else dist.group.WORLD
        assert pg is not None  # __init__ already asked the initialised default group its size
        rmap = self.rank_map
        sbufs, rbufs, sidx, whole = self._buffers(bf, blocks)
        sent: list[Any] = [None] * len(flow.sends)
        got: list[Any] = [None] * len(flow.recvs)
        t = self._timeout
        for op, i in flow.instructions:
            if op == WAIT_RECV:
                if got[i] is not None:
                    got[i].wait(t)
            elif op == POST_SEND:
                if len(sidx[i]):
                    peer, _, _, tag = flow.sends[i]
                    torch.index_select(blocks, 0, sidx[i], out=sbufs[i])
                    sent[i] = pg.send([sbufs[i].view(-1)], rmap[peer], tag)
            elif op == POST_RECV:
                if len(rbufs[i]):
                    peer, _, _, tag = flow.recvs[i]
                    got[i] = pg.recv([rbufs[i].view(-1)], rmap[peer], tag)
            elif op == APPLY:
                self._apply(blocks, bf, i, rbufs[i], whole)
            elif sent[i] is not None:
                sent[i].wait(t)

    def _run_steps(self, prep: _Prepared, bf: BlockFlow, blocks: torch.Tensor) -> None:
        """One batch_isend_irecv per step, then the step's applies (the NCCL path)."""
        g = self.group
        glob = [dist.get_global_rank(g, r) if g is not None else r for r in self.rank_map]
        sbufs, rbufs, sidx, whole = self._buffers(bf, blocks)
        si = ri = 0
        for step in prep.sched.steps:
            ops, mine = [], []
            for snd in step.sends:
                if len(sidx[si]):
                    torch.index_select(blocks, 0, sidx[si], out=sbufs[si])
                    ops.append(dist.P2POp(dist.isend, sbufs[si].view(-1), glob[snd.peer], g))
                si += 1
            for rcv in step.recvs:
                if len(rbufs[ri]):
                    ops.append(dist.P2POp(dist.irecv, rbufs[ri].view(-1), glob[rcv.peer], g))
                mine.append(ri)
                ri += 1
            if ops:
                for w in dist.batch_isend_irecv(ops):
                    w.wait(self._timeout)
            for j in mine:
                self._apply(blocks, bf, j, rbufs[j], whole)
