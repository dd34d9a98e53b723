"""Coarse-grained sparse all-reduce (lossy, opt-in; GradientFlow's idea): each call sends
only the blocks with the largest norms, a fraction the user sets, through the block-sparse
path; the blocks left out stay on the rank as a residual that is added to the next call's
tensor of the same key (error feedback), so nothing is lost, only delayed."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass

import torch
from syncplan.executor.comm import PlanComm


@dataclass(frozen=True)
class CoarseConfig:
    """``fraction`` of each tensor's blocks (by L2 norm) sent per call; ``block_elems`` None:
    the sparse path's block size (PlanComm.sparse_block_elems)."""

    fraction: float
    block_elems: int | None = None
    max_keys: int = 1024  # residuals kept (one per key); beyond it the oldest is dropped

    def __post_init__(self) -> None:
        if not 0 < self.fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction}")
        if self.block_elems is not None and not 1 <= self.block_elems <= 1 << 20:
            raise ValueError(f"block_elems must be in 1..{1 << 20}, got {self.block_elems}")
        if self.max_keys < 1:
            raise ValueError(f"max_keys must be >= 1, got {self.max_keys}")


class CoarseSparsifier:
    """Keeps one residual per key (a gradient bucket, a parameter)."""

    def __init__(self, config: CoarseConfig) -> None:
        self.config = config
        self.residuals: dict[Hashable, torch.Tensor] = {}

    def select(self, tensor: torch.Tensor, key: Hashable, block_elems: int = 256) -> float:
        """In place: add the key's residual, keep the top blocks (of ``config.block_elems``,
        else ``block_elems``), store the rest as the new residual. Returns the fraction of
        the tensor's squared norm kept."""
        flat = tensor.view(-1)
        res = self.residuals.get(key)
        if res is not None and res.shape == flat.shape and res.dtype == flat.dtype:
            flat.add_(res)
        b = self.config.block_elems or block_elems
        nb = -(-flat.numel() // b)
        if nb == 0:
            return 1.0
        pad = nb * b - flat.numel()
        work = torch.nn.functional.pad(flat, (0, pad)) if pad else flat
        blocks = work.view(nb, b)
        norms = blocks.float().pow(2).sum(dim=1)
        k = max(1, math.ceil(self.config.fraction * nb))
        keep = torch.zeros(nb, dtype=torch.bool, device=flat.device)
        keep[torch.topk(norms, k, sorted=False).indices] = True
        residual = blocks * ~keep[:, None]
        blocks.masked_fill_(~keep[:, None], 0)
        if pad:
            flat.copy_(work[: flat.numel()])
        if key not in self.residuals and len(self.residuals) >= self.config.max_keys:
            self.residuals.pop(next(iter(self.residuals)))
        self.residuals[key] = residual.view(-1)[: flat.numel()].clone()
        total = float(norms.sum())
        return float(norms[keep].sum()) / total if total else 1.0

    def all_reduce(
        self, tensor: torch.Tensor, comm: PlanComm, key: Hashable, *, average: bool = False
    ) -> torch.Tensor:
        """Select (above), then sum the kept blocks over the group with
        ``comm.sparse_all_reduce`` (collective; every rank uses the same keys in order)."""
        if not tensor.is_contiguous():
            flat = tensor.contiguous()
            self.all_reduce(flat, comm, key, average=average)
            tensor.copy_(flat)
            return tensor
        self.select(tensor, key, comm.sparse_block_elems)
        return comm.sparse_all_reduce(tensor, average=average)
