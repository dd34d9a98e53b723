"""PlanComm: all-reduce through a plan, or torch's own all-reduce after one clear warning."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from syncplan.core.document import PlanError
from syncplan.executor.engine import PlanExecutor
from syncplan.executor.sparse import SparseConfig, SparseExecutor, SparseStats

if TYPE_CHECKING:
    from syncplan.executor.replan import Replanner

log = logging.getLogger("executor")


class PlanComm:
    """Sums tensors over a process group with ``executor`` when there is one, else with
    ``torch.distributed.all_reduce``. ``reason`` says why there is no plan.

    The fallback warning is logged once, by group rank 0 (other ranks log it at INFO).
    With a ``replanner`` (executor.replan) the comm switches to the service's newer plan
    between two all-reduces, also out of fallback; ``close`` (or leaving a ``with`` block)
    stops its watcher.
    """

    def __init__(
        self,
        executor: PlanExecutor | None,
        group: Any = None,
        *,
        reason: str | None = None,
        replanner: Replanner | None = None,
    ) -> None:
        if executor is None and not reason:
            raise ValueError("a PlanComm without an executor needs a reason")
        self.executor = executor
        self.group = group
        self.reason: str | None = None
        self.replanner = replanner
        self.world_size = dist.get_world_size(group)
        self.sparse_config = SparseConfig()  # settings of sparse_all_reduce
        self._sparse: SparseExecutor | None = None
        if executor is None:
            self._fall_back(str(reason))

    def __enter__(self) -> PlanComm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop watching for new plans; the comm keeps its plan and still meets the other
        ranks at every exchange, so ranks may close at different times."""
        if self.replanner is not None:
            self.replanner.close()

    def adopt(self, executor: PlanExecutor) -> None:
        """Run ``executor``'s plan from the next all-reduce on (every rank at the same call)."""
        self.executor = executor
        self.reason = None
        self._sparse = None

    def refresh(self) -> bool:
        """Collective: switch to the service's newer plan now if there is one that every rank
        admits; True if the plan changed. Without a replanner: False."""
        return self.replanner.exchange(self) if self.replanner is not None else False

    @property
    def using_plan(self) -> bool:
        return self.executor is not None

    def _fall_back(self, reason: str) -> None:
        self.executor = None
        self._sparse = None
        self.reason = reason
        level = logging.WARNING if dist.get_rank(self.group) == 0 else logging.INFO
        log.log(level, "syncplan executor: %s; using torch.distributed.all_reduce instead", reason)

    def all_reduce(self, tensor: torch.Tensor, *, average: bool = False) -> torch.Tensor:
        """Sum (or average) ``tensor`` over the group in place and return it."""
        if self.replanner is not None:
            self.replanner.tick(self)
        if self.executor is not None:
            try:
                self.executor.prepare(tensor.numel(), tensor.dtype, tensor.device)
            except PlanError as exc:
                # Raised before any message, identically on every rank: safe to fall back.
                self._fall_back(
                    f"plan {self.executor.program.plan_id} cannot run on this tensor: {exc}"
                )
        if self.executor is not None:
            self.executor.all_reduce(tensor)
        else:
            dist.all_reduce(tensor, group=self.group)
        if average:
            tensor.div_(self.world_size)
        return tensor

    def sparse_all_reduce(self, tensor: torch.Tensor, *, average: bool = False) -> torch.Tensor:
        """Sum (or average) ``tensor`` in place sending only its non-zero blocks along the
        plan (executor.sparse); the dense plan when the data is denser than the plan's
        ``max_density``; torch's all_reduce without a plan or for a tensor the sparse path
        cannot take (decided identically on every rank before any message)."""
        if self.replanner is not None:
            self.replanner.tick(self)
        if self.executor is not None and self._sparse is None:
            self._sparse = SparseExecutor(self.executor, self.sparse_config)
        done = False
        if self._sparse is not None:
            try:
                self._sparse.all_reduce(tensor)
                done = True
            except PlanError as exc:
                log.debug("sparse path refused this tensor: %s", exc)
        if not done:
            dist.all_reduce(tensor, group=self.group)
        if average:
            tensor.div_(self.world_size)
        return tensor

    @property
    def sparse_block_elems(self) -> int:
        """Elements per block of sparse_all_reduce."""
        if self._sparse is not None:
            return self._sparse.block_elems
        info = self.executor.sparse_info if self.executor is not None else {}
        return int(self.sparse_config.block_elems or info.get("block_elems") or 256)

    @property
    def sparse_stats(self) -> SparseStats | None:
        """What the last sparse_all_reduce did (executor.sparse.SparseStats), or None."""
        return self._sparse.last if self._sparse is not None else None
