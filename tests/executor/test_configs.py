"""Settings are validated where they are made; tensor fusion groups without a process group."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from syncplan.core.document import PlanError
from syncplan.executor.bench import BenchCase
from syncplan.executor.ddp import TensorFusion
from syncplan.executor.engine import ExecutorConfig, PlanExecutor
from syncplan.executor.localrun import LocalRunConfig

from tests.executor.plans import ring_plan


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ExecutorConfig(timeout_s=0), "timeout_s"),
        (lambda: ExecutorConfig(max_prepared=0), "max_prepared"),
        (lambda: ExecutorConfig(segment_bytes=-1), "segment_bytes"),
        (lambda: ExecutorConfig(schedule="fast"), "schedule"),
        (lambda: LocalRunConfig(nprocs=0), "nprocs"),
        (lambda: LocalRunConfig(nprocs=2, timeout_s=-1), "timeout_s"),
        (lambda: BenchCase(numel=0), "numel"),
        (lambda: BenchCase(numel=5, repeat=0), "repeat"),
        (lambda: TensorFusion(bucket_bytes=0), "bucket_bytes"),
    ],
)
def test_bad_settings_are_named(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_executor_needs_a_process_group() -> None:
    with pytest.raises(PlanError, match="not initialised"):
        PlanExecutor(ring_plan(2))


def test_fusion_buckets_by_dtype_and_size() -> None:
    f = TensorFusion(bucket_bytes=64)
    ts = [
        torch.zeros(8),
        torch.zeros(8, dtype=torch.float16),
        torch.zeros(4),
        torch.zeros(20),
        torch.zeros(2, dtype=torch.float16),
    ]
    buckets = f.buckets(ts)
    assert [[t.numel() for t in b] for b in buckets] == [[8, 4], [20], [8, 2]]
    assert [b[0].dtype for b in buckets] == [torch.float32, torch.float32, torch.float16]
    buf = f.buffer(torch.float32, torch.device("cpu"), 12)
    assert (
        buf.numel() == 12
        and f.buffer(torch.float32, torch.device("cpu"), 5).data_ptr() == buf.data_ptr()
    )  # reused, not reallocated
