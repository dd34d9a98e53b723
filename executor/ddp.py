"""DDP communication hook and fused all-reduce (tensor fusion) on top of PlanComm.

No ``from __future__ import annotations`` here: DDP inspects the hook's real annotations.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from syncplan.executor.coarse import CoarseSparsifier
from syncplan.executor.comm import PlanComm


def plan_allreduce_hook(
    state: PlanComm, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """``model.register_comm_hook(comm, plan_allreduce_hook)``: average each gradient
    bucket over the group with the plan (as DDP's default hook does: divide, then sum)."""
    buf = bucket.buffer()
    buf.div_(state.world_size)
    if state.executor is None:
        work = dist.all_reduce(buf, group=state.group, async_op=True)
        return work.get_future().then(lambda f: f.value()[0])
    state.all_reduce(buf)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


@dataclass
class SparseHookState:
    """State of ``sparse_allreduce_hook``: buckets holding a parameter of ``sparse_params``
    (for example ``embedding_params(model)``) take the sparse path, with ``coarse`` (lossy,
    opt-in) selecting their top blocks first; other buckets take the plan."""

    comm: PlanComm
    sparse_params: frozenset
    coarse: CoarseSparsifier | None = None
    sparse_calls: int = 0


def embedding_params(model: torch.nn.Module) -> frozenset:
    """Ids of the parameters of the model's ``nn.Embedding`` and ``nn.EmbeddingBag``."""
    kinds = (torch.nn.Embedding, torch.nn.EmbeddingBag)
    return frozenset(
        id(p) for m in model.modules() if isinstance(m, kinds) for p in m.parameters(recurse=False)
    )


def sparse_allreduce_hook(
    state: SparseHookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """``model.register_comm_hook(SparseHookState(comm, embedding_params(model)),
    sparse_allreduce_hook)``: average each bucket over the group; a bucket with an
    embedding's gradient sends only its non-zero blocks (``comm.sparse_all_reduce``)."""
    if not any(id(p) in state.sparse_params for p in bucket.parameters()):
        return plan_allreduce_hook(state.comm, bucket)
    buf = bucket.buffer()
    buf.div_(state.comm.world_size)
    if state.coarse is not None:
        state.coarse.select(buf, bucket.index(), state.comm.sparse_block_elems)
    state.comm.sparse_all_reduce(buf)
    state.sparse_calls += 1
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(buf)
    return fut


@dataclass
class TensorFusion:
    """Reusable fusion buffers, one per (dtype, device), holding up to ``bucket_bytes``."""

    bucket_bytes: int = 64 << 20
    _buffers: dict[tuple[torch.dtype, torch.device], torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be >= 1, got {self.bucket_bytes}")

    def buffer(self, dtype: torch.dtype, device: torch.device, numel: int) -> torch.Tensor:
        key = (dtype, device)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(numel, dtype=dtype, device=device)
            self._buffers[key] = buf
        return buf[:numel]

    def buckets(self, tensors: Sequence[torch.Tensor]) -> list[list[torch.Tensor]]:
        """Group tensors by (dtype, device) in order, each group cut at ``bucket_bytes``."""
        groups: dict[tuple[torch.dtype, torch.device], list[list[torch.Tensor]]] = {}
        filled: dict[tuple[torch.dtype, torch.device], int] = {}
        for t in tensors:
            key = (t.dtype, t.device)
            lists = groups.setdefault(key, [[]])
            nbytes = t.numel() * t.element_size()
            if lists[-1] and filled[key] + nbytes > self.bucket_bytes:
                lists.append([])
                filled[key] = 0
            lists[-1].append(t)
            filled[key] = filled.get(key, 0) + nbytes
        return [b for lists in groups.values() for b in lists if b]


def fused_allreduce(
    tensors: Sequence[torch.Tensor],
    comm: PlanComm,
    *,
    average: bool = False,
    fusion: TensorFusion | None = None,
) -> None:
    """Sum (or average) every tensor over the group in place, packing them into few large
    buffers first so each plan run moves many small tensors at once."""
    fusion = fusion if fusion is not None else TensorFusion()
    for bucket in fusion.buckets(tensors):
        if len(bucket) == 1 and bucket[0].is_contiguous():
            comm.all_reduce(bucket[0], average=average)
            continue
        numel = sum(t.numel() for t in bucket)
        flat = fusion.buffer(bucket[0].dtype, bucket[0].device, numel)
        torch.cat([t.reshape(-1) for t in bucket], out=flat)
        comm.all_reduce(flat, average=average)
        views: list[Any] = []
        off = 0
        for t in bucket:
            views.append(flat[off : off + t.numel()].view_as(t))
            off += t.numel()
        torch._foreach_copy_(list(bucket), views)
